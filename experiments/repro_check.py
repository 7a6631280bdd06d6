"""Reproduction check of a fresh run's tables against the committed ones (``make demo`` ends here).

``python experiments/repro_check.py --new results/demo/train --ref results/train --experiments
table2 snr_dynamics`` compares, run by run, each ``<experiment>_runs.csv`` row (arm, seed: final
and AUC values, judge calls, checkpoint hash) present on both sides — the bit-for-bit check, which
holds when the demo runs a subset of the published seeds (5 of 10) — and every cell of each
``<experiment>_stats.csv`` (the numbers behind the report's tables) with the committed file: equal,
or differs by new − ref; pooled cells are comparable only when both sides pool the same seeds. It writes every
cell to ``<new>/repro_check.md``, prints one line per table and a five-line headline, and exits 0
either way: differences are a finding to read (which commits produced each side is printed), not
an error. A missing committed file or table is said as such.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import pandas as pd

KEY = ("table", "arm")
PRIMARY = "eval_sampled_quality"


def commit_of(md: Path) -> str:
    """The producing commit a report names (``Produced by commit `abc…```), or 'unknown'."""
    if not md.exists():
        return "unknown"
    m = re.search(r"Produced by commit `([0-9a-f]+)`", md.read_text())
    return m.group(1) if m else "unknown"


def compare_cells(new: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """One row per (table, arm, column) present on either side: the two values, their
    difference and a status: equal, differs, only in new, only in ref (NaN = NaN is equal)."""
    cols = [c for c in new.columns if c not in KEY and not c.startswith("Unnamed")]
    cols += [c for c in ref.columns if c not in KEY and not c.startswith("Unnamed") and c not in cols]
    n, r = new.set_index(list(KEY)), ref.set_index(list(KEY))
    rows = []
    for key in list(n.index) + [k for k in r.index if k not in n.index]:
        for c in cols:
            a = n.at[key, c] if key in n.index and c in n.columns else None
            b = r.at[key, c] if key in r.index and c in r.columns else None
            if a is None or b is None:
                status, diff = ("only in new" if b is None else "only in ref"), math.nan
            else:
                a, b = float(a), float(b)
                same = a == b or (math.isnan(a) and math.isnan(b))
                status, diff = ("equal", 0.0) if same else ("differs", a - b)
            rows.append({"table": key[0], "arm": key[1], "column": c, "new": a, "ref": b, "diff": diff,
                         "status": status})  # fmt: skip
    return pd.DataFrame(rows)


RUN_KEY = ("arm", "seed")
RUN_SKIP = ("run_id", "arm_by")  # MLflow's ids differ on every machine


def compare_runs(new: pd.DataFrame, ref: pd.DataFrame) -> tuple[int, int, list[str]]:
    """(runs on both sides, runs identical in every shared column, the first differing cells)."""
    n, r = new.set_index(list(RUN_KEY)), ref.set_index(list(RUN_KEY))
    both = [k for k in n.index if k in r.index]
    cols = [c for c in n.columns if c in r.columns and c not in RUN_SKIP]
    same, diffs = 0, []
    for k in both:
        bad = []
        for c in cols:
            a, b = n.at[k, c], r.at[k, c]
            if isinstance(a, str) or isinstance(b, str):
                ok = str(a) == str(b)
            else:
                ok = float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
            if not ok:
                bad.append(f"{k[0]} seed {k[1]} {c}: {a} vs {b}")
        same += not bad
        diffs += bad
    return len(both), same, diffs


def headline(experiment: str, stats: pd.DataFrame, baseline: str = "pointwise") -> list[str]:
    """The primary metric's best judged arm vs the baseline (controls that ask no judge aside),
    and the no-judge ceiling when the experiment has one."""
    p = stats[stats["table"] == "primary"].set_index("arm")
    if baseline not in p.index:
        return [f"{experiment}: no {baseline} arm in the primary table"]
    b = p.loc[baseline]
    judged = p[(p["judge_calls"] > 0) & (p.index != baseline)]
    out = f"{experiment} ({int(b['n'])} seeds/arm): final {PRIMARY} {baseline} {b['final']:.3f}"
    if len(judged):
        best = judged["final"].idxmax()
        r = judged.loc[best]
        out += (
            f"; best judged arm {best} {r['final']:.3f}, Δ {r['d_final']:+.3f} "
            f"[{r['d_final_lo']:+.3f}, {r['d_final_hi']:+.3f}], p {r['p_final']:.2g}"
        )
    lines = [out]
    free = p[p["judge_calls"] == 0]
    if len(free):
        top = free["final"].idxmax()
        lines.append(f"  {experiment} ceiling without a judge: {top} {free.loc[top, 'final']:.3f}")
    return lines


def check(new_dir: Path, ref_dir: Path, experiments: list[str]) -> tuple[list[str], str]:
    """(console lines, the full cell listing as markdown)."""
    lines, md, heads = [], ["# Reproduction check", ""], []
    totals = {"equal": 0, "cells": 0}
    runs_total = {"both": 0, "same": 0, "other_seeds": 0}
    commits = []
    for exp in experiments:
        new_runs, ref_runs = new_dir / f"{exp}_runs.csv", ref_dir / f"{exp}_runs.csv"
        if new_runs.exists() and ref_runs.exists():
            nr, rr = pd.read_csv(new_runs), pd.read_csv(ref_runs)
            both, same, diffs = compare_runs(nr, rr)
            runs_total["both"] += both
            runs_total["same"] += same
            runs_total["other_seeds"] += set(nr["seed"]) != set(rr["seed"])
            lines.append(
                f"{exp} runs: {same} of {both} runs (arm, seed) on both sides identical in every column"
                + f" (this run's seeds {sorted(set(nr['seed']))}, the committed {sorted(set(rr['seed']))})"
            )
            md += [f"## {exp}: runs on both sides: {both}, identical: {same}", ""]
            md += [f"- {d}" for d in diffs[:200]] + [""]
        new_csv, ref_csv = new_dir / f"{exp}_stats.csv", ref_dir / f"{exp}_stats.csv"
        if not new_csv.exists():
            lines.append(f"{exp}: no new table ({new_csv} missing)")
            continue
        new = pd.read_csv(new_csv)
        heads += headline(exp, new)
        if not ref_csv.exists():
            lines.append(f"{exp}: no committed table to compare with ({ref_csv} missing)")
            continue
        cells = compare_cells(new, pd.read_csv(ref_csv))
        c_new, c_ref = commit_of(new_dir / f"{exp}.md"), commit_of(ref_dir / f"{exp}.md")
        commits.append((exp, c_new, c_ref))
        md += [f"## {exp} (new: commit {c_new}; committed: commit {c_ref})", ""]
        md += ["| table | arm | column | new | committed | status |", "|---|---|---|---|---|---|"]
        for _, c in cells.iterrows():
            status = c["status"] if c["status"] != "differs" else f"differs by {c['diff']:+.3g}"
            cell = f"{c['table']} | {c['arm']} | {c['column']} | {c['new']} | {c['ref']}"
            md.append(f"| {cell} | {status} |")
        md.append("")
        for table, g in cells.groupby("table", sort=False):
            eq = int((g["status"] == "equal").sum())
            d = g[g["status"] == "differs"]
            worst = ""
            if len(d):
                w = d.loc[d["diff"].abs().idxmax()]
                worst = f"; largest |Δ| {abs(w['diff']):.3g} ({w['arm']} {w['column']})"
            other = len(g) - eq - len(d)
            lines.append(
                f"{exp} {table}: {eq} of {len(g)} cells equal, {len(d)} differ"
                + (f", {other} on one side only" if other else "")
                + worst
            )
            totals["equal"] += eq
            totals["cells"] += len(g)
    verdict = f"reproduction: {totals['equal']} of {totals['cells']} cells equal to the committed tables"
    if totals["cells"] and totals["equal"] < totals["cells"] and runs_total["other_seeds"]:
        verdict += (
            ". They pool different seeds on the two sides (the demo runs 5 of the published 10), so pooled "
            "cells are not expected to match; the per-run comparison is the reproduction check."
        )
    elif totals["cells"] and totals["equal"] < totals["cells"]:
        which = "; ".join(f"{e}: this run {n}, committed {r}" for e, n, r in commits)
        if all(n == r and n != "unknown" for _, n, r in commits):
            verdict += (
                f". They differ although both sides come from the same commit ({which}): the runs did "
                "not reproduce on this machine — worth an issue (every differing cell: repro_check.md)."
            )
        else:
            verdict += (
                f". They differ — expected when the code that trains changed between the commits ({which}); "
                "the committed tables are regenerated after such changes land (docs/performance.md). "
                "Not an error: every differing cell is listed in repro_check.md."
            )
    elif totals["cells"]:
        verdict += ": the committed tables are reproduced exactly."
    if runs_total["both"]:
        verdict = (
            f"runs: {runs_total['same']} of {runs_total['both']} (arm, seed) runs identical to the committed "
            f"ones; pooled cells: {verdict[len('reproduction: ') :]}"
        )
    heads = heads[:4] + [verdict]  # five lines
    return lines + ["", "headline:"] + [f"  {h}" for h in heads], "\n".join(md) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new", default="results/demo/train", help="the fresh run's report folder")
    ap.add_argument("--ref", default="results/train", help="the committed report folder")
    ap.add_argument("--experiments", nargs="*", default=["table2", "snr_dynamics"])
    args = ap.parse_args(argv)
    lines, md = check(Path(args.new), Path(args.ref), args.experiments)
    Path(args.new).mkdir(parents=True, exist_ok=True)
    (Path(args.new) / "repro_check.md").write_text(md)
    print("\n".join(lines))
    print(f"(every cell: {Path(args.new) / 'repro_check.md'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
