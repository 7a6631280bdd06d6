"""The sweep benchmark's run-by-run numerics check: exact equality, and a named first difference."""

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
