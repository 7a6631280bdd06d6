"""experiments/repro_check.py: every cell compared, differences reported with their size and
the producing commits, never an error exit."""

import importlib.util
import math

import pandas as pd
from helpers import ROOT

spec = importlib.util.spec_from_file_location("repro_check", ROOT / "experiments" / "repro_check.py")
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)

COLS = [
    "table",
    "Unnamed: 1",
    "arm",
    "n",
    "judge_calls",
    "final",
    "d_final",
    "d_final_lo",
    "d_final_hi",
    "p_final",
]


def stats(final_pw=2.85, final_rr=2.89, commit="aaa", tmp=None, name="table2"):
    rows = [
        ["primary", 0, "pointwise", 5, 100.0, final_pw, math.nan, math.nan, math.nan, math.nan],
        ["primary", 1, "round_robin", 5, 300.0, final_rr, 0.04, 0.03, 0.05, 1e-4],
        ["primary", 2, "oracle", 5, 0.0, 2.9, 0.05, 0.04, 0.06, 1e-5],
    ]
    df = pd.DataFrame(rows, columns=COLS)
    if tmp is not None:
        tmp.mkdir(parents=True, exist_ok=True)
        df.to_csv(tmp / f"{name}_stats.csv", index=False)
        (tmp / f"{name}.md").write_text(f"- Produced by commit `{commit}` (the runs' tag).\n")
    return df


def test_cells_equal_differ_and_one_sided():
    new, ref = stats(final_pw=2.86), stats()
    ref = ref[ref["arm"] != "oracle"]
    cells = rc.compare_cells(new, ref).set_index(["arm", "column"])
    assert cells.loc[("pointwise", "final"), "status"] == "differs"
    assert math.isclose(cells.loc[("pointwise", "final"), "diff"], 0.01)
    assert cells.loc[("pointwise", "d_final"), "status"] == "equal"  # NaN = NaN
    assert cells.loc[("round_robin", "final"), "status"] == "equal"
    assert cells.loc[("oracle", "final"), "status"] == "only in new"


def test_check_says_why_tables_differ_and_lists_every_cell(tmp_path):
    stats(final_pw=2.86, commit="bbb", tmp=tmp_path / "new")
    stats(commit="aaa", tmp=tmp_path / "ref")
    lines, md = rc.check(tmp_path / "new", tmp_path / "ref", ["table2"])
    text = "\n".join(lines)
    assert "table2 primary: 20 of 21 cells equal, 1 differ; largest |Δ| 0.01 (pointwise final)" in text
    assert "best judged arm round_robin 2.890" in text and "ceiling without a judge: oracle 2.900" in text
    assert "this run bbb, committed aaa" in text and "Not an error" in text
    assert len(lines[lines.index("headline:") + 1 :]) <= 5
    assert "| primary | pointwise | final | 2.86 | 2.85 | differs by +0.01 |" in md
    assert (
        rc.main(["--new", str(tmp_path / "new"), "--ref", str(tmp_path / "ref"), "--experiments", "table2"])
        == 0
    )


def test_check_reports_exact_reproduction(tmp_path):
    stats(commit="aaa", tmp=tmp_path / "new")
    stats(commit="aaa", tmp=tmp_path / "ref")
    lines, _ = rc.check(tmp_path / "new", tmp_path / "ref", ["table2", "snr_dynamics"])
    assert "snr_dynamics: no new table" in lines[-6] or any(
        "snr_dynamics: no new table" in ln for ln in lines
    )
    assert lines[-1].strip().endswith("reproduced exactly.")


def runs(seeds, final=2.85, sha="ab12"):
    return pd.DataFrame(
        [
            {"arm": a, "arm_by": "reward", "seed": s, "run_id": f"id{a}{s}{final}", "init_sha256": sha,
             "judge_calls": 100.0, "eval_sampled_quality_final": final + s / 100, "snr_final": math.nan}
            for a in ("pointwise", "round_robin") for s in seeds
        ]
    )  # fmt: skip


def test_runs_compared_row_by_row_on_the_shared_seeds():
    """The demo's 5 seeds against the published 10: the 10 shared (arm, seed) rows are compared,
    run ids (machine-specific) ignored, NaN equal to NaN; one changed value flags its run."""
    both, same, diffs = rc.compare_runs(runs(range(5)), runs(range(10)))
    assert (both, same, diffs) == (10, 10, [])
    new = runs(range(5))
    new.loc[(new["arm"] == "round_robin") & (new["seed"] == 3), "eval_sampled_quality_final"] += 1e-9
    both, same, diffs = rc.compare_runs(new, runs(range(10)))
    assert (
        (both, same) == (10, 9)
        and len(diffs) == 1
        and "round_robin seed 3 eval_sampled_quality_final" in diffs[0]
    )
    both, same, diffs = rc.compare_runs(runs(range(5), sha="cd34"), runs(range(10)))
    assert same == 0 and all("init_sha256" in d for d in diffs)


def test_check_counts_identical_runs_in_the_verdict(tmp_path):
    new, ref = tmp_path / "new", tmp_path / "ref"
    stats(tmp=new, commit="aaa")
    stats(tmp=ref, commit="aaa")
    runs(range(5)).to_csv(new / "table2_runs.csv", index=False)
    runs(range(10)).to_csv(ref / "table2_runs.csv", index=False)
    lines, md = rc.check(new, ref, ["table2"])
    assert any("10 of 10 runs" in x for x in lines)
    assert "runs: 10 of 10 (arm, seed) runs identical" in lines[-1]
