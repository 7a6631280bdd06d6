"""Registry errors, pickling, the CLI and the fidelity study's output contract."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import kendalltau, pearsonr, spearmanr

from arenabench import Group, cli, rewards
from arenabench.fidelity import BASELINE, CI_COLUMNS, COLUMNS, PAIRED_COLUMNS, SUMMARY_COLUMNS, run_fidelity
from arenabench.metrics import kendall_tau_b, pearson, spearman
from arenabench.registry import UnknownNameError
from arenabench.rewards.brackets import bracket_order, seeded_slots

ARENARL = {"pointwise", "round_robin", "anchor", "seeded_single_elim", "double_elim", "swiss"}


def test_every_arenarl_topology_is_registered():
    assert set(rewards.names()) >= ARENARL


def test_unknown_constructor_lists_names_and_suggests():
    with pytest.raises(UnknownNameError) as e:
        rewards.get("seeded_single_elimination")
    msg = str(e.value)
    assert "registered: " + ", ".join(rewards.names()) in msg
    assert "Did you mean 'seeded_single_elim'?" in msg


def test_unknown_or_bad_params_name_the_valid_ones():
    with pytest.raises(TypeError, match="valid: votes, ddof, seeding, grand_final_reset"):
        rewards.get("double_elim", seed="random")
    with pytest.raises(ValueError, match="seeding must be one of random, anchor"):
        rewards.get("double_elim", seeding="swiss")
    with pytest.raises(ValueError, match="votes must be an integer >= 1"):
        rewards.get("round_robin", votes=0)


@pytest.mark.parametrize("name", sorted(ARENARL))
def test_constructors_pickle(name):
    c = rewards.get(name)
    assert pickle.loads(pickle.dumps(c)) == c


def test_group_size_below_one_is_an_error_and_fidelity_needs_two():
    with pytest.raises(ValueError, match="N >= 1"):
        Group("p", ())
    for n in (0, 1):  # one answer has no ranking: τ 0.000, top-1 1.000 would be meaningless
        with pytest.raises(ValueError, match="group size must be >= 2"):
            run_fidelity(["anchor"], group_size=n, n_groups=2, progress=False)


def test_bracket_layout():
    assert bracket_order(8) == [1, 8, 4, 5, 2, 7, 3, 6]
    assert seeded_slots(["a", "b", "c", "d", "e"]) == ["a", None, "d", "e", "b", None, "c", None]


def test_metrics_match_scipy():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.integers(0, 4, 9).astype(float)  # with ties
        y = rng.standard_normal(9)
        assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y).statistic)
        assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
        assert pearson(x, y) == pytest.approx(pearsonr(x, y).statistic)
    assert kendall_tau_b(np.ones(4), np.arange(4)) == 0.0


@pytest.mark.slow
def test_fidelity_json_has_the_keys_for_every_constructor(capsys):
    assert cli.main(["fidelity", "--groups", "6", "-N", "5", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["constructor"] for r in rows] == rewards.names()
    for r in rows:
        head = COLUMNS + CI_COLUMNS + PAIRED_COLUMNS  # round_robin is among them: the paired columns
        assert list(r)[: len(head)] == head
        assert set(r) - set(head) <= set(SUMMARY_COLUMNS)
        assert r["group_size"] == 5
    by = {r["constructor"]: r for r in rows}
    assert set(by["adaptive"]) >= {"routed", "zero_adv_before"}
    assert "prob_extreme" in by["prc"] and "cyclic" in by["rrc_scr"]
    assert by["rrc_agr"]["reference_rollouts"] == 4  # each prompt's pool made once


@pytest.mark.slow
def test_fidelity_noiseless_is_perfect_and_counts_are_exact():
    rows = {
        r["constructor"]: r
        for r in run_fidelity(judge="noiseless", group_size=8, n_groups=20, progress=False)
    }
    for name in ("round_robin", "anchor", "seeded_single_elim"):
        assert rows[name]["kendall_tau"] == pytest.approx(1.0)
        assert rows[name]["top1"] == 1.0
    assert rows["seeded_single_elim"]["comparisons_per_group"] == 14
    assert rows["seeded_single_elim"]["judge_calls_per_group"] == 28
    assert rows["seeded_single_elim"]["waves"] == 4
    assert rows["round_robin"]["comparisons_per_group"] == 28


@pytest.mark.slow
def test_fidelity_orders_topologies_on_the_calibrated_judge():
    """Statistical (seed 0, 400 groups, N=8): round-robin > seeded single-elim > anchor > pointwise
    in Kendall τ — the ordering ArenaRL's Table 2 reports — each gap well above its s.e. (~0.01)."""
    rows = {r["constructor"]: r["kendall_tau"] for r in run_fidelity(n_groups=400, progress=False)}
    assert rows["round_robin"] > rows["seeded_single_elim"] + 0.02
    assert rows["seeded_single_elim"] > rows["anchor"] + 0.005
    assert rows["anchor"] > rows["pointwise"] + 0.1


@pytest.mark.slow
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    for args in (
        ["fidelity", "--constructors", "round_robn"],
        ["fidelity", "-N", "0"],
        ["fidelity", "--judge", "perfect"],
    ):
        p = subprocess.run([sys.executable, "-m", "arenabench", *args], capture_output=True, text=True)
        assert p.returncode == 2
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("arenabench: error:")
    assert (
        "Did you mean 'round_robin'"
        in subprocess.run(
            [sys.executable, "-m", "arenabench", "fidelity", "--constructors", "round_robn"],
            capture_output=True,
            text=True,
        ).stderr
    )


def test_cli_list_and_plot(tmp_path, capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in rewards.names():
        assert name in out
    png = tmp_path / "f.png"
    assert (
        cli.main(
            [
                "fidelity",
                "--groups",
                "4",
                "--constructors",
                "anchor,round_robin",
                "--plot",
                str(png),
                "--format",
                "csv",
                "-o",
                str(tmp_path / "f.csv"),
            ]
        )
        == 0
    )
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "f.csv").read_text().splitlines()[0] == ",".join(COLUMNS + CI_COLUMNS + PAIRED_COLUMNS)


def test_fidelity_paired_columns_are_the_paired_differences_from_round_robin():
    """The paired columns are stats.paired_t of the per-group values, row minus round-robin,
    over the same groups: the mean difference equals the difference of the row means."""
    rows = {r["constructor"]: r for r in run_fidelity(["anchor", BASELINE], n_groups=40, progress=False)}
    a, rr = rows["anchor"], rows[BASELINE]
    col = f"kendall_tau_vs_{BASELINE}"
    assert a[col] == pytest.approx(a["kendall_tau"] - rr["kendall_tau"], abs=1e-12)
    assert rr[col] == 0.0 and rr[f"{col}_ci95"] == 0.0  # the baseline against itself
    assert 0 < a[f"{col}_ci95"] < 0.5 and 0 <= a[f"{col}_p"] <= 1


def test_fidelity_ci_covers_the_mean_of_fresh_groups():
    """Statistical (fixed seeds): the τ half-width from 100 groups is the s.e. scale of the
    mean over groups: two disjoint 100-group samples' means differ by less than twice it."""
    a = run_fidelity(["anchor"], group_size=8, n_groups=100, seed=0, progress=False)[0]
    b = run_fidelity(["anchor"], group_size=8, n_groups=100, seed=1, progress=False)[0]
    assert 0.005 < a["kendall_tau_ci95"] < 0.1
    assert abs(a["kendall_tau"] - b["kendall_tau"]) < 2 * max(a["kendall_tau_ci95"], b["kendall_tau_ci95"])
