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


def pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`pearson` of each row pair of ``x`` and ``y`` [rows, n], reduced along rows: the same
    numbers bit for bit (tests/test_metrics_rows.py); rows must be non-constant."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    return (xc * yc).sum(1) / np.sqrt((xc * xc).sum(1) * (yc * yc).sum(1))


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`kendall_tau_b` of each row pair of ``x`` and ``y`` [rows, n] (rows non-constant)."""
    iu = np.triu_indices(x.shape[1], 1)
    dx = np.sign(x[:, :, None] - x[:, None, :])[:, iu[0], iu[1]]
    dy = np.sign(y[:, :, None] - y[:, None, :])[:, iu[0], iu[1]]
    return (dx * dy).sum(1) / np.sqrt(np.count_nonzero(dx, axis=1) * np.count_nonzero(dy, axis=1))


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
