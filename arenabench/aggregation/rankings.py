"""Rankings from a comparison graph: one small pure function per rule, on the same observations.

An observation ``(i[k], j[k], o[k])`` is one comparison of items i and j with outcome ``o`` for
i: 1 a win, ½ a tie, 0 a loss (a constructor's match verdicts: ``rewards.base.match_verdicts``),
listed in the order the comparisons were played. Each rule returns a score per item — higher is
better, NaN for an item in no observation — for ``advantages.ranks_from_keys``. They differ in
what they read from the same graph:

* ``win_rate`` — share of its comparisons an item won (ties ½); ArenaRL's round-robin score.
* ``copeland`` — pairwise majorities: 1 per opponent beaten over all their comparisons, ½ per
  opponent it split with; robust to one pair being asked many times.
* ``elo`` — sequential Elo over the comparisons in playing order: the only rule whose result
  depends on that order, as an online arena's does.
* ``bradley_terry`` — the L2-regularized Bradley-Terry fit: credits beating strong opponents,
  which matters on a sparse graph.
* ``kemeny`` / ``kemeny_exact`` — the order that contradicts the fewest outcomes (greedy, as
  RRC's CARA; exact DP for n ≤ 12), as win counts with unseparated neighbours pooled.

On a complete graph with one comparison per pair (a round-robin, one vote) win rate, Copeland
and Bradley-Terry give the same order, ties included: Copeland's score is the win count w_i, and
Bradley-Terry's stationarity condition reads g(θ_i) = w_i + ½ with g(t) = 2·l2·t + Σ_j σ(t − θ_j)
(the sum over all j, σ(0) = ½ for j = i) — one increasing function for every i, so θ_i is
increasing in w_i and equal wins give equal strengths. They differ on sparse or repeated graphs.
"""

from __future__ import annotations

import numpy as np

from arenabench.aggregation.bradley_terry import bradley_terry
from arenabench.aggregation.kemeny import kemeny_exact, kemeny_greedy, order_wins, pool_unsupported

ELO_K = 32.0  # the classic chess K: ratings move by up to K/2 on a game between equals
ELO_SCALE = 400.0  # a 400-point gap is 10:1 odds
BT_L2 = 0.1  # the project's Bradley-Terry penalty (rewards/bradley_terry.py, Reasoning Arena)


def _obs(n: int, i, j, o) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Checked arrays, and which items appear (the rest score NaN)."""
    i, j = np.asarray(i, dtype=int).ravel(), np.asarray(j, dtype=int).ravel()
    o = np.asarray(o, dtype=float).ravel()
    if not (len(i) == len(j) == len(o)):
        raise ValueError(f"i, j and o must have one entry per comparison; got {len(i)}, {len(j)}, {len(o)}")
    if np.any((i < 0) | (i >= n) | (j < 0) | (j >= n)) or np.any(i == j):
        raise ValueError(f"comparisons must be between two different items in [0, {n})")
    if not np.all(np.isin(o, (0.0, 0.5, 1.0))):
        raise ValueError("outcomes must be 1 (i wins), 0.5 (tie) or 0 (j wins)")
    seen = np.zeros(n, dtype=bool)
    seen[i] = seen[j] = True
    return i, j, o, seen


def win_rate(n: int, i, j, o) -> np.ndarray:
    """Σ outcomes / comparisons per item (ties ½ each)."""
    i, j, o, seen = _obs(n, i, j, o)
    won = np.bincount(i, o, minlength=n) + np.bincount(j, 1.0 - o, minlength=n)
    games = np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
    return np.where(seen, won / np.maximum(games, 1), np.nan)


def copeland(n: int, i, j, o) -> np.ndarray:
    """Per opponent met: 1 if the item won the majority of their comparisons, ½ on a split, 0
    if it lost; summed (Copeland's method with ½ for pairwise ties)."""
    i, j, o, seen = _obs(n, i, j, o)
    W = np.zeros((n, n))  # W[a, b]: outcomes won by a against b
    np.add.at(W, (i, j), o)
    np.add.at(W, (j, i), 1.0 - o)
    met = (W + W.T) > 0
    score = ((W > W.T) + 0.5 * ((W == W.T) & met)).sum(1)
    return np.where(seen, score, np.nan)


def elo(n: int, i, j, o, k: float = ELO_K, scale: float = ELO_SCALE) -> np.ndarray:
    """Ratings from 0, updated comparison by comparison in the given order:
    ``E = 1 / (1 + 10^((R_j − R_i)/scale))``, ``R_i += k (o − E)``, ``R_j −= k (o − E)``."""
    i, j, o, seen = _obs(n, i, j, o)
    r = np.zeros(n)
    for a, b, out in zip(i, j, o, strict=True):
        expected = 1.0 / (1.0 + 10.0 ** ((r[b] - r[a]) / scale))
        r[a] += k * (out - expected)
        r[b] -= k * (out - expected)
    return np.where(seen, r, np.nan)


SNAP = 1e-7  # strengths closer than this are one value (the fit is exact to ~1e-13)


def snap(x: np.ndarray, tol: float = SNAP) -> np.ndarray:
    """Values that differ by less than ``tol`` from their sorted neighbour share their run's
    mean: strengths equal in theory (equal win counts on a balanced graph) then tie exactly, so a
    constructor's tie-break decides between them, not the optimizer's round-off."""
    x = np.asarray(x, dtype=float).copy()
    ok = np.flatnonzero(~np.isnan(x))
    if len(ok) < 2:
        return x
    order = ok[np.argsort(x[ok], kind="stable")]
    v = x[order]
    run = np.concatenate([[0], np.cumsum(np.diff(v) >= tol)])  # run number of each sorted value
    x[order] = (np.bincount(run, v) / np.bincount(run))[run]
    return x


def bradley_terry_scores(n: int, i, j, o, l2: float = BT_L2) -> np.ndarray:
    """MAP Bradley-Terry strengths (``aggregation.bradley_terry``; a tie is the soft outcome ½),
    :func:`snap`-ped."""
    i, j, o, seen = _obs(n, i, j, o)
    return snap(np.where(seen, bradley_terry(n, i, j, o, l2=l2), np.nan))


def kemeny(n: int, i, j, o, exact: bool = False) -> np.ndarray:
    """Win counts (n' − 1 … 0 over the n' items seen) of the Kemeny order of the outcome matrix
    (``W[a, b]`` = outcomes won by a against b): greedy with Borda tie-break as CARA, or the
    exact DP; neighbours no evidence separates share their mean (``pool_unsupported``)."""
    i, j, o, seen = _obs(n, i, j, o)
    idx = np.flatnonzero(seen)
    pos = np.full(n, -1)
    pos[idx] = np.arange(len(idx))
    W = np.zeros((len(idx), len(idx)))
    np.add.at(W, (pos[i], pos[j]), o)
    np.add.at(W, (pos[j], pos[i]), 1.0 - o)
    order, _ = kemeny_exact(W) if exact else kemeny_greedy(W, tiebreak=W.sum(1))
    out = np.full(n, np.nan)
    out[idx] = pool_unsupported(order_wins(order), order, W)
    return out


AGGREGATIONS = {
    "win_rate": win_rate,
    "copeland": copeland,
    "elo": elo,
    "bradley_terry": bradley_terry_scores,
    "kemeny": kemeny,
    "kemeny_exact": lambda n, i, j, o: kemeny(n, i, j, o, exact=True),
}


def check_aggregation(name: object, who: str) -> None:
    if name not in AGGREGATIONS:
        raise ValueError(f"{who}: aggregation must be one of {', '.join(AGGREGATIONS)}; got {name!r}")


def aggregate(name: str, n: int, i, j, o) -> np.ndarray:
    """The score per item of rule ``name`` (one of :data:`AGGREGATIONS`)."""
    check_aggregation(name, "aggregate")
    return AGGREGATIONS[name](n, i, j, o)
