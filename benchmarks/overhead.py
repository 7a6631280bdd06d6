"""Engine + constructor + aggregation overhead per group, with a zero-latency judge.

The time a step spends outside the judge serializes with it: at L per wave it is what the
``waves`` table's wall / bound ratio is made of. Measured per constructor at N ∈ {8, 16, 64}
behind a zero-latency :class:`LatencyJudge` (which times the simulated judge itself, so its
compute is subtracted: a served judge does that work within its latency). Reported as a share
of the judge's critical path at L = 10 ms for K = 8 groups per step, and as the largest K that
stays under 2%. Run: ``python benchmarks/overhead.py [--quick]``.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from arenabench import judges, reporting, rewards
from arenabench.engine import Engine
from arenabench.judges.latency import LatencyJudge
from arenabench.rewards.reasoning_arena import ReasoningArenaLive

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (8, 16, 64)
    groups: tuple[int, ...] = (8, 8, 2)  # K per size: enough groups to amortize, few enough at N = 64
    min_s: float = 0.3  # repeat a measurement until this much time is spent ...
    max_repeats: int = 5  # ... or this many runs
    latency_s: float = 0.010  # the L the share is quoted at
    k_step: int = 8  # the K the share is quoted at
    api_concurrency: int = 32  # the API model's requests in flight (L per request = latency_s)
    live_sizes: tuple[int, ...] = (8, 16)  # N for the live arena vs single-elimination check (K = 8)
    live_repeats: int = 21


FULL = Config()
QUICK = Config(sizes=(8,), groups=(2,), min_s=0.0, max_repeats=1, live_sizes=(8,), live_repeats=1)
LIVE_VS = ("reasoning_arena_live", "seeded_single_elim")


def measure(spec: str, groups, cfg: Config) -> dict:
    judge = LatencyJudge(judges.get("calibrated"))
    walls, inner, stats = [], [], None
    spent = 0.0
    while len(walls) < cfg.max_repeats and (not walls or spent < cfg.min_s):
        judge.reset()
        cons = rewards.from_spec(spec)
        t0 = time.perf_counter()
        stats = Engine(judge).run(cons, groups).stats
        wall = time.perf_counter() - t0
        walls.append(wall)
        inner.append(judge.inner_s)
        spent += wall
    assert stats is not None
    k = len(groups)
    wall = statistics.median(walls)
    judge_s = statistics.median(inner)
    over = max(wall - judge_s, 0.0) / k
    crit = stats.waves * cfg.latency_s
    # the same step's batches against an API judge: L per request, c in flight (measured K)
    api = sum(math.ceil(b / cfg.api_concurrency) * cfg.latency_s for _, b, _ in judge.log)
    return {
        "K_measured": k,
        "waves": stats.waves,
        "requests_per_group": stats.judge_calls / k,
        "wall_ms_per_group": wall / k * 1e3,
        "sim_judge_ms_per_group": judge_s / k * 1e3,
        "overhead_ms_per_group": over * 1e3,
        "overhead_us_per_request": over / (stats.judge_calls / k) * 1e6
        if stats.judge_calls
        else float("nan"),
        "share_at_L": (cfg.k_step * over / crit) if crit else float("nan"),
        "max_K_under_2pct": (0.02 * crit / over) if crit and over > 0 else float("nan"),
        "share_api": (k * over / api) if api else float("nan"),
        "repeats": len(walls),
    }


def run(out: Path, quick: bool = False, only: str | None = None, m: dict | None = None) -> dict:
    cfg = QUICK if quick else FULL
    m = m or common.machine()
    rows, skipped = [], []
    for n, k in zip(cfg.sizes, cfg.groups, strict=True):
        groups = common.groups_for(k, n, seed=1)
        for spec in common.constructor_specs(only):
            if why := common.skip_reason(spec, n):
                skipped.append(f"{spec} at N={n}: {why}")
                continue
            row = {"N": n, "constructor": spec, **measure(spec, groups, cfg)}
            rows.append(row)
            common.progress(
                "overhead",
                f"N={n:<3} {spec:<28} {row['overhead_ms_per_group']:8.2f} ms/group "
                f"({row['overhead_us_per_request']:.1f} µs/request) share@{cfg.latency_s * 1e3:g}ms,"
                f"K={cfg.k_step}: {row['share_at_L']:.1%}",
            )
    common.save_csv(out, "overhead.csv", rows)
    s = summarize(rows, cfg)
    live = live_vs_single_elim(cfg)
    for key, col in (
        ("live_over_single_elim", "ratio"),
        ("free_fit_over_single_elim", "free_fit_ratio"),
        ("fit_share", "fit_share"),
    ):
        s[key] = {f"N={r['N']}, {r['blas_threads']} BLAS": r[col] for r in live}
    L = cfg.latency_s * 1e3
    body = [
        f"Zero-latency `LatencyJudge` around the `calibrated` simulated judge; overhead = step wall − the "
        f"simulated judge's own compute, per group (median of up to {cfg.max_repeats} runs over K groups, "
        f"K = {dict(zip(cfg.sizes, cfg.groups, strict=True))} by N). share = K·overhead / (waves·L) at "
        f"K = {cfg.k_step}, L = {L:g} ms; max K = the K per step at which the share reaches 2%. A fixed L "
        "per batch, whatever its size, is the judge's best case (448 requests in 10 ms for round-robin at "
        "N = K = 8); the API column charges the same batches L per request with "
        f"{cfg.api_concurrency} in flight.",
        "",
        f"- share < 2% at L = {L:g} ms, K = {cfg.k_step}: {s['under_2pct']} of {s['rows']} rows; "
        f"median share {s['median_share']:.1%} by N: "
        + reporting.listing(s["median_share_by_n"], ".1%", suffix="")
        + ".",
        f"- against an API judge ({L:g} ms per request, {cfg.api_concurrency} in flight, the measured K): "
        f"{s['api_under_2pct']} of {s['api_rows']} rows under 2%; median share {s['api_median_share']:.1%}.",
        "- engine + constructor cost per judge request (median over rows): "
        f"{s['median_us_per_request']:.1f} µs.",
        f"- heaviest: {', '.join(s['heaviest'])}.",
        "- the live Reasoning Arena's step over seeded single-elimination's (K = 8, the plain `calibrated` "
        "judge, wall time, median of interleaved runs), with BLAS on one thread and on every core (what a "
        "caller gets by default): " + reporting.listing(s["live_over_single_elim"], ".2f", label="{}:") + ".",
        "- the same with every Bradley-Terry fit free (`FreeFitLive`, a control: the live arena's own "
        "schedule — N − 1 waves, 3N − 6 comparisons a group, against single-elimination's 1 + ⌈log2 N⌉ "
        "and 2N − 2 — with each fit looked up): "
        + reporting.listing(s["free_fit_over_single_elim"], ".2f", label="{}:")
        + "; so the fits are this share of the live arena's step: "
        + reporting.listing(s["fit_share"], ".0%", suffix="", label="{}:")
        + ". No fit, however fast, takes the live arena below its free-fit ratio.",
    ]
    if skipped:
        body += ["", "Skipped: " + "; ".join(skipped)]
    body += common.quick_note(quick)
    cols = {
        "N": "N",
        "constructor": "constructor",
        "waves": "waves",
        "requests_per_group": "requests/group",
        "wall_ms_per_group": "wall ms/group",
        "sim_judge_ms_per_group": "sim judge ms/group",
        "overhead_ms_per_group": "overhead ms/group",
        "overhead_us_per_request": "µs/request",
        "share_at_L": f"share @ L={L:g}ms, K={cfg.k_step}",
        "max_K_under_2pct": "max K under 2%",
        "share_api": f"share, API {L:g} ms/request, c={cfg.api_concurrency}",
    }
    shown = [{**r, **{c: _pct(r[c]) for c in ("share_at_L", "share_api")}} for r in rows]
    tables = [
        f"## N = {n}\n\n" + reporting.md_table([r for r in shown if r["N"] == n], cols) for n in cfg.sizes
    ]
    tables.append("## Live arena vs single-elimination, by BLAS threads\n\n" + reporting.md_table(live))
    common.write_page(
        out,
        "overhead.md",
        "Engine + aggregation overhead",
        m,
        "\n".join(body) + "\n\n" + "\n\n".join(tables),
        quick,
    )
    return s


@dataclass
class FreeFitLive(ReasoningArenaLive):
    """Control: the live arena with every Bradley-Terry fit looked up (fitted once, on a warm-up
    run), so the same schedule, judge calls and engine work cost what they do and the fits ~0
    (hashing a wave's observations is left: a floor from above). What a perfect fit would buy."""

    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def fit(self, n, obs, init=None):
        key = (n, tuple(obs))
        if key not in self.memo:
            self.memo[key] = super().fit(n, obs, init)
        return self.memo[key].copy()


def live_vs_single_elim(cfg: Config) -> list[dict]:
    """Issue 17's check: the live arena (a Bradley-Terry refit every wave) per step, over seeded
    single-elimination's, with the caller's BLAS on one thread and on every core (a threaded
    BLAS used to wake its pool on each small fit: 7x slower steps on a busy machine); and the
    live arena with free fits (:class:`FreeFitLive`), the floor that its topology sets."""
    from threadpoolctl import threadpool_limits

    rows = []
    for n in cfg.live_sizes:
        groups = common.groups_for(8, n, seed=1)
        free = FreeFitLive()
        Engine(judges.get("calibrated")).run(free, groups)  # warm-up: fills the memo
        arms = {spec: (lambda spec=spec: rewards.from_spec(spec)) for spec in LIVE_VS}
        arms["free fits"] = lambda free=free: free
        for threads in sorted({1, os.cpu_count() or 1}):
            walls: dict[str, list[float]] = {arm: [] for arm in arms}
            with threadpool_limits(limits=threads, user_api="blas"):
                for _ in range(cfg.live_repeats):  # interleaved: all see the same machine load
                    for arm, make in arms.items():
                        t0 = time.perf_counter()
                        Engine(judges.get("calibrated")).run(make(), groups)
                        walls[arm].append(time.perf_counter() - t0)
            live, single, floor = (statistics.median(walls[arm]) for arm in arms)
            rows.append(
                {
                    "N": n,
                    "K": 8,
                    "blas_threads": threads,
                    "live_ms": live * 1e3,
                    "single_elim_ms": single * 1e3,
                    "free_fit_live_ms": floor * 1e3,
                    "ratio": live / single,
                    "free_fit_ratio": floor / single,
                    "fit_share": (live - floor) / live,
                }
            )
            common.progress(
                "overhead",
                f"live / single-elim N={n}, {threads} BLAS: {live / single:.2f}x "
                f"(free fits {floor / single:.2f}x; fits {(live - floor) / live:.0%} of the step)",
            )
    return rows


def _pct(v: float) -> str:
    return "" if v != v else f"{v:.1%}"


def summarize(rows, cfg: Config) -> dict:
    ok = [r for r in rows if r["share_at_L"] == r["share_at_L"]]
    by_n = {}
    for n in cfg.sizes:
        sub = [r["share_at_L"] for r in ok if r["N"] == n]
        if sub:
            by_n[n] = statistics.median(sub)
    api = [r["share_api"] for r in rows if r["share_api"] == r["share_api"]]
    top = sorted(ok, key=lambda r: -r["share_at_L"])[:3]
    us = [
        r["overhead_us_per_request"]
        for r in rows
        if r["overhead_us_per_request"] == r["overhead_us_per_request"]
    ]
    return {
        "rows": len(ok),
        "under_2pct": sum(r["share_at_L"] < 0.02 for r in ok),
        "median_share": statistics.median(r["share_at_L"] for r in ok) if ok else float("nan"),
        "median_share_by_n": by_n,
        "median_us_per_request": statistics.median(us) if us else float("nan"),
        "api_rows": len(api),
        "api_under_2pct": sum(x < 0.02 for x in api),
        "api_median_share": statistics.median(api) if api else float("nan"),
        "heaviest": [f"{r['constructor']} N={r['N']} ({r['share_at_L']:.0%})" for r in top],
        "latency_ms": cfg.latency_s * 1e3,
        "k_step": cfg.k_step,
    }


def main(argv=None) -> None:
    common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
