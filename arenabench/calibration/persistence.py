"""Persistent and surface-feature error of a judge, measured on recorded judgments (issue 39).

Is a judge's error *fresh* (it averages away over more comparisons, orders, formats or calls) or
*persistent* (the same wrong view of a response every time), and does it follow a surface feature
a policy can learn (length)? :func:`measure_persistence` computes, from one judge's
:class:`~arenabench.calibration.stats.JudgeData`, every statistic of :data:`PERSISTENCE_STATISTICS`
the data supports, each with a 95% percentile-bootstrap interval over items (re-score statistics
over re-scored responses), in the format of :func:`~arenabench.calibration.stats.measure`.

Conventions (``docs/calibration.md``): a single-order call is *wrong* when it picks the gold-worse
response (a tie counts ½ wrong); the pointwise comparison is wrong when the gold-better response
gets a strictly lower score (equal scores are not wrong); "decisive" = not a tie. A length is the
response's length in characters (only where the texts were recorded). The logistic regressions
are fitted in gold orientation: with each item written as (gold-better, gold-worse), the
intercept is the gold term of a regression of the verdict on gold, slot and length difference
(the two are the same model, since response labels are arbitrary); the length difference is
standardized by its root mean square over the data's items (a fixed scale, not re-estimated per
bootstrap replicate).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

PERSISTENCE_STATISTICS: dict[str, str] = {
    "pair_both_wrong": "pairwise: both orders wrong vs gold (WW; a tie counts 1/2 wrong)",
    "pair_both_wrong_independent": "pairwise: WW if the orders erred independently (err_ab * err_ba)",
    "pair_both_wrong_ratio": "pairwise: WW / its independence prediction",
    "pair_wrong_given_other_wrong": "pairwise: P(other order wrong | one wrong) = 2 WW / (err_ab + err_ba)",
    "cross_both_wrong": "point ranks the pair wrong (gold strictly lower) AND a single-order call is wrong",
    "cross_both_wrong_independent": "the product of the two marginals, over the same calls",
    "point_wrong_given_pair_both_wrong": "P(point ranks the pair wrong | pair wrong in both orders)",
    "point_wrong_given_pair_both_right": "P(point ranks the pair wrong | pair right in both orders)",
    "pair_length_bias_index": "P(picks longer | gold longer) + P(picks longer | gold shorter) - 1",
    "point_length_bias_index": "the same for the score comparison (decisive: unequal scores)",
    "pair_length_coef": "logit of the call on gold, slot and standardized length difference: length coef",
    "point_length_coef": "logit of the score comparison on gold and standardized length diff.: length coef",
    "pair_call_error": "items with repeated calls: mean error of one single-order call",
    "pair_majority_error": "items with repeated calls: error of the majority over all calls (a tie 1/2)",
    "rescore_stable_share": "re-scored responses: 1 - fresh noise var / score var (what re-asking keeps)",
}


def _wrong(v: np.ndarray, g: np.ndarray) -> np.ndarray:
    """1 if a call ``v`` (+1/−1/0) picks against gold ``g`` (±1), ½ for a tie, else 0."""
    return np.where(v == 0, 0.5, (v * g < 0).astype(float))


def length_scale(d) -> float:
    """RMS of the items' length difference (characters) over the items with gold and lengths."""
    if d.len_a is None:
        return math.nan
    dl = d.len_a - d.len_b
    ok = ~np.isnan(dl) & (d.gold != 0)
    return float(np.sqrt(np.mean(dl[ok] ** 2))) if ok.any() and np.any(dl[ok] != 0) else math.nan


def logistic(X: np.ndarray, y: np.ndarray, w: np.ndarray, iters: int = 30) -> np.ndarray:
    """Weighted logistic regression by Newton's method, batched over weight rows: ``X`` (n, p),
    ``y`` (n,) in {0, 1}, ``w`` (B, n) → coefficients (B, p) (NaN where the Hessian is singular)."""
    B, p = w.shape[0], X.shape[1]
    beta = np.zeros((B, p))
    eye = np.eye(p) * 1e-12
    for _ in range(iters):
        mu = expit(beta @ X.T)
        grad = (w * (y - mu)) @ X
        hess = np.einsum("bn,ni,nj->bij", w * mu * (1 - mu), X, X) + eye
        try:
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:
            return np.full((B, p), np.nan)
        beta = beta + step
        if np.nanmax(np.abs(step)) < 1e-11:
            break
    return beta


def _units(d):
    """Single-order calls as flat arrays: item, verdict (a/b terms), +1 where a was shown first, occasion."""
    it = d.occ_item
    v = np.concatenate([d.v_ab, d.v_ba])
    vi = np.concatenate([it, it])
    a_first = np.concatenate([np.ones(len(it)), -np.ones(len(it))])
    occ = np.concatenate([np.arange(len(it)), np.arange(len(it))])
    return v, vi, a_first, occ


def _item_parts(d) -> dict[str, tuple]:
    """name → (function of totals, {component: per-item array}, units): the ratio-type statistics."""
    n = d.n_items
    out: dict[str, tuple] = {}

    def bc(idx, x):
        return np.bincount(idx, weights=x, minlength=n)

    g_occ = d.gold[d.occ_item] if len(d.occ_item) else np.zeros(0)
    both = ~np.isnan(d.v_ab) & ~np.isnan(d.v_ba) & (g_occ != 0)
    w_ab = np.where(both, _wrong(np.nan_to_num(d.v_ab), g_occ), 0.0)
    w_ba = np.where(both, _wrong(np.nan_to_num(d.v_ba), g_occ), 0.0)
    if both.any():
        it = d.occ_item
        c = {"ww": bc(it, w_ab * w_ba), "e1": bc(it, w_ab), "e2": bc(it, w_ba), "n": bc(it, both * 1.0)}
        units = int(both.sum())
        out["pair_both_wrong"] = (lambda t: t["ww"] / t["n"], c, units)
        out["pair_both_wrong_independent"] = (lambda t: t["e1"] * t["e2"] / t["n"] ** 2, c, units)
        out["pair_both_wrong_ratio"] = (lambda t: t["ww"] * t["n"] / (t["e1"] * t["e2"]), c, units)
        out["pair_wrong_given_other_wrong"] = (lambda t: 2 * t["ww"] / (t["e1"] + t["e2"]), c, units)
    # cross-format
    scored = ~np.isnan(d.s_a) & ~np.isnan(d.s_b) & (d.gold != 0)
    pw = ((d.s_a - d.s_b) * d.gold < 0) & scored  # point wrong: gold strictly lower
    v, vi, a_first, occ = _units(d)
    gv = d.gold[vi] if len(vi) else np.zeros(0)
    call = ~np.isnan(v) & (gv != 0) & (scored[vi] if len(vi) else np.zeros(0, dtype=bool))
    if call.any():
        wc = np.where(call, _wrong(np.nan_to_num(v), gv), 0.0)
        pwc = (pw[vi] & call).astype(float)
        c = {"b": bc(vi, pwc * wc), "p": bc(vi, pwc), "w": bc(vi, wc), "n": bc(vi, call * 1.0)}
        units = int(call.sum())
        out["cross_both_wrong"] = (lambda t: t["b"] / t["n"], c, units)
        out["cross_both_wrong_independent"] = (lambda t: t["p"] * t["w"] / t["n"] ** 2, c, units)
    occ_scored = both & (scored[d.occ_item] if len(d.occ_item) else np.zeros(0, dtype=bool))
    pw_occ = (pw[d.occ_item] if len(d.occ_item) else np.zeros(0)).astype(float)
    for name, mask in (
        ("point_wrong_given_pair_both_wrong", occ_scored & (w_ab == 1) & (w_ba == 1)),
        ("point_wrong_given_pair_both_right", occ_scored & (w_ab == 0) & (w_ba == 0)),
    ):
        if mask.any():
            c = {"p": bc(d.occ_item, pw_occ * mask), "n": bc(d.occ_item, mask * 1.0)}
            out[name] = (lambda t: t["p"] / t["n"], c, int(mask.sum()))
    # length-bias index
    if d.len_a is not None:
        sl = np.sign(np.nan_to_num(d.len_a - d.len_b))  # +1: a longer; 0: equal or unknown
        ok = (sl != 0) & (d.gold != 0)
        gl = d.gold * sl > 0  # gold is the longer
        for name, pick, idx, mask in (
            ("pair_length_bias_index", v, vi, ~np.isnan(v) & (v != 0)),
            ("point_length_bias_index", np.sign(np.nan_to_num(d.s_a - d.s_b)), np.arange(n), None),
        ):
            if len(idx) == 0:
                continue
            if mask is None:
                mask = ~np.isnan(d.s_a) & ~np.isnan(d.s_b) & (d.s_a != d.s_b)
            m = mask & ok[idx]
            longer = (np.nan_to_num(pick) * sl[idx] > 0) & m
            c = {
                "a1": bc(idx, (longer & gl[idx]) * 1.0),
                "n1": bc(idx, (m & gl[idx]) * 1.0),
                "a2": bc(idx, (longer & ~gl[idx]) * 1.0),
                "n2": bc(idx, (m & ~gl[idx]) * 1.0),
            }
            if c["n1"].sum() > 0 and c["n2"].sum() > 0:
                out[name] = (lambda t: t["a1"] / t["n1"] + t["a2"] / t["n2"] - 1, c, int(m.sum()))
    # majority over repeated calls vs one call
    if len(d.occ_item):
        n_occ = np.bincount(d.occ_item, minlength=n)
        rep = (n_occ >= 2) & (d.gold != 0)
        have = ~np.isnan(v) & rep[vi]
        if have.any():
            calls = bc(vi, have * 1.0)
            call_err = bc(vi, np.where(have, _wrong(np.nan_to_num(v), gv), 0.0))
            total = np.sign(bc(vi, np.where(have, np.nan_to_num(v), 0.0)))
            has = calls > 0
            maj = np.where(has, _wrong(total, d.gold), 0.0)
            per_call = np.where(has, call_err / np.where(has, calls, 1), 0.0)
            c = {"m": maj, "c": per_call, "n": has * 1.0}
            units = int(has.sum())
            out["pair_call_error"] = (lambda t: t["c"] / t["n"], c, units)
            out["pair_majority_error"] = (lambda t: t["m"] / t["n"], c, units)
    return out


def _regressions(d) -> dict[str, tuple]:
    """name → (X, y, unit item index, column of the length coefficient)."""
    out = {}
    if d.len_a is None:
        return out
    scale = length_scale(d)
    if not math.isfinite(scale):
        return out
    dl = (d.len_a - d.len_b) / scale
    known = ~np.isnan(dl) & (d.gold != 0)
    v, vi, a_first, _ = _units(d)
    if len(vi):
        m = ~np.isnan(v) & (v != 0) & known[vi]
        g = d.gold[vi][m]
        X = np.column_stack([np.ones(m.sum()), g * a_first[m], g * dl[vi][m]])
        out["pair_length_coef"] = (X, (v[m] * g > 0).astype(float), vi[m], 2)
    sd = np.nan_to_num(d.s_a - d.s_b)
    m = ~np.isnan(d.s_a) & ~np.isnan(d.s_b) & (sd != 0) & known
    if m.any():
        g = d.gold[m]
        X = np.column_stack([np.ones(m.sum()), g * dl[m]])
        out["point_length_coef"] = (X, (sd[m] * g > 0).astype(float), np.flatnonzero(m), 1)
    return out


def measure_persistence(d, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict[str, dict]:
    """The statistics of :data:`PERSISTENCE_STATISTICS` that ``d`` supports: ``{name: {value, lo,
    hi, n}}`` (``n``: the units behind it). Bootstrap over items (``n_boot`` replicates; its own
    generator ``default_rng([seed, 39])``, so the other statistics' intervals are unchanged)."""
    rng = np.random.default_rng([seed, 39])
    q = ((1 - level) / 2, (1 + level) / 2)
    res: dict[str, dict] = {}

    def put(name, value, boot, n):
        if n == 0 or not math.isfinite(value):
            return
        lo = hi = math.nan
        if boot is not None:
            b = boot[np.isfinite(boot)]
            if len(b):
                lo, hi = (float(x) for x in np.quantile(b, q))
        res[name] = {"value": float(value), "lo": lo, "hi": hi, "n": int(n)}

    n = d.n_items
    w = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float) if n and n_boot else None
    found = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, (fn, comps, units) in _item_parts(d).items():
            value = fn({k: c.sum() for k, c in comps.items()})
            boot = None if w is None else fn({k: w @ c for k, c in comps.items()})
            found[name] = (value, boot, units)
        for name, (X, y, idx, col) in _regressions(d).items():
            if len(y) < X.shape[1] + 1:
                continue
            value = logistic(X, y, np.ones((1, len(y))))[0, col]
            boot = None if w is None else logistic(X, y, w[:, idx])[:, col]
            found[name] = (value, boot, len(y))
    if len(d.r1):
        r = rng.multinomial(len(d.r1), np.full(len(d.r1), 1.0 / len(d.r1)), size=n_boot) if n_boot else None
        c = {
            "s": d.r1 + d.r2,
            "s2": d.r1**2 + d.r2**2,
            "f": (d.r1 - d.r2) ** 2 / 2,
            "n": np.ones(len(d.r1)),
        }

        def stable(t):
            var = t["s2"] / (2 * t["n"]) - (t["s"] / (2 * t["n"])) ** 2
            return 1 - (t["f"] / t["n"]) / var

        with np.errstate(invalid="ignore", divide="ignore"):
            value = stable({k: x.sum() for k, x in c.items()})
            boot = None if r is None else stable({k: r.astype(float) @ x for k, x in c.items()})
        found["rescore_stable_share"] = (value, boot, len(d.r1))
    for name in PERSISTENCE_STATISTICS:
        if name in found:
            put(name, *found[name])
    return res
