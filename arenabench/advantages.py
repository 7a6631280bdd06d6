"""Ranks → rewards → group-standardized advantages (small pure functions).

Standardization uses the **population** std (``ddof=0``) by default, so advantages have
exactly zero mean and unit std per group. For N=8 the best rank then gets
``(1 − 0.5) / sqrt(63/12)/7 = 1.5275``; with ``ddof=1`` (torch.std, verl's GRPO) it is
``1.4289``. ArenaRL's text quotes σ_r ≈ 0.286 and A ≈ 1.75 for N=8: that σ is wrong —
the std of {0, 1/7, …, 1} is 0.327 (population) or 0.350 (ddof=1).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-6  # as verl's GRPO: keeps a zero-variance group at exactly zero advantage
_OVERFLOW = 1e150  # above this |reward| its square overflows float64


def ranks_from_keys(*keys: np.ndarray) -> np.ndarray:
    """0-based ranks (0 = best) by descending lexicographic keys; exact ties share the mean rank.

    NaN in the first key marks an unranked entry (its rank is NaN).
    """
    first = np.asarray(keys[0], dtype=float)
    ranked = ~np.isnan(first)
    out = np.full(len(first), np.nan)
    if not ranked.any():
        return out
    cols = [np.nan_to_num(np.asarray(k, dtype=float)[ranked], nan=-np.inf) for k in keys]
    order = np.lexsort([-c for c in reversed(cols)])  # best first
    pos = np.empty(len(order))
    pos[order] = np.arange(len(order))
    _, tie = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
    tie = tie.ravel()
    out[ranked] = (np.bincount(tie, weights=pos) / np.bincount(tie))[tie]
    return out


def rank_rewards(rank: np.ndarray) -> np.ndarray:
    """ArenaRL's quantile reward ``1 − rank/(N−1)`` over the ranked entries (NaN stays NaN)."""
    rank = np.asarray(rank, dtype=float)
    n = int((~np.isnan(rank)).sum())
    if n <= 1:
        return np.where(np.isnan(rank), np.nan, 0.5)
    return 1.0 - rank / (n - 1)


def standardize(reward: np.ndarray, ddof: int = 0, eps: float = EPS) -> np.ndarray:
    """GRPO group standardization ``(r − μ)/(σ + ε)``; NaN entries get advantage 0. Rewards too
    large to square are divided by their largest magnitude first (the same advantages up to ε)."""
    reward = np.asarray(reward, dtype=float)
    ok = ~np.isnan(reward)
    adv = np.zeros(len(reward))
    if ok.sum() <= ddof or ok.sum() < 2:
        return adv
    r = reward[ok]
    scale = float(np.abs(r).max())
    if scale > _OVERFLOW:  # r² would overflow to inf (NaN advantages): standardize r/scale instead
        r = r / scale
    adv[ok] = (r - r.mean()) / (r.std(ddof=ddof) + eps)
    return adv
