"""Rank-agreement metrics for small vectors (scipy's wrappers cost ~0.5 ms a call)."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r; 0.0 when either side is constant (no signal, rather than NaN)."""
    x = np.asarray(x, float) - np.mean(x)
    y = np.asarray(y, float) - np.mean(y)
    den = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / den) if den > 0 else 0.0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ = Pearson r of average ranks (matches scipy.stats.spearmanr)."""
    return pearson(rankdata(x), rankdata(y))


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall τ-b (tie-corrected, matches scipy.stats.kendalltau); 0.0 if a side is constant."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    iu = np.triu_indices(len(x), 1)
    dx = np.sign(x[:, None] - x[None, :])[iu]
    dy = np.sign(y[:, None] - y[None, :])[iu]
    den = np.sqrt(np.count_nonzero(dx) * np.count_nonzero(dy))
    return float((dx * dy).sum() / den) if den > 0 else 0.0
