"""Aggregation speed: Bradley-Terry fits and Kemeny orders vs N, next to ``choix`` in the same run.

Data: every pair of N items once (round-robin), hard outcomes drawn from a Bradley-Terry model
with strengths N(0, 1), seed 0 — the same comparisons for every solver. Solvers:
``arenabench.aggregation.bradley_terry`` (Newton, choix's ``opt_pairwise`` objective) with BLAS
on 1 thread (the benchmarks' setting) and on every core (numpy's default), ``choix.opt_pairwise``
(same L2 ``alpha``) and ``choix.ilsr_pairwise`` (its own regularizer: times, and rank agreement
only). Kemeny: the greedy (CARA) and the exact DP (N ≤ 12) on a 2-vote matrix of the same data.
Run: ``python benchmarks/aggregation.py [--quick]``.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from arenabench import reporting
from arenabench.aggregation import bradley_terry, kemeny_exact, kemeny_greedy
from arenabench.metrics import kendall_tau_b

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

L2 = 0.1


@dataclass(frozen=True)
class Config:
    bt_sizes: tuple[int, ...] = (8, 16, 32, 64, 128)
    kemeny_sizes: tuple[int, ...] = (8, 10, 12, 16, 32, 64, 128)
    min_s: float = 0.2  # time each solver for at least this long ...
    max_reps: int = 200  # ... in at most this many calls


FULL = Config()
QUICK = Config(bt_sizes=(8, 16), kemeny_sizes=(8,), min_s=0.0, max_reps=2)


def timed(fn, cfg: Config) -> tuple[float, object]:
    """Median seconds per call over repeated calls (at least one), and the last result."""
    times, spent, out = [], 0.0, None
    while not times or (spent < cfg.min_s and len(times) < cfg.max_reps):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return float(np.median(times)), out


def data(n: int, seed: int = 0):
    rng = np.random.default_rng([seed, n])
    theta = rng.standard_normal(n)
    i, j = (np.array(c) for c in zip(*combinations(range(n), 2), strict=True))
    win = rng.random(len(i)) < 1.0 / (1.0 + np.exp(-(theta[i] - theta[j])))
    winners, losers = np.where(win, i, j), np.where(win, j, i)
    return winners, losers


def _all_cores_blas():
    """A context with BLAS on every core (numpy's default), or None without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=os.cpu_count(), user_api="blas")


def bt_rows(cfg: Config) -> list[dict]:
    import choix

    rows = []
    for n in cfg.bt_sizes:
        w, lo = data(n)
        pairs = list(zip(w.tolist(), lo.tolist(), strict=True))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # choix warns about convergence tolerances on some sizes
            t_ours, th_ours = timed(lambda w=w, lo=lo, n=n: bradley_terry(n, w, lo, 1.0, l2=L2), cfg)
            t_threads = float("nan")
            ctx = _all_cores_blas()
            if ctx is not None:
                with ctx:
                    t_threads, _ = timed(lambda w=w, lo=lo, n=n: bradley_terry(n, w, lo, 1.0, l2=L2), cfg)
            t_opt, th_opt = timed(lambda p=pairs, n=n: choix.opt_pairwise(n, p, alpha=L2, tol=1e-10), cfg)
            t_ilsr, th_ilsr = timed(lambda p=pairs, n=n: choix.ilsr_pairwise(n, p, alpha=L2, tol=1e-10), cfg)
        th_opt = np.asarray(th_opt)
        rows.append(
            {
                "N": n,
                "comparisons": len(pairs),
                "arenabench_ms": t_ours * 1e3,
                "arenabench_all_cores_blas_ms": t_threads * 1e3,
                "choix_opt_ms": t_opt * 1e3,
                "choix_ilsr_ms": t_ilsr * 1e3,
                "ours_over_opt": t_ours / t_opt,
                "ours_over_ilsr": t_ours / t_ilsr,
                "all_cores_over_1_thread": t_threads / t_ours,
                "max_abs_diff_ours_vs_opt": float(np.max(np.abs(np.asarray(th_ours) - th_opt))),
                "tau_ilsr_vs_opt": kendall_tau_b(np.asarray(th_ilsr), th_opt),
            }
        )
        common.progress(
            "aggregation",
            f"BT N={n}: " + ", ".join(f"{k}={reporting.fmt(v)}" for k, v in rows[-1].items()),
        )
    return rows


def kemeny_rows(cfg: Config) -> list[dict]:
    rows = []
    for n in cfg.kemeny_sizes:
        rng = np.random.default_rng([1, n])
        theta = rng.standard_normal(n)
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        votes = (rng.random((2, n, n)) < p).sum(0).astype(float)  # 2 votes per ordered pair
        W = np.triu(votes, 1) + np.tril(2.0 - votes.T, -1)  # W[i, j] + W[j, i] = 2
        t_greedy, (_, cost_g) = timed(lambda W=W: kemeny_greedy(W), cfg)
        row = {"N": n, "greedy_ms": t_greedy * 1e3, "greedy_disagreement": cost_g}
        if n <= 12:
            t_exact, (_, cost_e) = timed(lambda W=W: kemeny_exact(W), cfg)
            row.update(
                exact_ms=t_exact * 1e3,
                exact_disagreement=cost_e,
                exact_over_greedy_time=t_exact / t_greedy,
                greedy_gap=(cost_g - cost_e) / cost_e if cost_e else 0.0,
            )
        rows.append(row)
        common.progress(
            "aggregation",
            f"Kemeny N={n}: " + ", ".join(f"{k}={reporting.fmt(v)}" for k, v in row.items()),
        )
    return rows


# table columns: key -> header
BT_COLUMNS = {
    "N": "N",
    "comparisons": "comparisons",
    "arenabench_ms": "arenabench ms",
    "arenabench_all_cores_blas_ms": "arenabench ms, BLAS on all cores",
    "choix_opt_ms": "choix opt ms",
    "choix_ilsr_ms": "choix ilsr ms",
    "ours_over_opt": "arenabench / opt",
    "ours_over_ilsr": "arenabench / ilsr",
    "all_cores_over_1_thread": "all cores / 1 thread",
    "max_abs_diff_ours_vs_opt": "max |Δθ| arenabench vs opt",
    "tau_ilsr_vs_opt": "τ(ilsr, opt)",
}
KEMENY_COLUMNS = {
    "N": "N",
    "greedy_ms": "greedy ms",
    "exact_ms": "exact ms",
    "exact_over_greedy_time": "exact / greedy time",
    "greedy_disagreement": "greedy disagreement",
    "exact_disagreement": "exact disagreement",
    "greedy_gap": "greedy gap",
}


def run(out: Path, quick: bool = False, m: dict | None = None) -> dict:
    cfg = QUICK if quick else FULL
    m = m or common.machine()
    bt, kem = bt_rows(cfg), kemeny_rows(cfg)
    out.mkdir(parents=True, exist_ok=True)
    reporting.write_csv(
        out / "aggregation.csv",
        [{"part": "bradley_terry", **r} for r in bt] + [{"part": "kemeny", **r} for r in kem],
    )
    s = {
        "ours_over_opt": {r["N"]: r["ours_over_opt"] for r in bt},
        "all_cores_over_1_thread": {r["N"]: r["all_cores_over_1_thread"] for r in bt},
        "ours_over_ilsr": {r["N"]: r["ours_over_ilsr"] for r in bt},
        "max_diff_ours": max(r["max_abs_diff_ours_vs_opt"] for r in bt),
        "exact_over_greedy": {r["N"]: r["exact_over_greedy_time"] for r in kem if "exact_ms" in r},
        "greedy_ms": {r["N"]: r["greedy_ms"] for r in kem},
    }
    body = [
        f"Round-robin data (every pair once, hard outcomes from BT strengths N(0, 1)), L2 = {L2} for every "
        "L2 solver; times are the median per call over ≥ "
        f"{cfg.min_s:g} s of calls. `ilsr` regularizes differently (a prior on its Markov chain), "
        "so only its "
        "time and rank agreement (Kendall τ vs `opt_pairwise`) are comparable.",
        "",
        "- arenabench (Newton) / choix `opt_pairwise` time: "
        + reporting.listing(s["ours_over_opt"], ".2g")
        + f" (max |Δθ| {s['max_diff_ours']:.1e}).",
        "- arenabench with BLAS on every core / on 1 thread: "
        + reporting.listing(s["all_cores_over_1_thread"], ".1f")
        + " (up to N = 64 no BLAS call of the fit is split across threads; above, the fit limits BLAS to "
        "one thread itself, since a threaded call stalls whenever another process holds a core).",
        "- arenabench / choix `ilsr_pairwise` time: " + reporting.listing(s["ours_over_ilsr"], ".2g") + ".",
        "- Kemeny exact / greedy time: " + reporting.listing(s["exact_over_greedy"], ".0f") + ".",
    ]
    body += common.quick_note(quick)
    text = (
        "\n".join(body)
        + "\n\n## Bradley-Terry\n\n"
        + reporting.md_table(bt, BT_COLUMNS)
        + "\n\n## Kemeny (2 votes per pair)\n\n"
        + reporting.md_table(kem, KEMENY_COLUMNS)
    )
    common.write_page(out, "aggregation.md", "Aggregation: Bradley-Terry and Kemeny vs N", m, text, quick)
    return s


def main(argv=None) -> None:
    args = common.parser(__doc__).parse_args(argv)
    print(run(Path(args.out), args.quick))


if __name__ == "__main__":
    main()
