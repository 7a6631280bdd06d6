"""Sweep throughput (issue 28): the table2 sweep on a previous commit vs this tree, side by side.

``python benchmarks/sweep_speed.py --out results/bench`` (``make bench-sweep``) runs the full
table2 sweep — 10 arms × ``--seeds`` seeds (default 10) × ``--steps`` steps (default 200) — as the
same hydra multirun, ``arenabench-train -m experiment=table2``, twice, one after the other, each in
its own process tree: **before** = the code at ``--base`` (exported with ``git archive`` and run
from its own folder; default ``a843f22``, the path of the tables published before issue 28),
**after** = this tree (seeds of an arm stacked into one batch by the launcher). It writes
``sweep.{md,csv}`` and ``sweep_speed.json``.

Per path it measures wall time, CPU time of the whole process tree (``RUSAGE_CHILDREN``: the main
process and the sweep's worker processes; what the sweep costs whatever else the machine runs),
the largest process's peak RSS, the load average before and after, and from the launcher's
``jobs.tsv`` each job's CPU time in its worker (the rest of the tree's CPU is the sweep's fixed
cost: the main process, the workers' imports). Then the two sweeps' metric histories are
compared run by run (same arm and seed: every logged value but timings), so a change that should
keep the numerics proves it on every run of the sweep; when they differ by design (the stacked
trainer rounds differently), each arm's final quality on both paths shows whether results moved.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from arenabench import reporting

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

BASE = "a843f22"  # main before the issue-28 item-1 throughput work (published tables' path)
TIMING = ("wall_time", "judge_latency_p50", "judge_latency_p90", "steps_per_s")
GOAL_S = 300  # the issue's goal: the full sweep in <= 5 min on 2 idle cores
CORES = 2


def measured(cmd: list[str], cwd: Path, env: dict) -> dict:
    """Run ``cmd`` in a fresh child interpreter that reports its descendants' rusage."""
    probe = (
        "import json, resource, subprocess, sys, time;"
        "t = time.perf_counter(); rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL);"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(json.dumps({'rc': rc, 'wall_s': time.perf_counter() - t,"
        " 'cpu_s': r.ru_utime + r.ru_stime, 'peak_rss_mib': r.ru_maxrss / 1024}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *cmd], cwd=cwd, env=env, capture_output=True, text=True
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {res['rc']}) in {cwd}")
    return res


def histories(db: Path) -> dict[tuple[str, str], dict]:
    """(reward, seed) → {metric: [(step, value), ...]} of every run in a sweep's store."""
    con = sqlite3.connect(db)
    tags = {}
    for run, key, value in con.execute(
        "SELECT run_uuid, key, value FROM tags WHERE key IN ('reward', 'seed')"
    ):
        tags.setdefault(run, {})[key] = value
    out: dict = {}
    for run, key, step, value in con.execute(
        "SELECT run_uuid, key, step, value FROM metrics ORDER BY run_uuid, key, step, timestamp"
    ):
        if key in TIMING:
            continue
        t = tags[run]
        out.setdefault((t["reward"], t["seed"]), {}).setdefault(key, []).append((step, value))
    con.close()
    return out


def compare(before: dict, after: dict) -> dict:
    """Runs with identical metric histories, and for each other run its first differing metric."""
    same, differ = [], {}
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b == a:
            same.append(key)
            continue
        if b is None or a is None:
            differ[key] = "missing on one path"
            continue
        names = sorted(set(b) | set(a))
        first = next(n for n in names if b.get(n) != a.get(n))
        differ[key] = first
    points = sum(len(v) for h in before.values() for v in h.values())
    return {"runs": len(set(before) | set(after)), "identical": len(same), "points": points,
            "differing": {f"{r} seed {s}": m for (r, s), m in differ.items()}}  # fmt: skip


def _se(x) -> float:
    return float(x.std(ddof=1) / len(x) ** 0.5) if len(x) > 1 else float("nan")


def arm_finals(before: dict, after: dict, metric: str = "eval_sampled_quality") -> list[dict]:
    """Per arm, the mean (± SE over seeds) of each run's last ``metric`` on both paths and the
    seed-paired difference: when the numerics differ, whether the arms' results moved."""
    import numpy as np

    out = []
    for arm in sorted({r for r, _ in before} | {r for r, _ in after}):
        seeds = sorted({s for r, s in before if r == arm} & {s for r, s in after if r == arm})
        b = np.array([before[(arm, s)][metric][-1][1] for s in seeds])
        a = np.array([after[(arm, s)][metric][-1][1] for s in seeds])
        n = len(seeds)
        d = a - b
        out.append({"arm": arm, "seeds": n, "same": int((a == b).sum()),
                    "before": float(b.mean()), "before_se": _se(b),
                    "after": float(a.mean()), "after_se": _se(a),
                    "diff": float(d.mean()), "diff_se": _se(d)})  # fmt: skip
    return out


def job_times(sweep_dir: Path) -> list[float]:
    """CPU seconds of each job in its worker (the launcher's ``jobs.tsv``)."""
    rows = (sweep_dir / "jobs.tsv").read_text().splitlines()[1:]
    return [float(r.split("\t")[4]) for r in rows]


def run(out: Path, steps=(200,), seeds: int = 10, base: str = BASE, quick: bool = False) -> dict:
    m = common.machine()
    root = common.ROOT
    work = Path(tempfile.mkdtemp(prefix="arenabench-sweep-bench-"))
    base_tree = work / "base"
    base_tree.mkdir()
    archive = subprocess.run(["git", "archive", base], cwd=root, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
    seed_list = ",".join(str(s) for s in range(seeds))
    paths = {"before": base_tree, "after": root}
    rows = []
    for s in steps:
        for name, tree in paths.items():
            db = work / f"{name}_{s}.db"
            sweep_dir = work / f"{name}_{s}"
            cmd = [
                sys.executable, "-m", "arenabench.train", "-m", "experiment=table2", f"steps={s}",
                f"seed={seed_list}", "progress=false", f"tracking.uri=sqlite:///{db}",
                f"hydra.sweep.dir={sweep_dir}",
            ]  # fmt: skip
            env = {**os.environ, "PYTHONPATH": str(tree)}
            load0 = os.getloadavg()[0]
            r = measured(cmd, tree, env)
            jobs = job_times(sweep_dir)
            rows.append(
                {
                    "path": name,
                    "steps": s,
                    "jobs": len(jobs),
                    **r,
                    "jobs_cpu_s": sum(jobs),
                    "fixed_cpu_s": r["cpu_s"] - sum(jobs),
                    "load_before": load0,
                    "load_after": os.getloadavg()[0],
                }
            )
            (work / "rows.json").write_text(json.dumps(rows, indent=2))
            common.progress(
                "sweep",
                f"{name:<6} steps={s:<4} {len(jobs)} jobs: {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} CPU-s, "
                f"peak RSS {r['peak_rss_mib']:.0f} MiB, load {load0:.1f}",
            )
    return report(out, rows, work, steps, seeds, base, quick, m)


def _row(rows, path: str, steps: int) -> dict:
    return next(r for r in rows if r["path"] == path and r["steps"] == steps)


def report(out: Path, rows, work: Path, steps, seeds: int, base: str, quick: bool, m) -> dict:
    """The summary and the pages from measured ``rows`` and the sweeps' folders under ``work``."""
    summary: dict = {}
    for s in steps:
        b, a = _row(rows, "before", s), _row(rows, "after", s)
        hb, ha = histories(work / f"before_{s}.db"), histories(work / f"after_{s}.db")
        num = compare(hb, ha)
        summary[str(s)] = {
            "arm_finals": arm_finals(hb, ha),
            "ratio_cpu": b["cpu_s"] / a["cpu_s"],
            "ratio_wall": b["wall_s"] / a["wall_s"],
            "ratio_job_cpu": b["jobs_cpu_s"] / a["jobs_cpu_s"],
            "cpu_per_core_s": {"before": b["cpu_s"] / CORES, "after": a["cpu_s"] / CORES},
            "numerics": num,
        }
    out.mkdir(parents=True, exist_ok=True)
    meta = {"base": base, "steps": list(steps), "seeds": seeds, **m}
    (out / "sweep_speed.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "summary": summary}, indent=2) + "\n"
    )
    reporting.write_csv(out / "sweep.csv", rows)
    cmd = f"python benchmarks/sweep_speed.py --steps {','.join(map(str, steps))} --seeds {seeds}"
    body = [
        f"table2 (10 arms × {seeds} seed(s)) as the same hydra multirun on both paths, one after the "
        f"other, each in its own process tree: **before** = commit `{base}`, **after** = this tree. CPU "
        "= the whole tree's user + system time (main process and workers); job CPU = the sum of the "
        "jobs' CPU in their workers (`jobs.tsv`); fixed = the rest (main process, worker imports). Wall "
        "time depends on the load beside each row; CPU / 2 is the wall time two idle cores would need "
        "if both stayed busy.",
        "",
        "| steps | | before | after | ratio |",
        "|---|---|---|---|---|",
    ]
    for s in steps:
        b, a, sm = _row(rows, "before", s), _row(rows, "after", s), summary[str(s)]
        wb, wa = b["wall_s"] / 60, a["wall_s"] / 60
        body += [
            f"| {s} | wall, min | {wb:.2f} | {wa:.2f} | {sm['ratio_wall']:.2f}× |",
            f"| {s} | CPU s, whole tree | {b['cpu_s']:.0f} | {a['cpu_s']:.0f} | {sm['ratio_cpu']:.2f}× |",
            f"| {s} | CPU s per job, in its worker (mean) | {b['jobs_cpu_s'] / b['jobs']:.2f} "
            f"| {a['jobs_cpu_s'] / a['jobs']:.2f} | {sm['ratio_job_cpu']:.2f}× |",
            f"| {s} | CPU s fixed (main process, worker imports) | {b['fixed_cpu_s']:.0f} "
            f"| {a['fixed_cpu_s']:.0f} | |",
            f"| {s} | CPU / 2 cores, min | {b['cpu_s'] / CORES / 60:.2f} | {a['cpu_s'] / CORES / 60:.2f} | |",
            f"| {s} | peak RSS of one process, MiB | {b['peak_rss_mib']:.0f} | {a['peak_rss_mib']:.0f} | |",
        ]
    body.append("")
    for s in steps:
        num = summary[str(s)]["numerics"]
        differ = num["differing"]
        body.append(
            f"Numerics at {s} steps: {num['identical']} of {num['runs']} runs have identical metric "
            f"histories on both paths ({num['points']} logged values compared, every metric but timings)"
            + (
                f"; differing (first differing metric): {', '.join(f'{k}: {v}' for k, v in differ.items())}."
                if differ
                else "."
            )  # fmt: skip
        )
        if num["identical"] < num["runs"]:
            body += [
                "",
                "The paths differ in float rounding by design when `before` predates the stacked trainer "
                "(issue 28: batched matmuls and attention written out round differently from "
                "`nn.Linear`/`nn.MultiheadAttention`, so weights, losses and entropies differ in their last "
                "bits from the first update on; a sampled token changes only where a draw falls within that "
                "rounding of a token boundary). Runs whose final `eval_sampled_quality` is the same to the "
                f"last bit on both paths: {sum(r['same'] for r in summary[str(s)]['arm_finals'])} of "
                f"{sum(r['seeds'] for r in summary[str(s)]['arm_finals'])}. Whether the arms' results "
                "moved: the mean over seeds (± SE) of each run's final `eval_sampled_quality` on both "
                "paths, and the seed-paired difference (after − before):",
                "",
                "| arm | seeds | before | after | after − before |",
                "|---|---|---|---|---|",
            ]
            body += [
                f"| {r['arm']} | {r['seeds']} | {r['before']:.4f} ± {r['before_se']:.4f} "
                f"| {r['after']:.4f} ± {r['after_se']:.4f} | {r['diff']:+.4f} ± {r['diff_se']:.4f} |"
                for r in summary[str(s)]["arm_finals"]
            ]
    full = seeds == 10 and 200 in steps
    if full:
        a = _row(rows, "after", 200)
        met = a["wall_s"] <= GOAL_S and a["cpu_s"] / CORES <= GOAL_S
        body += [
            "",
            f"Goal (full sweep ≤ {GOAL_S / 60:.0f} min on 2 idle cores): measured wall "
            f"{a['wall_s'] / 60:.2f} min at load {a['load_before']:.1f} → {a['load_after']:.1f}; "
            f"CPU / 2 = {a['cpu_s'] / CORES / 60:.2f} min: " + ("**met**." if met else "**not met**."),
        ]
    body.append("")
    body += common.quick_note(quick)
    cols = ["path", "steps", "jobs", "wall_s", "cpu_s", "jobs_cpu_s", "fixed_cpu_s", "peak_rss_mib",
            "load_before", "load_after"]  # fmt: skip
    reporting.write_md(out / "sweep.md", "Sweep throughput: table2, before vs after", m, cmd,
                       "\n".join(body) + "\n" + reporting.md_table(rows, cols))  # fmt: skip
    return summary


def main(argv=None) -> None:
    ap = common.parser(__doc__)
    ap.add_argument("--steps", default="200", help="step counts (comma list), each a sweep per path")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per arm (0..n-1)")
    ap.add_argument("--base", default=BASE, help="the commit that is 'before'")
    ap.add_argument("--report-from", default=None, help="rewrite the pages from a finished run's work folder")
    args = ap.parse_args(argv)
    steps = tuple(int(s) for s in args.steps.split(",")) if not args.quick else (2,)
    seeds = args.seeds if not args.quick else 1
    if args.report_from:
        work = Path(args.report_from)
        rows = json.loads((work / "rows.json").read_text())
        summary = report(Path(args.out), rows, work, steps, seeds, args.base, args.quick, common.machine())
    else:
        summary = run(Path(args.out), steps, seeds, args.base, args.quick)
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
