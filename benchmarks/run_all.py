"""All benchmarks of issue 6 in one command: ``python benchmarks/run_all.py --out results/bench [--quick]``.

Parts: waves vs sequential (``waves.md``), lockstep vs pipelined on a served judge
(``pipeline.md``, virtual clock), engine + aggregation overhead (``overhead.md``),
Bradley-Terry / Kemeny vs choix (``aggregation.md``), local trainer steps/s and memory
(``trainer.md``), fidelity per judge call and the ≤ 2N search (``fidelity_frontier.md``).
Writes ``README.md`` in ``--out``: the ratios, links to the tables, the machine. Budget:
about 12 minutes on 2 cores (the pipeline part, 8 min, simulates every request of K = 256
steps); ``--quick`` is a smoke run of every part (seconds, not results).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make ``benchmarks`` importable as a package
    sys.path.insert(0, str(ROOT))

from arenabench import reporting  # noqa: E402
from benchmarks import (  # noqa: E402
    aggregation,
    common,
    fidelity_frontier,
    overhead,
    pipeline,
    trainer_speed,
    waves,
)

PARTS = ("waves", "pipeline", "overhead", "aggregation", "trainer", "fidelity")
FILES = {
    "waves": ["waves.md", "waves.csv"],
    "pipeline": ["pipeline.md", "pipeline.csv"],
    "overhead": ["overhead.md", "overhead.csv"],
    "aggregation": ["aggregation.md", "aggregation.csv"],
    "trainer": ["trainer.md", "trainer.csv", "trainer_speed.json"],
    "fidelity": ["fidelity_frontier.md", "fidelity_frontier.csv", "fidelity_frontier.png"],
}


def _fidelity_beside(out: Path, quick: bool, only, m, box: dict):
    """Start the fidelity study (deterministic, untimed) in a second process; return a join.

    ``waves`` calls it while its sequential driver sleeps on one core, so the fidelity study's
    CPU does not overlap any timed engine step."""

    def start():
        pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"))
        t0 = time.perf_counter()
        future = pool.submit(fidelity_frontier.run, out, quick, only, m)

        def finish():
            try:
                box["fidelity"] = future.result()
            finally:
                box["fidelity_s"] = time.perf_counter() - t0
                pool.shutdown()

        return finish

    return start


def run(
    out: Path, quick: bool = False, parts=PARTS, only: str | None = None, trainer_steps: int | None = None
):
    out.mkdir(parents=True, exist_ok=True)
    m = common.machine()
    summary: dict = {"machine": m, "quick": quick, "seconds": {}}
    box: dict = {}
    beside = "waves" in parts and "fidelity" in parts
    t_start = time.perf_counter()
    for part in parts:
        t0 = time.perf_counter()
        if part == "waves":
            overlap = _fidelity_beside(out, quick, only, m, box) if beside else None
            summary[part] = waves.run(out, quick, only, m, overlap=overlap)
        elif part == "pipeline":
            summary[part] = pipeline.run(out, quick, only, m)
        elif part == "overhead":
            summary[part] = overhead.run(out, quick, only, m)
        elif part == "aggregation":
            summary[part] = aggregation.run(out, quick, m)
        elif part == "trainer":
            summary[part] = trainer_speed.run(out, quick, trainer_steps or (None if quick else 60), m=m)
        elif part == "fidelity":
            if beside:
                summary[part] = box["fidelity"]
                summary["seconds"]["fidelity (beside waves)"] = box["fidelity_s"]
                continue
            summary[part] = fidelity_frontier.run(out, quick, only, m)
        else:
            raise ValueError(f"unknown part {part!r}; parts: {', '.join(PARTS)}")
        summary["seconds"][part] = time.perf_counter() - t0
        print(f"[run_all] {part} done in {summary['seconds'][part]:.0f} s", flush=True)
    summary["seconds"]["total"] = time.perf_counter() - t_start
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "README.md").write_text(readme(summary, parts))
    return summary


def readme(s: dict, parts) -> str:
    m = s["machine"]
    lines = [
        "# Benchmarks (issue 6)",
        "",
        "Produced by `make bench` (= `python benchmarks/run_all.py --out results/bench"
        + (" --quick" if s["quick"] else "")
        + "`"
        + f") in {s['seconds']['total'] / 60:.1f} min"
        + " ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in s["seconds"].items() if k != "total")
        + ").",
        "",
        f"machine: {reporting.machine_line(m)}",
        "",
        "Ratios travel between machines; absolute times do not (they are in the tables). Numbers taken while "
        "other jobs share the CPU are inflated: check the load average above.",
    ]
    if s["quick"]:
        lines += ["", "**quick mode**: smoke sizes, not results."]
    if "waves" in parts:
        w = s["waves"]
        lines += [
            "",
            "## Waves vs sequential — [`waves.md`](waves.md), [`waves.csv`](waves.csv)",
            "",
            "- step wall time / critical-path bound "
            f"(waves × L, L = {w['latency_ms']:g} ms per batch): median "
            f"**{w['median_ratio']:.2f}×**, worst {w['worst_ratio']:.1f}× ({w['worst']}); goal ≤ 1.2×. "
            f"{w['cells'] - len(w['over_1_2'])} of {w['cells']} (constructor, N, K) cells within 1.2×:",
            "",
            waves.nk_table(w),
            "",
            waves.speedup_line(w),
            "- API model (L per request, bounded concurrency): wall / bound median "
            f"{w['api_median_ratio']:.2f}×, "
            f"worst {w['api_worst_ratio']:.1f}×.",
            "- judge batches == waves in every step (no retry batches on a fault-free judge): "
            f"{w['batches_eq_waves']}.",
        ]
    if "pipeline" in parts:
        p = s["pipeline"]
        one, br = p["goal"]["one-wave"], p["goal"]["bracket"]
        lines += [
            "",
            "## Lockstep vs pipelined (served judge, virtual clock) — [`pipeline.md`](pipeline.md), "
            "[`pipeline.csv`](pipeline.csv)",
            "",
            f"- step / max(work / slots, critical path), median over {p['cells']} cells: lockstep "
            f"{p['median_lockstep_over_bound']:.2f}×, pipelined {p['median_pipelined_over_bound']:.2f}×; "
            f"pipelined speed-up median {p['multiwave_median_speedup']:.2f}× over multi-wave cells "
            f"(up to {p['max_speedup']:.2f}×).",
            f"- goal pipelined ≤ 1.15× at K ≥ 64: one-wave {one['met']} of {one['cells']} cells, brackets "
            f"{br['met']} of {br['cells']}; one-wave requests sent longest first (a clairvoyant "
            f"order) {pipeline._x(p['goal']['one-wave longest first median'])} (worst "
            f"{pipeline._x(p['goal']['one-wave longest first worst'])}).",
            "- restated against the reachable max(critical path, the step's requests all at once, first "
            f"come first served): one-wave {one['at_once_met']} of {one['cells']} (by construction; worst "
            f"{pipeline._x(one['at_once_worst'])}), brackets {br['at_once_met']} of {br['cells']} (worst "
            f"{pipeline._x(br['at_once_worst'])}).",
        ]
    if "overhead" in parts:
        o = s["overhead"]
        lines += [
            "",
            "## Engine + aggregation overhead — [`overhead.md`](overhead.md), [`overhead.csv`](overhead.csv)",
            "",
            f"- share of the judge's critical path at L = {o['latency_ms']:g} ms, K = {o['k_step']}: "
            f"{o['under_2pct']} of {o['rows']} (constructor, N) rows under the 2% goal; median by N: "
            + reporting.listing(o["median_share_by_n"], ".1%", suffix="")
            + f"; heaviest {', '.join(o['heaviest'])}.",
            f"- against an API judge ({o['latency_ms']:g} ms per request, 32 in flight): "
            f"{o['api_under_2pct']} of "
            f"{o['api_rows']} rows under 2%, median share {o['api_median_share']:.1%}.",
            f"- median engine + constructor cost per judge request: {o['median_us_per_request']:.1f} µs.",
            "- live Reasoning Arena step / seeded single-elimination step (K = 8): "
            + reporting.listing(o["live_over_single_elim"], ".2f", label="{}:")
            + "; with free fits (a control: the floor its schedule sets) "
            + reporting.listing(o["free_fit_over_single_elim"], ".2f", label="{}:")
            + "; the fits' share of its step: "
            + reporting.listing(o["fit_share"], ".0%", suffix="", label="{}:")
            + ".",
        ]
    if "aggregation" in parts:
        a = s["aggregation"]
        lines += [
            "",
            "## Aggregation — [`aggregation.md`](aggregation.md), [`aggregation.csv`](aggregation.csv)",
            "",
            "- choix `opt_pairwise` time / arenabench Bradley-Terry (Newton, the same objective): "
            + reporting.listing({n: 1 / v for n, v in a["ours_over_opt"].items()}, ".0f")
            + f"; the same fit (max |Δθ| {a['max_diff_ours']:.0e}).",
            "- choix `ilsr_pairwise` time / arenabench: "
            + reporting.listing({n: 1 / v for n, v in a["ours_over_ilsr"].items()}, ".1f")
            + ".",
            "- the same fit with BLAS on every core / on 1 thread: "
            + reporting.listing(a["all_cores_over_1_thread"], ".1f")
            + " (no fit's BLAS call is split up to N = 64, and larger fits limit BLAS to one thread).",
            "- Kemeny exact / greedy time: " + reporting.listing(a["exact_over_greedy"], ".1f") + ".",
        ]
    if "trainer" in parts:
        t = s["trainer"]
        lines += [
            "",
            "## Local trainer — [`trainer.md`](trainer.md), [`trainer.csv`](trainer.csv)",
            "",
            "- steps/s at K = 8, N = 8 relative to pointwise: "
            + reporting.listing(t["relative"], ".2f", label="{}")
            + f"; slowest {t['min_steps_per_s']:.1f} steps/s (goal ≥ 5); "
            f"peak RSS ≤ {t['peak_rss_mib']:.0f} MiB.",
        ]
    if "fidelity" in parts:
        f = s["fidelity"]
        lines += [
            "",
            "## Fidelity per judge call — [`fidelity_frontier.md`](fidelity_frontier.md), "
            "[`fidelity_frontier.png`](fidelity_frontier.png)",
            "",
        ]
        for n, v in f["by_n"].items():
            lines.append(fidelity_frontier._verdict(n, v))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = common.parser(__doc__, constructors=True)
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--trainer-steps", type=int, default=None)
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = sorted(set(parts) - set(PARTS))
    if bad:
        ap.error(f"unknown part(s) {', '.join(bad)}; parts: {', '.join(PARTS)}")
    s = run(Path(args.out), args.quick, parts, args.constructors, args.trainer_steps)
    print(f"[run_all] wrote {args.out}/README.md in {s['seconds']['total']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
