"""experiments/table2_report.py and the compare figures it uses, on a tiny real sweep (the real
trainer from the warm start, logged through the real Tracker into a temporary sqlite store)."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

pytestmark = pytest.mark.slow  # trains 21 tiny runs

ROOT = Path(__file__).resolve().parents[1]


def _env():
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}


ARMS = ("pointwise", "seeded_single_elim", "oracle")
SEEDS = (0, 1, 2)
STEPS = 5


def _log(uri, experiment, reward, seed, extra=()):
    from arenabench.tracking import Tracker
    from arenabench.trainers.local.trainer import train

    overrides = [f"reward={reward}", *extra]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                f"experiment={experiment.removesuffix('_gpt4_llmbar')}",  # a per-judge rerun: its design
                *overrides,
                f"seed={seed}",
                f"steps={STEPS}",
                "eval_every=2",
            ],
        )
    tags = {
        "constructor": reward,
        "reward": reward,
        "setting": " ".join(overrides),
        "overrides": " ".join([*overrides, f"seed={seed}"]),
        "seed": str(seed),
        "sweep": "s1",
        "git_commit": "c0ffee",
    }
    with Tracker(experiment, run_name=f"{reward}-{seed}", tags=tags, uri=uri) as tr:
        tr.log_params({"steps": STEPS, "init.seed": OmegaConf.select(cfg, "init.seed")})  # as run_job logs it
        train(OmegaConf.to_container(cfg, resolve=True), tracker=tr, progress=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"
    for reward in ARMS:
        for seed in SEEDS:
            _log(uri, "table2", reward, seed)
    for n in (2, 4):
        for reward in ("pointwise", "seeded_single_elim"):
            for seed in (0, 1):
                _log(uri, "group_size", reward, seed, extra=[f"group_size={n}"])
    for reward in ("prc", "rrc_scr"):  # an experiment with its own baseline arm
        for seed in (0, 1):
            _log(uri, "rrc", reward, seed)
    for reward in ("rlvr", "adaptive"):  # Reasoning Arena: the verifier's pass rate too
        for seed in (0, 1):
            _log(uri, "reasoning_arena", reward, seed)
    for reward in ("pointwise", "seeded_single_elim", "pointwise_budget"):  # a per-judge rerun
        for seed in (0, 1):
            _log(uri, "table2_gpt4_llmbar", reward, seed, extra=["judge=gpt4_llmbar"])
    return uri


def test_select_runs_by_column_or_override_token(store):
    from arenabench.compare import load_runs, select_runs

    runs = load_runs("group_size", uri=store)
    assert len(select_runs(runs, None)) == 8
    four = select_runs(runs, {"group_size": "4"})
    assert len(four) == 4 and all("group_size=4" in o.split() for o in four["overrides"])
    assert len(select_runs(runs, {"group_size": "4", "reward": "pointwise"})) == 2
    assert select_runs(runs, {"group_size": "4"}).attrs["metric_keys"] == runs.attrs["metric_keys"]
    assert len(select_runs(runs, {"seed": ["0"]})) == 4  # a list: any of its values


def test_arm_stats_where_pairs_within_one_group_size(store):
    from arenabench.compare import arm_stats

    t = arm_stats(
        "group_size", "eval_sampled_quality", uri=store, by="reward", baseline="pointwise",
        where={"group_size": "2"},
    )  # fmt: skip
    assert list(t["arm"]) == ["pointwise", "seeded_single_elim"] and set(t["n"]) == {2}
    assert t.attrs["where"] == {"group_size": "2"}
    both = arm_stats("group_size", "eval_sampled_quality", uri=store, by="reward")
    assert set(both["n"]) == {4}


def test_figures_of_arm_stats_and_curves(store, tmp_path):
    from arenabench.compare import (
        arm_stats,
        collapse_figure,
        curves_figure,
        metric_curves,
        paired_difference_figure,
        stats_frontier_figure,
        sweep_figure,
    )

    t = arm_stats("table2", "eval_sampled_quality", uri=store, by="reward", baseline="pointwise")
    fig = paired_difference_figure(t, path=tmp_path / "d.png")
    assert len(fig.axes) == 2 and (tmp_path / "d.png").stat().st_size > 0
    # one point per non-baseline arm in each panel
    assert [len(ax.get_yticks()) for ax in fig.axes] == [len(ARMS) - 1] * 2
    with pytest.raises(ValueError, match="baseline"):
        paired_difference_figure(arm_stats("table2", "eval_sampled_quality", uri=store, by="reward"))
    fig = stats_frontier_figure(t, steps=STEPS, path=tmp_path / "f.png")
    oracle = t[t["arm"] == "oracle"].iloc[0]
    assert oracle["judge_calls"] == 0 and (tmp_path / "f.png").exists()
    sg = metric_curves("table2", "sigma_group", uri=store, by="reward")
    sn = metric_curves("table2", "sigma_noise", uri=store, by="reward")
    fig = collapse_figure(sg, sn)  # small multiples: one panel per arm, σ_group and σ_noise in each
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in panels) == sorted(ARMS)
    assert all(len(ax.get_lines()) == 2 for ax in panels)
    fig = curves_figure(metric_curves("table2", "entropy", uri=store, by="reward"), "entropy")
    assert len(fig.axes[0].get_lines()) == len(ARMS)
    tables = {
        n: arm_stats(
            "group_size", "eval_sampled_quality", uri=store, by="reward", where={"group_size": str(n)}
        )
        for n in (2, 4)
    }
    assert len(sweep_figure(tables, "N").axes[0].get_lines()) >= 2


def test_report_writes_tables_with_paired_stats_and_pngs(store, tmp_path):
    import os

    import pandas as pd

    out = tmp_path / "train"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "table2_report.py"), "--out", str(out), "--uri", store,
         "--experiments", "table2", "group_size", "table2_hard", "rrc", "reasoning_arena"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skip table2_hard" in proc.stdout  # not in the store: skipped, not an error
    text = (out / "table2.md").read_text()
    needles = ("seeds 0, 1, 2", "steps 5", "`c0ffee`", "Simulator caveat", "eval_sampled_quality")
    needles += ("Δ final vs pointwise", "Δ AUC vs pointwise", "judge calls / step", "adv–oracle")
    for needle in needles:
        assert needle in text, needle
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert {r.split("|")[1].strip(" `") for r in rows} >= set(ARMS)
    oracle = next(r for r in rows if r.startswith("| `oracle`")).split("|")
    assert oracle[3].strip() == "0.0" and oracle[4].strip() == "0"  # judge calls, tokens per step
    assert oracle[6].strip().startswith(("+", "-")) and "[" in oracle[6]  # Δ final with a CI
    pw = next(r for r in rows if r.startswith("| `pointwise`")).split("|")
    assert float(pw[4].replace(",", "")) > 0  # pointwise requests: the scoring prompt (issue 41)
    rr = next(r for r in rows if r.startswith("| `seeded_single_elim`")).split("|")
    assert float(rr[4].replace(",", "")) > 0  # pairwise requests: the tokens a real judge is sent
    pngs = ("paired_diff", "frontier", "frontier_tokens", "curves", "collapse", "snr", "entropy")
    for png in (*pngs, "adv_oracle_pearson"):
        assert (out / f"table2_{png}.png").stat().st_size > 0, png
    ra = (out / "reasoning_arena.md").read_text()  # the pass-rate curve (issue 40.5)
    assert (out / "reasoning_arena_pass_rate.png").stat().st_size > 0
    assert "reasoning_arena_pass_rate.png" in ra
    gs = (out / "group_size.md").read_text()
    assert "### N = 2" in gs and "### N = 4" in gs and (out / "group_size_final.png").exists()
    # N = 8 comes from the table2 sweep (the same jobs), restricted to the group_size arms
    n8 = gs.split("### N = 8 (from the table2 sweep")[1].split("###")[0]
    assert {r.split("|")[1].strip(" `") for r in n8.splitlines() if r.startswith("| `")} == {
        "pointwise",
        "seeded_single_elim",
    }
    rrc = (out / "rrc.md").read_text()  # paired against its own baseline (PRC), on its own judge preset
    assert "Δ final vs prc" in rrc and "## Arms vs prc" in rrc and "`cot` preset" in rrc
    scr = next(r for r in rrc.splitlines() if r.startswith("| `rrc_scr`")).split("|")
    assert scr[6].strip().startswith(("+", "-")) and "[" in scr[6]

    for needle in ("mean SNR (steps)", "tie rate", "Start checkpoint(s), content sha256", "## Runs"):
        assert needle in text, needle
    snr_cell = next(r for r in rows if r.startswith("| `pointwise`")).split("|")[15]
    assert snr_cell.strip().endswith(f"/{STEPS * len(SEEDS)})")  # over how many step values
    runs = pd.read_csv(out / "table2_runs.csv", dtype={"seed": str})
    assert len(runs) == len(ARMS) * len(SEEDS) and runs["init_sha256"].notna().all()
    assert {"arm", "seed", "judge_calls", "eval_sampled_quality_final", "eval_sampled_quality_auc"} <= set(
        runs
    )
    assert runs[runs["arm"] == "pointwise"]["tie_rate"].isna().all()  # pointwise compares nothing
    assert (runs[runs["arm"] == "seeded_single_elim"]["tie_rate"] >= 0).all()
    assert len(pd.read_csv(out / "group_size_runs.csv")) == 8 + 2 * len(SEEDS)  # N = 2, 4 + N = 8 from table2
    stats = pd.read_csv(out / "table2_stats.csv")
    assert {"arm", "final", "d_final", "p_final", "auc", "d_auc"} <= set(stats.columns)
    assert not math.isnan(stats[stats["arm"] == "oracle"]["d_final"].iloc[0])


def test_runs_table_one_row_per_run_and_compare_against(store, tmp_path, capsys):
    """The per-run table a report commits, and `arenabench compare --against` diffing a store
    against it: identical runs exit 0; a changed value or checkpoint hash is listed, exit 1."""
    import pandas as pd

    from arenabench.cli import main
    from arenabench.compare import diff_runs, runs_table
    from arenabench.trainers.local import sft

    t = runs_table("table2", ["eval_sampled_quality", "snr"], uri=store, by="reward", params=("init.seed",))
    assert len(t) == len(ARMS) * len(SEEDS) and set(t["arm_by"]) == {"reward"}
    assert {(a, s) for a, s in zip(t["arm"], t["seed"], strict=True)} == {
        (a, str(s)) for a in ARMS for s in SEEDS
    }
    shipped = {
        e["sha256"] for e in sft.manifest().values() if e["name"] == "task=preference init=sft init.seed=0"
    }
    assert set(t["init_sha256"]) == shipped  # every run tagged with the shipped start's hash
    assert (t["snr_points"] + t["snr_nan_steps"] <= STEPS).all() and (
        t["eval_sampled_quality_points"] == len(set(range(0, STEPS, 2)) | {STEPS - 1})  # eval_every=2
    ).all()
    assert set(t["init_seed"]) == {"0"}
    path = tmp_path / "table2_runs.csv"
    t.to_csv(path, index=False)
    back = pd.read_csv(path, dtype={"seed": str, "init_sha256": str})
    d = diff_runs(back, t)
    assert d["same"].all() and set(d["present"]) == {"both"}  # CSV floats round-trip exactly
    assert main(["compare", "-e", "table2", "--uri", store, "--against", str(path)]) == 0
    assert "9 runs in both; 9 identical" in capsys.readouterr().err
    back.loc[0, "eval_sampled_quality_final"] += 1e-9
    back.loc[1, "init_sha256"] = "f" * 64
    back.to_csv(path, index=False)
    assert main(["compare", "-e", "table2", "--uri", store, "--against", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "7 identical in every quantity" in err and "equal in 8 of 9 runs" in err
    assert "eval_sampled_quality_final" in out and "init_sha256" in out


def test_per_judge_reports_and_the_judge_table(store, tmp_path):
    """A sweep rerun under a fitted judge (``table2_<judge>``): its report names the judge and says what
    is measured vs assumed instead of the simulator caveat, copes with SNR never logged (a temperature-0
    judge re-scores identically: σ_noise = 0), and judge_table.py puts it beside the default sweep;
    4 votes of a temperature-0 judge equal 1 vote, so pointwise_budget's runs are pointwise's."""
    out = tmp_path / "train"
    run = [sys.executable, str(ROOT / "experiments" / "table2_report.py"), "--out", str(out), "--uri", store,
           "--experiments", "table2_gpt4_llmbar"]  # fmt: skip
    proc = subprocess.run(run, capture_output=True, text=True, timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "table2_gpt4_llmbar.md").read_text()
    assert "under the fitted judge `gpt4_llmbar`" in text and "Simulator caveat" not in text
    assert "judge.quality_map=start" in text and "experiment=table2" in text
    pw = next(r for r in text.splitlines() if r.startswith("| `pointwise`")).split("|")
    assert pw[15].strip() == f"(0/{STEPS * 2})"  # SNR: no finite step value, counted not hidden
    # and its figure is a panel that says why, not a missing file (issue 40.5)
    assert (out / "table2_gpt4_llmbar_snr.png").stat().st_size > 0 and "table2_gpt4_llmbar_snr.png" in text
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "judge_table.py"), "--out", str(tmp_path),
         "--uri", store],
        capture_output=True, text=True, timeout=600, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    jt = (tmp_path / "train.md").read_text()
    head = next(r for r in jt.splitlines() if r.startswith("| arm |"))
    assert "simulator `calibrated` (assumed)" in head and "GPT-4, LLMBar (fitted)" in head
    budget = next(r for r in jt.splitlines() if r.startswith("| `pointwise_budget`")).split("|")
    assert budget[2].strip() == "—" and budget[3].strip() == "0 (identical runs)"
    sse = next(r for r in jt.splitlines() if r.startswith("| `seeded_single_elim`")).split("|")
    assert sse[2].strip().startswith(("+", "-")) and "(p " in sse[2] and "(p " in sse[3]
    import pandas as pd

    rows = pd.read_csv(tmp_path / "train.csv")
    assert (tmp_path / "train_headline.png").stat().st_size > 0
    assert (tmp_path / "train_gain_vs_n.png").stat().st_size > 0
    assert set(rows["judge"]) == {"calibrated", "gpt4_llmbar"} and (rows["n"] == 2).any()
