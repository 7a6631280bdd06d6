"""MAP Bradley-Terry strengths from soft judge verdicts on an incomplete comparison graph.

A fit is small (n ≤ a few hundred strengths), and L-BFGS-B's BLAS/LAPACK calls on it gain
nothing from threads; a threaded OpenBLAS instead wakes (and on a loaded machine waits for)
its pool on every call, which made a fit 3–7× slower than on one thread. So fits of up to
:data:`SMALL_FIT` strengths run with BLAS limited to one thread (``threadpoolctl``, when
installed; the same numbers either way: the calls involved are not split across threads at
these sizes, and the tests compare the two).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

BAD_VERDICT = "verdicts must be +1 (first wins), 0 (tie) or -1 (first loses)"


def soft_outcome(verdict, gamma: float):
    """Verdict +1 / 0 / −1 → γ / ½ / 1−γ, so an unreliable judge's win counts as less than certain."""
    if not 0.5 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0.5, 1], got {gamma}")
    if isinstance(verdict, int | float | np.floating | np.integer):  # one sample: no array round trip
        if verdict == 1:
            return float(gamma)
        if verdict == -1:
            return float(1.0 - gamma)
        if verdict == 0:
            return 0.5
        raise ValueError(BAD_VERDICT)
    v = np.asarray(verdict)
    if not np.all(np.isin(v, (-1, 0, 1))):
        raise ValueError(BAD_VERDICT)
    out = np.where(v > 0, gamma, np.where(v < 0, 1.0 - gamma, 0.5))
    return float(out) if out.ndim == 0 else out


def _check_data(n, i, j, outcome, weight):
    """Shared input checks: a bad index or outcome would otherwise fit silently to nonsense."""
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n}")
    i = np.asarray(i, dtype=int).ravel()
    j = np.asarray(j, dtype=int).ravel()
    if i.shape != j.shape:
        raise ValueError(f"i and j must have the same length, got {i.shape} and {j.shape}")
    o = np.broadcast_to(np.asarray(outcome, dtype=float), i.shape).copy()
    w = np.ones(i.shape) if weight is None else np.broadcast_to(np.asarray(weight, float), i.shape).copy()
    if np.any((i < 0) | (i >= n) | (j < 0) | (j >= n)):
        raise ValueError(f"comparison indices must lie in [0, {n})")
    if np.any(i == j):
        raise ValueError("an item cannot be compared with itself (i == j)")
    if not np.all(np.isfinite(o)) or np.any((o < 0) | (o > 1)):
        raise ValueError("outcomes must lie in [0, 1]")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    return int(n), i, j, o, w


SMALL_FIT = 1024  # strengths; a fit this small runs on one BLAS thread
_controller: list = []  # the threadpoolctl controller, made on first use ([None] without it)
_controller_lock = threading.Lock()


def one_blas_thread():
    """A context that limits BLAS to one thread (a no-op without ``threadpoolctl``). Not for
    concurrent use from several threads: the limit is process-wide."""
    if not _controller:
        with _controller_lock:
            if not _controller:
                try:
                    from threadpoolctl import ThreadpoolController

                    _controller.append(ThreadpoolController())
                except Exception:  # absent, or a platform it cannot inspect
                    _controller.append(None)
    ctl = _controller[0]
    return contextlib.nullcontext() if ctl is None else ctl.limit(limits=1, user_api="blas")


def bradley_terry(n: int, i, j, outcome, *, l2: float = 0.1, weight=None) -> np.ndarray:
    """MAP Bradley-Terry strengths θ (length n) from soft outcomes ``o`` = P(i beats j).

    Each observation is mirrored (o for "i beats j", 1−o for "j beats i"), and the minimized
    objective is ``l2·Σθ² + Σ w·[o·softplus(−(θi−θj)) + (1−o)·softplus(θi−θj)]`` — choix's
    ``opt_pairwise(alpha=l2)`` convention, so hard outcomes (o=1) give choix's fit. ``l2 > 0``
    keeps a perfectly ordered tournament finite and makes the fit unique; uncompared items get 0.
    """
    if not (np.isfinite(l2) and l2 > 0):
        raise ValueError(f"l2 must be > 0 (finite strengths need a penalty), got {l2}")
    n, i, j, o, w = _check_data(n, i, j, outcome, weight)
    theta = np.zeros(n)
    if len(i) == 0:
        return theta

    def fun(x):
        d = x[i] - x[j]
        f = l2 * (x @ x) + np.sum(w * (o * np.logaddexp(0.0, -d) + (1 - o) * np.logaddexp(0.0, d)))
        gd = w * (expit(d) - o)  # d/dd of the data term
        grad = 2 * l2 * x + np.bincount(i, gd, minlength=n) - np.bincount(j, gd, minlength=n)
        return f, grad

    with one_blas_thread() if n <= SMALL_FIT else contextlib.nullcontext():
        res = minimize(
            fun,
            theta,
            method="L-BFGS-B",
            jac=True,
            options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10},
        )
    theta = res.x
    seen = np.zeros(n, dtype=bool)
    seen[i] = seen[j] = True
    theta[~seen] = 0.0
    return theta


def bradley_terry_choix(n: int, winners, losers, *, l2: float = 0.1) -> np.ndarray:
    """choix's hard-outcome MAP fit (``opt_pairwise(alpha=l2)``): the reference for the tests."""
    import choix

    data = list(zip(np.asarray(winners, int).tolist(), np.asarray(losers, int).tolist(), strict=True))
    if not data:
        return np.zeros(int(n))
    return np.asarray(choix.opt_pairwise(int(n), data, alpha=l2, tol=1e-10), dtype=float)


def minmax(x) -> np.ndarray:
    """Scale to [0, 1] for use as a reward; a constant vector gives all 0.5 (no signal, not NaN)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return x.copy()
    lo, hi = x.min(), x.max()
    if not hi > lo:
        return np.full_like(x, 0.5)
    return (x - lo) / (hi - lo)
