"""Small pure statistics for comparing training arms over seeds (``arenabench compare --stats``).

- :func:`t_interval`: mean and two-sided t confidence interval over seeds (one run per seed).
- :func:`paired_t`: paired differences arm − baseline over seeds matched one to one: mean
  difference, its t interval, and the two-sided paired t-test p-value (``scipy.stats.ttest_rel``).
- :func:`curve_auc`: area under a logged curve by the trapezoid rule over the logged steps,
  divided by the step span (so it is the curve's time-average, on the metric's own scale).
- :func:`reach_target` / :func:`steps_to_reach`: the first logged step at which a curve reaches
  ``start + fraction · (reference − start)``.

Fewer than two values give NaN intervals and p-values, never an error.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps


def _clean(x: Sequence[float]) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[~np.isnan(x)]


def t_interval(x: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """``mean``, ``lo``, ``hi`` (t interval at ``level``, df = n − 1), ``sem`` and ``n`` of the
    non-NaN values of ``x``. NaN bounds for n < 2; an empty ``x`` gives NaN throughout."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1); got {level}")
    x = _clean(x)
    n = len(x)
    mean = float(x.mean()) if n else math.nan
    if n < 2:
        return {"mean": mean, "lo": math.nan, "hi": math.nan, "sem": math.nan, "n": n}
    sem = float(x.std(ddof=1) / math.sqrt(n))
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * sem
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "sem": sem, "n": n}


def paired_t(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Paired differences ``a − b`` (equal-length, element k of each from the same seed): the mean
    difference with its t interval (``mean``, ``lo``, ``hi``, ``sem``, ``n``) and ``p``, the
    two-sided paired t-test p-value. Pairs with a NaN on either side are dropped. Identical
    differences (zero spread) give a zero-width interval and scipy's p (NaN when all are 0)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values need two equal-length vectors; got shapes {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    out = t_interval(a - b, level)
    p = math.nan
    if len(a) >= 2:
        with warnings.catch_warnings():  # zero-spread differences: scipy warns and returns 0 or NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(sps.ttest_rel(a, b).pvalue)
    return {**out, "p": p}


def curve_auc(steps: Sequence[float], values: Sequence[float]) -> float:
    """Trapezoid area under ``values`` over ``steps`` divided by ``steps[-1] − steps[0]``: the
    curve's time-average. One point gives its value; none gives NaN."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if s.shape != v.shape:
        raise ValueError(f"steps and values differ in length: {s.shape} vs {v.shape}")
    if len(s) == 0:
        return math.nan
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    span = s[-1] - s[0]
    if span == 0:
        return float(v[-1])
    return float(np.sum((v[1:] + v[:-1]) / 2 * np.diff(s)) / span)


def reach_target(start: float, reference: float, fraction: float) -> float:
    """``start + fraction · (reference − start)``."""
    return float(start + fraction * (reference - start))


def steps_to_reach(
    steps: Sequence[float], values: Sequence[float], target: float, start: float | None = None
) -> float:
    """The first logged step at which the curve reaches ``target``: ``value >= target`` if the
    target lies at or above ``start`` (default: the first value), ``value <= target`` if below.
    NaN if it never does."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if len(s) == 0 or math.isnan(target):
        return math.nan
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    start = float(v[0]) if start is None else float(start)
    hit = v >= target if target >= start else v <= target
    return float(s[np.argmax(hit)]) if hit.any() else math.nan
