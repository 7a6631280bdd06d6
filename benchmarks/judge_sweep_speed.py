"""What persistent and surface judge error costs a sweep (issue 39's speed standard): the same
10-seed table2 sweep under a fresh-error fit and under its persistent twin, back to back.

``python benchmarks/judge_sweep_speed.py --out results/bench`` (``make bench-judge``) runs
``arenabench-train -m experiment=table2 judge=J`` for each judge of ``--judges`` (default the GPT-4
LLMBar fits: ``gpt4_llmbar`` then ``gpt4_llmbar_persistent``) on this tree, each in its own process
tree, with the published persistent stage's arms (``JUDGE_ARMS`` of
``scripts/regenerate_tables.sh``). Per judge: wall time, CPU time of the whole tree, the jobs' CPU
in their workers, peak RSS and the load beside it (``sweep_speed.measured``), and the ratio to the
first judge. The goal: each sweep ≤ 5 min on 2 idle cores (wall, and CPU / 2).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

from arenabench import reporting

try:
    from benchmarks import common
    from benchmarks.sweep_speed import CORES, GOAL_S, job_times, measured
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]
    from sweep_speed import CORES, GOAL_S, job_times, measured  # type: ignore[no-redef]

JUDGES = ("gpt4_llmbar", "gpt4_llmbar_persistent")


def judge_arms() -> str:
    """The persistent stages' arm list, read from the script that runs them (one place)."""
    text = (common.ROOT / "scripts" / "regenerate_tables.sh").read_text()
    return re.search(r"^JUDGE_ARMS=([\w,]+)$", text, re.M).group(1)


def run(out: Path, judges=JUDGES, seeds: int = 10, steps: int = 200, quick: bool = False) -> list[dict]:
    m = common.machine()
    work = Path(tempfile.mkdtemp(prefix="arenabench-judge-bench-"))
    arms = judge_arms()
    rows = []
    for j in judges:
        db, sweep_dir = work / f"{j}.db", work / j
        cmd = [
            sys.executable, "-m", "arenabench.train", "-m", "experiment=table2", f"judge={j}",
            f"reward={arms}", f"steps={steps}", f"seed={','.join(map(str, range(seeds)))}",
            "progress=false", f"tracking.uri=sqlite:///{db}", f"hydra.sweep.dir={sweep_dir}",
        ]  # fmt: skip
        load0 = os.getloadavg()[0]
        r = measured(cmd, common.ROOT, {**os.environ, "PYTHONPATH": str(common.ROOT)})
        jobs = job_times(sweep_dir)
        rows.append({"judge": j, "jobs": len(jobs), **r, "jobs_cpu_s": sum(jobs),
                     "load_before": load0, "load_after": os.getloadavg()[0]})  # fmt: skip
        common.progress(
            "judge-sweep", f"{j}: {len(jobs)} jobs, {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} CPU s"
        )
    report(out, rows, arms, seeds, steps, quick, m)
    return rows


def report(out: Path, rows: list[dict], arms: str, seeds: int, steps: int, quick: bool, m) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {**m, "arms": arms, "seeds": seeds, "steps": steps}
    (out / "judge_sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    first = rows[0]
    body = [
        f"table2 ({len(arms.split(','))} arms: {arms.replace(',', ', ')}; {seeds} seed(s), {steps} steps) as "
        "one hydra multirun per judge, one after the other, on this tree. CPU = the whole process "
        "tree's user + system time; job CPU = the jobs' CPU in their workers (`jobs.tsv`); ratios "
        f"against `{first['judge']}`.",
        "",
        "| judge | jobs | wall, min | CPU / 2 cores, min | CPU s per job | peak RSS, MiB "
        "| load before → after | wall ratio | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        body.append(
            f"| `{r['judge']}` | {r['jobs']} | {r['wall_s'] / 60:.2f} | {r['cpu_s'] / CORES / 60:.2f} "
            f"| {r['jobs_cpu_s'] / r['jobs']:.2f} | {r['peak_rss_mib']:.0f} "
            f"| {r['load_before']:.1f} → {r['load_after']:.1f} | {r['wall_s'] / first['wall_s']:.2f}× "
            f"| {r['cpu_s'] / first['cpu_s']:.2f}× |"
        )
    if seeds == 10 and steps == 200:
        met = all(r["wall_s"] <= GOAL_S and r["cpu_s"] / CORES <= GOAL_S for r in rows)
        body += ["", f"Goal (each sweep ≤ {GOAL_S / 60:.0f} min on 2 idle cores, wall and CPU / 2): "
                 + ("**met**." if met else "**not met**.")]  # fmt: skip
    body += common.quick_note(quick)
    cmd = "python benchmarks/judge_sweep_speed.py --judges " + ",".join(r["judge"] for r in rows)
    reporting.write_md(out / "judge_sweep.md", "Sweep throughput by judge: fresh vs persistent error", m,
                       cmd + (" --quick" if quick else ""), "\n".join(body) + "\n")  # fmt: skip


def main(argv=None) -> None:
    ap = common.parser(__doc__)
    ap.add_argument(
        "--judges", default=",".join(JUDGES), help="judge presets (comma list); ratios vs the first"
    )
    args = ap.parse_args(argv)
    seeds, steps = (1, 2) if args.quick else (10, 200)
    rows = run(Path(args.out), tuple(args.judges.split(",")), seeds, steps, args.quick)
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
