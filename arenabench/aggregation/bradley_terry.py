"""MAP Bradley-Terry strengths from soft judge verdicts on an incomplete comparison graph.

The objective is strictly convex (L2 > 0), so the MAP is unique and Newton's method finds it
to ~1e-13 in a handful of steps; a warm start (the previous wave's strengths, in a
live tournament) saves some of them. A fit is small (n ≤ a few hundred strengths): the dense
n×n Newton system costs microseconds, where scipy's L-BFGS-B cost ~0.7 ms per fit at n = 8 and
stopped ~1e-8 short of the optimum. Above :data:`DENSE_FIT` strengths (n² memory) the fit is
L-BFGS-B's.

BLAS threads: a threaded OpenBLAS wakes (and on a loaded machine waits for) its pool on
every call it splits, which made a fit 3–7× slower than on one thread. OpenBLAS does not
split the calls of a fit with n ≤ :data:`UNSPLIT_FIT` (its small Cholesky runs on one thread;
the tests compare 1 and 2 threads bit for bit), so those run as they are; larger fits up to
:data:`SMALL_FIT` run with BLAS limited to one thread (``threadpoolctl``, when installed;
~20 µs to enter, so not for the small ones). So a fit's bits do not depend on the caller's
BLAS threads.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

# scipy's pieces, bound by _load_scipy() on the first fit: importing scipy.linalg/optimize costs
# ~0.5 s, which ``import arenabench`` (and so ``arenabench list``) does not pay
dposv = minimize = expit = None  # dposv: H is positive definite: Cholesky, and no numpy wrapper


def _load_scipy() -> None:
    global dposv, minimize, expit
    from scipy.linalg.lapack import dposv
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
    o = _per_comparison(outcome, i.shape)
    w = None if weight is None else _per_comparison(weight, i.shape)
    if len(i):
        both = np.concatenate([i, j])
        if both.min() < 0 or both.max() >= n:
            raise ValueError(f"comparison indices must lie in [0, {n})")
    if np.any(i == j):
        raise ValueError("an item cannot be compared with itself (i == j)")
    if len(o) and not (o.min() >= 0 and o.max() <= 1):  # NaN fails both
        raise ValueError("outcomes must lie in [0, 1]")
    if w is not None and len(w) and not (w.min() >= 0 and w.max() < np.inf):
        raise ValueError("weights must be finite and non-negative")
    return int(n), i, j, o, w


def _per_comparison(values, shape) -> np.ndarray:
    """``values`` as floats, one per comparison (a scalar is broadcast; read-only: no fit writes)."""
    a = np.asarray(values, dtype=float)
    return a if a.shape == shape else np.broadcast_to(a, shape)


SMALL_FIT = 1024  # strengths; a fit this small runs on one BLAS thread
UNSPLIT_FIT = 64  # strengths; OpenBLAS runs a fit this small on one thread anyway
DENSE_FIT = 2048  # strengths; above, the n×n Newton system would be too large: L-BFGS-B
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


def bradley_terry(n: int, i, j, outcome, *, l2: float = 0.1, weight=None, init=None) -> np.ndarray:
    """MAP Bradley-Terry strengths θ (length n) from soft outcomes ``o`` = P(i beats j).

    Each observation is mirrored (o for "i beats j", 1−o for "j beats i"), and the minimized
    objective is ``l2·Σθ² + Σ w·[o·softplus(−(θi−θj)) + (1−o)·softplus(θi−θj)]`` — choix's
    ``opt_pairwise(alpha=l2)`` convention, so hard outcomes (o=1) give choix's fit. ``l2 > 0``
    keeps a perfectly ordered tournament finite and makes the fit unique; uncompared items get 0.
    ``init``: where the search starts (e.g. the previous fit); the optimum is the same.
    """
    if not (np.isfinite(l2) and l2 > 0):
        raise ValueError(f"l2 must be > 0 (finite strengths need a penalty), got {l2}")
    n, i, j, o, w = _check_data(n, i, j, outcome, weight)
    theta = np.zeros(n)
    if init is not None:
        theta = np.array(init, dtype=float).ravel()
        if theta.shape != (n,) or not np.all(np.isfinite(theta)):
            raise ValueError(f"init must be {n} finite strengths, got shape {theta.shape}")
    if len(i) == 0:
        return np.zeros(n)
    if n > DENSE_FIT:
        theta = _lbfgs(n, i, j, o, w, l2, theta)
    else:
        with one_blas_thread() if UNSPLIT_FIT < n <= SMALL_FIT else contextlib.nullcontext():
            theta = _newton(n, i, j, o, w, l2, theta)
    seen = np.zeros(n, dtype=bool)
    seen[i] = seen[j] = True
    theta[~seen] = 0.0
    return theta


def _objective(x, i, j, o, w, l2) -> float:
    """The MAP objective, with o·softplus(−d) + (1−o)·softplus(d) written softplus(d) − o·d (one
    softplus). Only Armijo's test reads it: its last bits change θ only through a test that
    lands within round-off of its threshold (none in 2000 random fits, compared bit for bit)."""
    d = x[i] - x[j]
    data = np.logaddexp(0.0, d) - o * d
    return l2 * (x @ x) + np.sum(data if w is None else w * data)


def _gradient(x, i, j, o, w, l2, n) -> tuple[np.ndarray, np.ndarray]:
    """(σ(θi − θj) per observation, the objective's gradient)."""
    p = expit(x[i] - x[j])
    gd = p - o if w is None else w * (p - o)  # d/dd of the data term
    return p, 2 * l2 * x + np.bincount(i, gd, minlength=n) - np.bincount(j, gd, minlength=n)


def _newton(n, i, j, o, w, l2, x, maxiter: int = 200) -> np.ndarray:
    """Newton's method: full steps while the Newton decrement² falls (from 0.01 down), Armijo
    backtracking otherwise, until the decrement² is below 1e-14: θ is then ~1e-7 from the
    optimum, and the last step (quadratic convergence) lands within ~1e-13. ``w`` None: weights 1."""
    # H's entries, per pair and then the ridge (bincount adds in this order: the ridge last)
    if dposv is None:
        _load_scipy()
    pairs = np.concatenate([i * (n + 1), j * (n + 1), i * n + j, j * n + i, np.arange(0, n * n, n + 1)])
    ridge = np.full(n, 2 * l2)
    last = np.inf  # the decrement² of the last full step
    for _ in range(maxiter):
        p, g = _gradient(x, i, j, o, w, l2, n)
        h = p * (1 - p) if w is None else p * (1 - p) * w
        h = np.concatenate([h, h, -h, -h, ridge])  # + on the diagonal, − off it, in pairs' order
        _, step, info = dposv(np.bincount(pairs, h, minlength=n * n).reshape(n, n), g, overwrite_a=True)
        if info != 0:  # cannot happen for a positive-definite H (l2 > 0) unless inputs are broken
            raise RuntimeError(f"Bradley-Terry Newton: Cholesky failed (LAPACK info {info}, n = {n})")
        dec = float(g @ step)
        if dec < 1e-14:
            return x - step
        if dec < min(1e-2, last):  # the quadratic region: the decrement falls at each full step
            x, last = x - step, dec
            continue
        f = _objective(x, i, j, o, w, l2)
        t = 1.0
        while t > 1e-10 and _objective(x - t * step, i, j, o, w, l2) > f - 0.25 * t * dec:
            t *= 0.5
        x, last = x - t * step, np.inf
    raise RuntimeError(f"Bradley-Terry Newton did not converge in {maxiter} steps (n = {n})")


def _lbfgs(n, i, j, o, w, l2, x0) -> np.ndarray:
    """The same objective by L-BFGS-B: memory O(n), for fits too large for a dense Newton step."""

    def fun(x):
        return _objective(x, i, j, o, w, l2), _gradient(x, i, j, o, w, l2, n)[1]

    if minimize is None:
        _load_scipy()
    opts = {"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10}
    return minimize(fun, x0, method="L-BFGS-B", jac=True, options=opts).x


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
