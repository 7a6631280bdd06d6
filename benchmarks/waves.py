"""Waves vs sequential: is a step's wall time the judge's critical path, or the sum of call latencies?

Every constructor runs behind a :class:`LatencyJudge` that makes each batch take L (one vLLM
``generate``): the critical-path bound of a step is waves × L (retries would add batches;
the simulated judge never fails). Measured against the same constructor driven one request
at a time (:class:`Unbatched`: each judge request its own call, groups one after another —
the per-match sequential driver), and against an API-style judge (L per request, c in flight,
bound = Σ ⌈n_batch / c⌉ × L). Run: ``python benchmarks/waves.py [--quick]``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from arenabench import judges, reporting, rewards
from arenabench.engine import Engine
from arenabench.judges.latency import LatencyJudge, Unbatched

try:
    from benchmarks import common
except ImportError:  # run as a script: benchmarks/ is on sys.path, the repo root maybe not
    import common  # type: ignore[no-redef]


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (8, 16)
    ks: tuple[int, ...] = (1, 8, 32)
    latency_s: float = 0.020
    repeats: int = 3
    # (N, K) where the sequential driver is measured: it costs judge calls × L, so not at K = 32
    sequential: tuple[tuple[int, int], ...] = ((8, 1), (8, 8), (16, 1))
    api: tuple[tuple[int, int], ...] = ((8, 8), (16, 8))
    concurrency: int = 32
    slow_s: float = 1.0  # a run slower than this is not repeated (the table says how many ran)


FULL = Config()
QUICK = Config(
    sizes=(8,), ks=(1, 4), latency_s=0.002, repeats=1, sequential=((8, 1),), api=((8, 4),), concurrency=8
)


def _judge():
    return judges.get("calibrated")


def run_batched(spec: str, groups, judge: LatencyJudge) -> tuple[float, object]:
    """One engine step over all groups (one batch per wave); (wall seconds, StepStats)."""
    judge.reset()
    cons = rewards.from_spec(spec)  # fresh: AGR's anchor pool is built in the step, as in training
    t0 = time.perf_counter()
    out = Engine(judge).run(cons, groups)
    return time.perf_counter() - t0, out.stats


def run_sequential(spec: str, groups, judge: LatencyJudge) -> tuple[float, int]:
    """The per-match sequential driver: one group after another, each request its own call."""
    judge.reset()
    cons = rewards.from_spec(spec)
    engine = Engine(Unbatched(judge))
    t0 = time.perf_counter()
    for g, group in enumerate(groups):
        engine.run(cons, [group], step=g)
    return time.perf_counter() - t0, judge.calls


def measure(spec: str, groups, judge: LatencyJudge, cfg: Config) -> dict:
    walls, stats = [], None
    for _ in range(cfg.repeats):
        wall, stats = run_batched(spec, groups, judge)
        walls.append(wall)
        if wall > cfg.slow_s:
            break
    assert stats is not None
    return {
        "waves": stats.waves,
        "batches": stats.judge_batches,
        "judge_calls": stats.judge_calls,
        "latency_calls": judge.calls,
        "wall_s": statistics.median(walls),
        "bound_s": judge.modelled_s,
        "inner_s": judge.inner_s,
        "repeats": len(walls),
    }


def run(out: Path, quick: bool = False, only: str | None = None, m: dict | None = None, overlap=None) -> dict:
    """All rows; ``overlap`` (a callable) is started before the sequential driver and its return
    value called after it: the sequential driver mostly sleeps, so run_all runs the (untimed)
    fidelity study on the other core meanwhile."""
    cfg = QUICK if quick else FULL
    m = m or common.machine()
    specs = common.constructor_specs(only)
    L = cfg.latency_s
    rows: list[dict] = []
    skipped: list[str] = []
    for n in cfg.sizes:
        for k in cfg.ks:
            groups = common.groups_for(k, n)
            for spec in specs:
                if why := common.skip_reason(spec, n):
                    skipped.append(f"{spec} at N={n}: {why}")
                    continue
                row = {"mode": f"batch L={L * 1e3:g}ms", "N": n, "K": k, "constructor": spec}
                row.update(measure(spec, groups, LatencyJudge(_judge(), per_batch_s=L), cfg))
                row["waves_x_L_s"] = row["waves"] * L
                row["ratio_to_bound"] = _ratio(row["wall_s"], row["waves_x_L_s"])
                rows.append(row)
                print(_line(row), flush=True)
    for n, k in cfg.api:
        groups = common.groups_for(k, n)
        for spec in specs:
            if common.skip_reason(spec, n):
                continue
            judge = LatencyJudge(_judge(), per_request_s=L, concurrency=cfg.concurrency)
            row = {"mode": f"api L={L * 1e3:g}ms c={cfg.concurrency}", "N": n, "K": k, "constructor": spec}
            row.update(measure(spec, groups, judge, cfg))
            row["waves_x_L_s"] = row["waves"] * L
            row["ratio_to_bound"] = _ratio(row["wall_s"], row["bound_s"])
            rows.append(row)
            print(_line(row), flush=True)
    finish = overlap() if overlap is not None else None
    try:
        for n, k in cfg.sequential:
            groups = common.groups_for(k, n)
            for row in (r for r in rows if (r["N"], r["K"]) == (n, k)):
                if row["mode"].startswith("batch"):
                    judge = LatencyJudge(_judge(), per_batch_s=L)
                    seq_s, seq_calls = run_sequential(row["constructor"], groups, judge)
                    row.update(sequential_s=seq_s, sequential_calls=seq_calls)
                    common.progress("waves", f"sequential N={n} K={k} {row['constructor']}: {seq_s:.2f} s")
            seq = {r["constructor"]: r for r in rows if (r["N"], r["K"]) == (n, k) and "sequential_s" in r}
            for row in (r for r in rows if (r["N"], r["K"]) == (n, k) and r["constructor"] in seq):
                # one request per call: the sequential driver pays L per call in both latency models
                row["sequential_s"] = seq[row["constructor"]]["sequential_s"]
                # a step without judge calls (adaptive, verifier rewards only) has nothing to speed up
                row["speedup"] = row["sequential_s"] / row["wall_s"] if row["waves"] else float("nan")
    finally:
        if finish is not None:
            finish()
    common.save_csv(out, "waves.csv", rows)
    summary = summarize(rows, cfg)
    _write_md(out, rows, summary, cfg, m, skipped, quick)
    return summary


def _ratio(a: float, b: float) -> float:
    """a / b; NaN when the step made no judge call (e.g. adaptive with verifier-only groups)."""
    return a / b if b > 0 else float("nan")


def _line(r: dict) -> str:
    s = f"[waves] {r['mode']:>18} N={r['N']:<3} K={r['K']:<3} {r['constructor']:<28} waves={r['waves']:<3} "
    s += f"wall={r['wall_s']:.3f}s bound={r['bound_s']:.3f}s x{r['ratio_to_bound']:.2f}"
    return s


def summarize(rows: list[dict], cfg: Config) -> dict:
    batch = [r for r in rows if r["mode"].startswith("batch") and r["ratio_to_bound"] == r["ratio_to_bound"]]
    api = [r for r in rows if r["mode"].startswith("api") and r["ratio_to_bound"] == r["ratio_to_bound"]]
    n8k8 = [
        r for r in batch if (r["N"], r["K"]) == (8, 8) and r.get("speedup", float("nan")) == r.get("speedup")
    ]
    worst = max(batch, key=lambda r: r["ratio_to_bound"]) if batch else None
    return {
        "latency_ms": cfg.latency_s * 1e3,
        "median_ratio": statistics.median(r["ratio_to_bound"] for r in batch) if batch else float("nan"),
        "worst_ratio": worst["ratio_to_bound"] if worst else float("nan"),
        "worst": f"{worst['constructor']} N={worst['N']} K={worst['K']}" if worst else "",
        "over_1_2": sorted(
            {f"{r['constructor']} (N={r['N']}, K={r['K']})" for r in batch if r["ratio_to_bound"] > 1.2}
        ),
        "cells": len(batch),
        "by_nk": _by_nk(batch),
        "batches_eq_waves": all(
            r["batches"] == r["waves"] == r["latency_calls"] for r in rows if r["mode"].startswith("batch")
        ),
        "api_median_ratio": statistics.median(r["ratio_to_bound"] for r in api) if api else float("nan"),
        "api_worst_ratio": max((r["ratio_to_bound"] for r in api), default=float("nan")),
        "min_speedup_n8k8": min((r["speedup"] for r in n8k8), default=float("nan")),
        "min_speedup_n8k8_at": min(n8k8, key=lambda r: r["speedup"])["constructor"] if n8k8 else "",
        "median_speedup_n8k8": statistics.median(r["speedup"] for r in n8k8) if n8k8 else float("nan"),
    }


def _by_nk(batch: list[dict]) -> list[dict]:
    """Per (N, K): median and worst wall / bound, and how many constructors are within 1.2×."""
    out = []
    for n, k in sorted({(r["N"], r["K"]) for r in batch}):
        x = [r["ratio_to_bound"] for r in batch if (r["N"], r["K"]) == (n, k)]
        within = sum(v <= 1.2 for v in x)
        out.append(
            {"N": n, "K": k, "median": statistics.median(x), "worst": max(x), "within": f"{within}/{len(x)}"}
        )
    return out


def nk_table(s: dict) -> str:
    return reporting.md_table(
        s["by_nk"],
        ["N", "K", "median", "worst", "within"],
        ["N", "K", "median wall / bound", "worst", "≤ 1.2×"],
    )


def speedup_line(s: dict) -> str:
    if s["min_speedup_n8k8"] != s["min_speedup_n8k8"]:
        return "- speed-up over the sequential driver at N = 8, K = 8: not measured in this run."
    return (
        f"- speed-up over the sequential driver at N = 8, K = 8: min **{s['min_speedup_n8k8']:.0f}×** "
        f"({s['min_speedup_n8k8_at']}), median {s['median_speedup_n8k8']:.0f}×; goal ≥ 20×."
    )


def _write_md(out: Path, rows, s: dict, cfg: Config, m, skipped, quick: bool) -> None:
    L = cfg.latency_s * 1e3
    cols = {
        "N": "N",
        "K": "K",
        "constructor": "constructor",
        "waves": "waves",
        "batches": "batches",
        "judge_calls": "judge calls",
        "wall_s": "wall s",
        "waves_x_L_s": "waves × L s",
        "ratio_to_bound": "wall / bound",
    }
    body = [
        f"Simulated `calibrated` judge behind `LatencyJudge`; bound = waves × L with L = {L:g} ms per batch "
        f"(one vLLM generate); wall = median of up to {cfg.repeats} engine steps (a step slower than "
        f"{cfg.slow_s:g} s runs once). Sequential = the same constructor, one request per judge call, "
        f"groups one after another (measured only at (N, K) ∈ {list(cfg.sequential)}; nothing extrapolated).",
        "",
        f"- wall / bound: median **{s['median_ratio']:.3f}×**, worst {s['worst_ratio']:.2f}× ({s['worst']}); "
        f"goal ≤ 1.2×, met by {s['cells'] - len(s['over_1_2'])} of {s['cells']} (constructor, N, K) cells "
        "(by N and K below).",
        speedup_line(s),
        f"- judge batches == waves == latency-judge calls in every batch row: {s['batches_eq_waves']} "
        "(fault-free judge: no retry batches).",
        f"- API model (L per request, {cfg.concurrency} in flight): wall / Σ⌈n/c⌉·L median "
        f"{s['api_median_ratio']:.3f}×, worst {s['api_worst_ratio']:.2f}×.",
        "",
        "A step with 0 waves made no judge call (adaptive when every group's verifier rewards "
        "differ): no bound, no ratio. A ratio well above 1 is CPU time the engine and the constructor "
        "spend between waves (e.g. a Bradley-Terry "
        "refit per wave), which serializes with the judge.",
    ]
    if skipped:
        body += ["", "Skipped: " + "; ".join(skipped)]
    body += common.quick_note(quick)
    body += ["", nk_table(s)]
    parts = ["\n".join(body)]
    for n in cfg.sizes:
        sub = [r for r in rows if r["mode"].startswith("batch") and r["N"] == n]
        parts.append(f"## Per-batch latency, N = {n}\n\n" + reporting.md_table(sub, cols))
    seq = [r for r in rows if r["mode"].startswith("batch") and "speedup" in r]
    parts.append(
        "## Sequential driver (same L per call)\n\n"
        + reporting.md_table(
            seq,
            ["N", "K", "constructor", "sequential_calls", "sequential_s", "wall_s", "speedup"],
            ["N", "K", "constructor", "calls", "sequential s", "engine wall s", "speed-up"],
        )
    )
    api = [r for r in rows if r["mode"].startswith("api")]
    parts.append(
        f"## API latency (L per request, concurrency {cfg.concurrency})\n\n"
        + reporting.md_table(
            api,
            [
                "N",
                "K",
                "constructor",
                "waves",
                "judge_calls",
                "wall_s",
                "bound_s",
                "ratio_to_bound",
                "speedup",
            ],
            [
                "N",
                "K",
                "constructor",
                "waves",
                "judge calls",
                "wall s",
                "Σ⌈n/c⌉·L s",
                "wall / bound",
                "vs sequential",
            ],
        )
    )
    common.write_page(out, "waves.md", "Waves vs sequential", m, "\n\n".join(parts), quick)


def main(argv=None) -> None:
    common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
