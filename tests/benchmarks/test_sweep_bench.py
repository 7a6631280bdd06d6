"""The sweep benchmark's run-by-run numerics check: exact equality, and a named first difference."""

import pytest

from benchmarks.sweep_speed import compare


def test_compare_counts_identical_runs_and_names_the_first_differing_metric():
    run = {"kl": [(0, 0.0), (1, 0.25)], "snr": [(0, 1.5), (1, 1.25)]}
    before = {("anchor", "0"): run, ("anchor", "1"): run, ("swiss", "0"): run}
    after = {
        ("anchor", "0"): {k: list(v) for k, v in run.items()},
        ("anchor", "1"): {"kl": run["kl"], "snr": [(0, 1.5), (1, 1.25 + 2**-50)]},  # one ulp-ish
    }
    got = compare(before, after)
    assert got["runs"] == 3 and got["identical"] == 1 and got["points"] == 12
    assert got["differing"] == {"anchor seed 1": "snr", "swiss seed 0": "missing on one path"}


def test_arm_finals_pair_each_seeds_last_value_across_the_paths():
    from benchmarks.sweep_speed import arm_finals

    def run(*values):
        return {"eval_sampled_quality": [(0, 0.0), (9, values[0])], "kl": [(0, values[-1])]}

    before = {("a", "0"): run(1.0), ("a", "1"): run(3.0), ("b", "0"): run(2.0)}
    after = {("a", "0"): run(2.0), ("a", "1"): run(5.0), ("b", "0"): run(2.5)}
    a, b = arm_finals(before, after)
    assert (a["arm"], a["seeds"], a["before"], a["after"], a["diff"], a["same"]) == ("a", 2, 2.0, 3.5, 1.5, 0)
    assert (a["before_se"], a["after_se"], a["diff_se"]) == pytest.approx((1.0, 1.5, 0.5))  # std(ddof=1)/√2
    assert (b["diff"], b["seeds"]) == (0.5, 1) and b["diff_se"] != b["diff_se"]  # one seed: no SE
