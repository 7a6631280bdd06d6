"""Optimality gap of the greedy Kemeny heuristic (RRC's CARA) against the exact DP at n = 8..12.

Two instance families: ``votes`` (latent strengths s ~ N(0, 1); W[i, j] = wins of i over j in
V = 3 judge votes with P(i beats j) = sigmoid(s_i − s_j)) and ``uniform`` (W ~ U(0, 1)).
Writes results/kemeny_gap.{csv,md}.
Run: ``python experiments/kemeny_gap.py --out results``.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from arenabench import reporting
from arenabench.aggregation import kemeny_exact, kemeny_greedy

SIZES = (8, 9, 10, 11, 12)
VOTES = 3


def votes_instance(rng: np.random.Generator, n: int) -> np.ndarray:
    """Noisy judge votes: each pair judged VOTES times under a Bradley-Terry model."""
    s = rng.standard_normal(n)
    p = 1 / (1 + np.exp(-(s[:, None] - s[None, :])))
    wins = rng.binomial(VOTES, p)
    W = np.triu(wins, 1).astype(float)
    return W + np.triu(VOTES - wins, 1).T


def uniform_instance(rng: np.random.Generator, n: int) -> np.ndarray:
    W = rng.uniform(0, 1, (n, n))
    np.fill_diagonal(W, 0)
    return W


FAMILIES = {"votes": votes_instance, "uniform": uniform_instance}


def measure(family: str, n: int, instances: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, n, list(FAMILIES).index(family)])
    gaps, borda_gaps, secs = [], [], []
    for _ in range(instances):
        W = FAMILIES[family](rng, n)
        t0 = time.perf_counter()
        _, exact = kemeny_exact(W)
        secs.append(time.perf_counter() - t0)
        for out, tiebreak in ((gaps, None), (borda_gaps, W.sum(1))):  # plain, and as CARA calls it
            _, greedy = kemeny_greedy(W, tiebreak=tiebreak)
            assert greedy >= exact - 1e-9
            out.append((greedy - exact) / exact if exact > 0 else 0.0)
    gaps, borda_gaps = np.array(gaps), np.array(borda_gaps)
    return {
        "family": family,
        "n": n,
        "instances": instances,
        "mean_gap": float(gaps.mean()),
        "worst_gap": float(gaps.max()),
        "greedy_optimal": float(np.mean(gaps <= 1e-12)),
        "borda_mean_gap": float(borda_gaps.mean()),
        "borda_worst_gap": float(borda_gaps.max()),
        "exact_seconds": float(np.mean(secs)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = [measure(f, n, args.instances, args.seed) for f in FAMILIES for n in SIZES]
    df = pd.DataFrame(rows)
    df.to_csv(out / "kemeny_gap.csv", index=False)
    head = (
        f"# Greedy Kemeny (CARA) optimality gap\n\n"
        f"command: `python experiments/kemeny_gap.py --instances {args.instances} --seed {args.seed} "
        f"--out {args.out}`; gap = (greedy − exact) / exact (0 when exact = 0); "
        f"votes: V = {VOTES} Bradley-Terry judge votes per pair, uniform: W ~ U(0, 1); "
        f"borda_*: equal margins broken by total votes (as CARA calls it); "
        f"{args.instances} instances per row; total {time.perf_counter() - t0:.1f} s; "
        f"python {platform.python_version()}.\n\n"
    )
    cols = ["family", "n", "instances", "mean_gap", "worst_gap", "greedy_optimal"]
    cols += ["borda_mean_gap", "borda_worst_gap", "exact_ms"]
    gaps = ("mean_gap", "worst_gap", "borda_mean_gap", "borda_worst_gap")
    shown = [
        {
            **r,
            **{k: f"{r[k]:.4f}" for k in gaps},
            "greedy_optimal": f"{r['greedy_optimal']:.3f}",
            "exact_ms": f"{r['exact_seconds'] * 1e3:.2f}",
        }
        for r in rows
    ]
    table = reporting.md_table(shown, cols, cell=str)
    (out / "kemeny_gap.md").write_text(head + table + "\n")
    print(head + table)


if __name__ == "__main__":
    main()
