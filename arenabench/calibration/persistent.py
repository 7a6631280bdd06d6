"""Fit the ordinal judge with persistent and surface error: ``arenabench calibrate --model persistent``.

The recorded-pair model of :mod:`.fit` (``model gap``) puts everything the judge gets
persistently wrong into the perceived gap ``D``; a simulated judge built from it sees the
simulator's true gaps plus fresh per-format noise, so it is never fooled the same way twice
(issue 39). This model separates the two:

* pair midpoint ``m ~ N(0, 1)`` (the latent unit, as before); the **true** gold-oriented gap
  ``T = |gap_mu + gap_sigma · g|``, ``g ~ N(0, 1)`` (a folded normal: the gold label is taken as
  right, ``T ≥ 0``);
* each response's **view** ``v = m ± T/2 + persistent_sd · ε + surface_beta · s``: ``ε ~ N(0, 1)``
  once per response (shared by both orders and both formats), ``s`` the response's
  standardized surface feature -- for LLMBar the length, ``s = (log(characters) − mean) / sd``
  over the recorded responses (items' ``a`` and ``b``); each simulated pair draws the
  (gold-better, gold-worse) lengths of a recorded item (with replacement, fixed draws);
* then the ordinal judge's formats on the views, exactly as :func:`.fit.simulate`.

The same simulated method of moments as :func:`.fit.fit`, with ``persistent_sd`` and
``surface_beta`` free and the statistics that identify them added to the targets
(:data:`PERSISTENT_TARGETS`: both-order error beyond what the per-order accuracies imply, the
pointwise error given the pairwise error, the length coefficients). Without gold (MT-bench) the
true gap's sign is unknown, so ``T`` and the persistent error enter only through their sum: the
model is not identified there and :func:`fit_persistent` refuses.

What the fitted preset then carries into training: ``persistent_sd`` and ``surface_beta`` on the
judge's latent scale, and ``provenance.surface`` (the feature's definition, mean and SD) so that
a task can put its responses' feature on the same scale (``traj.meta["surface"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm

from arenabench import numerics as nx
from arenabench.calibration.fit import (
    NO_GOLD_TARGETS,
    POINT_ONLY,
    SE_FLOOR,
    SIM_QUALITY_SD,
    SIM_SEED,
    TARGETS,
    Fit,
    _Draws,
    _fit_row,
    _implied,
    _values,
    judgments_of_views,
)
from arenabench.calibration.stats import JudgeData, measure, point_values
from arenabench.judges.ordinal import OrdinalJudge, response_level_sd
from arenabench.sim import QUALITY_MEAN

PERSISTENT_TARGETS = (
    "pair_both_wrong",
    "point_wrong_given_pair_both_wrong",
    "point_wrong_given_pair_both_right",
    "pair_length_coef",
    "point_length_coef",
)
N_SIM = 20000
SURFACE_FEATURE = "length"
SURFACE_DEFINITION = "(log(characters) - mean) / sd over the recorded responses (each item's a and b)"
# the statistics the "what each explains" table shows
EXPLAIN = (
    "pair_accuracy",
    "point_accuracy",
    "pair_consistency",
    "pair_point_agreement",
    "pair_both_wrong",
    "pair_both_wrong_ratio",
    "pair_wrong_given_other_wrong",
    "cross_both_wrong",
    "point_wrong_given_pair_both_wrong",
    "pair_length_bias_index",
    "pair_length_coef",
    "point_length_coef",
)


def surface_scale(data: JudgeData) -> dict | None:
    """Mean and SD of log(characters) over the items' responses (None without recorded texts)."""
    if data.len_a is None:
        return None
    lens = np.concatenate([data.len_a, data.len_b])
    lens = lens[~np.isnan(lens)]
    if len(lens) < 2:
        return None
    logs = nx.log(np.maximum(lens, 1.0))
    return {
        "feature": SURFACE_FEATURE,
        "definition": SURFACE_DEFINITION,
        "mean": round(float(logs.mean()), 6),
        "sd": round(float(logs.std()), 6),
        "n_responses": int(len(lens)),
    }


def gold_length_pool(data: JudgeData) -> np.ndarray:
    """(k, 2) lengths (gold-better, gold-worse) of the items with gold and both lengths."""
    if data.len_a is None:
        return np.zeros((0, 2))
    ok = (data.gold != 0) & ~np.isnan(data.len_a) & ~np.isnan(data.len_b)
    a, b, g = data.len_a[ok], data.len_b[ok], data.gold[ok]
    return np.column_stack([np.where(g > 0, a, b), np.where(g > 0, b, a)])


class _PDraws(_Draws):
    """:class:`.fit._Draws` plus each response's persistent draw and a recorded item's lengths."""

    def __init__(self, n: int, seed: int, pool: np.ndarray):
        super().__init__(n, seed)
        rng = np.random.default_rng([seed, 39])
        self.eps = rng.standard_normal((2, n))
        self.lengths = pool[rng.integers(0, len(pool), n)] if len(pool) else None


def folded_moments(mu: float, sigma: float) -> tuple[float, float]:
    """Mean and SD of ``|N(mu, sigma²)|``."""
    if sigma <= 0:
        return abs(mu), 0.0
    mean = sigma * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * sigma**2)) + mu * (
        1 - 2 * norm.cdf(-mu / sigma)
    )
    mean = float(mean)
    return mean, math.sqrt(max(mu**2 + sigma**2 - mean**2, 0.0))


def simulate_persistent(
    judge: OrdinalJudge,
    gap_mu: float,
    gap_sigma: float,
    like: JudgeData,
    draws: _PDraws,
    surface: dict | None,
    hist: np.ndarray | None = None,
    level_mean: float = 0.0,
    level_sd: float = 1.0,
) -> JudgeData:
    """Simulated judgments of ``draws.n`` recorded-like pairs under the persistent model (module
    docstring), with ``like``'s parts; ``hist`` given: the cutpoints are set to match it first."""
    t = np.abs(gap_mu + gap_sigma * draws.g)
    m = level_mean + level_sd * draws.m
    va = m + t / 2 + judge.persistent_sd * draws.eps[0]
    vb = m - t / 2 + judge.persistent_sd * draws.eps[1]
    len_a = len_b = None
    if draws.lengths is not None and surface is not None:
        len_a, len_b = draws.lengths[:, 0].copy(), draws.lengths[:, 1].copy()
        if judge.surface_beta != 0:
            s = (nx.log(np.maximum(draws.lengths, 1.0)) - surface["mean"]) / surface["sd"]
            va = va + judge.surface_beta * s[:, 0]
            vb = vb + judge.surface_beta * s[:, 1]
    label = f"{like.judge} (fitted, persistent)"
    return judgments_of_views(judge, like, draws, va, vb, hist, label, len_a=len_a, len_b=len_b)


@dataclass
class PersistentFit(Fit):
    """A :class:`.fit.Fit` of the persistent model: the true-gap folded normal's ``gap_mu`` /
    ``gap_sigma`` (``gap_mean`` / ``gap_sd`` are its mean and SD), the surface scale, and what
    each error component explains (:func:`explain`)."""

    gap_mu: float = 0.0
    gap_sigma: float = 1.0
    surface: dict | None = None
    explain: list[dict] = field(default_factory=list)
    variance: dict = field(default_factory=dict)


def _judge(p: dict, grid) -> OrdinalJudge:
    return OrdinalJudge(
        grid=grid,
        point_noise=p["point_noise"],
        pair_noise=p["pair_noise"],
        position_bias=p["position_bias"],
        tie_margin=p["tie_margin"],
        rejudge_share=p["rejudge_share"],
        persistent_sd=p["persistent_sd"],
        surface_beta=p["surface_beta"],
        tokenizer=None,
    )


def fit_persistent(
    data: JudgeData,
    n_sim: int = N_SIM,
    seed: int = SIM_SEED,
    measured: dict | None = None,
    maxfev: int = 3000,
) -> PersistentFit:
    """SMM fit of the persistent model (module docstring) to ``data`` (which needs gold)."""
    measured = measured if measured is not None else measure(data, persistence=True)
    if not np.any(data.gold != 0):
        raise ValueError(
            "--model persistent needs gold labels: without them the true gap and the persistent error "
            "enter only through their sum (not identified); use --model gap"
        )
    surface = surface_scale(data)
    pool = gold_length_pool(data)
    targets = [t for t in TARGETS + PERSISTENT_TARGETS if t in measured]
    has_pairs = len(data.occ_item) > 0
    has_point = data.grid is not None and len(data.scores) > 0
    forced = has_pairs and measured.get("pair_tie_rate", {}).get("value", 0.0) == 0.0
    hist = point_values(data)[1] if has_point else None
    if "pair_tie_rate" in targets and forced:
        targets.remove("pair_tie_rate")
    free: list[tuple[str, float, callable]] = [
        ("gap_mu", 1.0, lambda x: x),
        ("gap_sigma", math.log(1.0), math.exp),
        ("persistent_sd", math.log(0.5), math.exp),
    ]
    if surface is not None and len(pool):
        free.append(("surface_beta", 0.0, lambda x: x))
    if has_point:
        free.append(("point_noise", math.log(0.5), math.exp))
    if has_pairs:
        free += [("pair_noise", math.log(0.5), math.exp), ("position_bias", 0.0, lambda x: x)]
        if not forced:
            free.append(("tie_margin", math.log(0.3), math.exp))
    if "rescore_agreement" in targets:
        free.append(("rejudge_share", 0.0, lambda x: 1 / (1 + math.exp(-x))))
    obs = np.array([measured[t]["value"] for t in targets])
    se = np.array([max((measured[t]["hi"] - measured[t]["lo"]) / 3.92, SE_FLOOR) for t in targets])
    draws = _PDraws(n_sim, seed, pool)
    grid = data.grid or (0, 1)

    def unpack(x):
        p = {
            "gap_mu": 1.0,
            "gap_sigma": 1.0,
            "persistent_sd": 0.0,
            "surface_beta": 0.0,
            "point_noise": 0.0,
            "pair_noise": 0.0,
            "position_bias": 0.0,
            "tie_margin": 0.0,
            "rejudge_share": 0.0,
        }
        for (name, _, f), xi in zip(free, x, strict=True):
            p[name] = float(f(xi))
        return p

    def run(p):
        judge = _judge(p, grid)
        sim = simulate_persistent(judge, p["gap_mu"], p["gap_sigma"], data, draws, surface, hist)
        return judge, sim

    def loss(x):
        _, sim = run(unpack(x))
        got = _values(measure(sim, n_boot=0, persistence=True))
        pred = np.array([got.get(t, np.nan) for t in targets])
        return float(np.nansum(((pred - obs) / se) ** 2)) + (1e6 if np.any(np.isnan(pred)) else 0.0)

    def search(x0, step):
        simplex = np.vstack([x0] + [x0 + step * e for e in np.eye(len(x0))])
        return minimize(
            loss,
            x0,
            method="Nelder-Mead",
            options={
                "maxfev": maxfev,
                "xatol": 1e-3,
                "fatol": 1e-3,
                "adaptive": True,
                "initial_simplex": simplex,
            },
        )

    # Nelder-Mead in ~10 dimensions on a piecewise-constant objective can stop on a collapsed
    # simplex: restart once from its best point with a fresh, smaller simplex; keep the better
    best = search(np.array([s for _, s, _ in free]), 0.5)
    again = search(best.x, 0.25)
    evaluations = int(best.nfev + again.nfev)
    if again.fun < best.fun:
        best = again
    p = unpack(best.x)
    judge, sim = run(p)
    fitted = _values(measure(sim, n_boot=0, persistence=True))
    gap_mean, gap_sd = folded_moments(p["gap_mu"], p["gap_sigma"])
    params = {
        "grid": list(grid),
        "cutpoints": [round(float(c), 6) for c in judge.cutpoints],
        "point_noise": round(p["point_noise"], 6),
        "pair_noise": round(p["pair_noise"], 6),
        "position_bias": round(p["position_bias"], 6),
        "position_gap_scale": None,
        "tie_margin": round(p["tie_margin"], 6),
        "rejudge_share": round(p["rejudge_share"], 6),
        "persistent_sd": round(p["persistent_sd"], 6),
        "surface_beta": round(p["surface_beta"], 6),
        "surface_feature": SURFACE_FEATURE,
        "quality_loc": QUALITY_MEAN,
        "quality_scale": round(SIM_QUALITY_SD / response_level_sd(gap_mean, gap_sd), 6),
    }
    out = PersistentFit(
        params,
        gap_mean,
        gap_sd,
        measured,
        fitted,
        targets,
        float(best.fun),
        evaluations,
        n_sim,
        gap_mu=p["gap_mu"],
        gap_sigma=p["gap_sigma"],
        surface=surface,
    )
    out.rows = [
        _fit_row(
            name,
            s,
            fitted.get(name, math.nan),
            "target" if name in targets else ("histogram" if _implied(name) else "predicted"),
        )
        for name, s in measured.items()
    ]
    out.explain = explain(out, data, draws, hist)
    out.variance = variance_shares(out, pool)
    return out


def judge_of(f: PersistentFit, **overrides) -> OrdinalJudge:
    p = {**f.params, **overrides}
    return OrdinalJudge(**{k: v for k, v in p.items() if k != "surface_feature"}, tokenizer=None)


def explain(f: PersistentFit, data: JudgeData, draws: _PDraws, hist=None) -> list[dict]:
    """What each error component explains: the fitted judge's statistics (same draws), then with
    ``persistent_sd = 0``, with ``surface_beta = 0``, and with both 0 (the rest kept, the
    cutpoints refitted to the histogram), beside the measured values."""
    variants = {
        "fitted": {},
        "no_persistent": {"persistent_sd": 0.0},
        "no_surface": {"surface_beta": 0.0},
        "neither": {"persistent_sd": 0.0, "surface_beta": 0.0},
    }
    got = {}
    for name, over in variants.items():
        j = judge_of(f, **over)
        sim = simulate_persistent(j, f.gap_mu, f.gap_sigma, data, draws, f.surface, hist)
        got[name] = _values(measure(sim, n_boot=0, persistence=True))
    rows = []
    for stat in EXPLAIN:
        if stat not in f.measured:
            continue
        s = f.measured[stat]
        rows.append(
            {
                "statistic": stat,
                "measured": s["value"],
                "lo": s["lo"],
                "hi": s["hi"],
                **{k: v.get(stat, math.nan) for k, v in got.items()},
            }
        )
    return rows


def variance_shares(f: PersistentFit, pool: np.ndarray) -> dict:
    """A single-order pairwise call's error variance on the latent scale, by component: the
    persistent part ``2 persistent_sd²``, the surface part ``β² var(s_a − s_b)`` over the
    recorded pairs, the per-call part ``pair_noise²``; and the *persistent share*
    ``persistent_sd² / (persistent_sd² + pair_noise²)`` (``docs/calibration.md``)."""
    ps, pn, beta = f.params["persistent_sd"], f.params["pair_noise"], f.params["surface_beta"]
    var_ds = 0.0
    if f.surface is not None and len(pool):
        s = (nx.log(np.maximum(pool, 1.0)) - f.surface["mean"]) / f.surface["sd"]
        var_ds = float(np.var(s[:, 0] - s[:, 1]))
    parts = {"persistent": 2 * ps**2, "surface": beta**2 * var_ds, "per_call": pn**2}
    total = sum(parts.values())
    return {
        "persistent_share": round(ps**2 / (ps**2 + pn**2), 4) if ps or pn else math.nan,
        "var_surface_difference": round(var_ds, 4),
        **{f"{k}_var_share": round(v / total, 4) if total else math.nan for k, v in parts.items()},
    }


def fit_pair_set_persistent(
    f: PersistentFit, data: JudgeData, n_sim: int = N_SIM, seed: int = SIM_SEED + 2, maxfev: int = 800
) -> tuple[dict, dict[str, float], dict]:
    """Out of sample, as :func:`.fit.fit_pair_set`: the judge kept (noise, bias, ties, persistent
    error, β, the surface scale of the fit), the held-out set's level mean/SD and true-gap
    ``gap_mu``/``gap_sigma`` refitted to its *pointwise* statistics, its own recorded lengths
    resampled. Returns (pair-set parameters, predicted statistics, measured statistics)."""
    measured = measure(data, persistence=True)
    names = [k for k in measured if k.startswith("hist_")] + [t for t in POINT_ONLY if t in measured]
    obs = np.array([measured[k]["value"] for k in names])
    se = np.array([max((measured[k]["hi"] - measured[k]["lo"]) / 3.92, SE_FLOOR) for k in names])
    draws = _PDraws(n_sim, seed, gold_length_pool(data))

    def unpack(x):
        return {
            "level_mean": float(x[0]),
            "level_sd": float(math.exp(x[1])),
            "gap_mu": float(x[2]),
            "gap_sigma": float(math.exp(x[3])),
        }

    def stats_of(p):
        sim = simulate_persistent(
            judge_of(f),
            p["gap_mu"],
            p["gap_sigma"],
            data,
            draws,
            f.surface,
            level_mean=p["level_mean"],
            level_sd=p["level_sd"],
        )
        return _values(measure(sim, n_boot=0, persistence=True))

    def loss(x):
        got = stats_of(unpack(x))
        pred = np.array([got.get(k, 0.0) for k in names])
        return float(np.sum(((pred - obs) / se) ** 2))

    x0 = np.array([0.0, 0.0, f.gap_mu, math.log(f.gap_sigma)])
    simplex = np.vstack([x0] + [x0 + 0.5 * e for e in np.eye(4)])
    best = minimize(
        loss,
        x0,
        method="Nelder-Mead",
        options={"maxfev": maxfev, "xatol": 1e-3, "fatol": 1e-3, "initial_simplex": simplex},
    )
    p = unpack(best.x)
    return p, stats_of(p), measured


def persistent_preset_yaml(
    f: PersistentFit, name: str, description: str, sources: list[str], command: str, seed: int = 0
) -> str:
    """The preset YAML of a persistent fit: every value through ``yaml.safe_dump`` (the header's
    comment lines carry no line break from the description or command)."""
    import yaml

    def clean(x):
        if isinstance(x, float):
            return None if math.isnan(x) else round(x, 4)
        return x

    prov = {
        "judge": description,
        "sources": sources,
        "command": command,
        "method": "simulated method of moments, persistent model (arenabench/calibration/persistent.py)",
        "recorded_gap": {
            "mean": round(f.gap_mean, 6),
            "sd": round(f.gap_sd, 6),
            "mu": round(f.gap_mu, 6),
            "sigma": round(f.gap_sigma, 6),
            "note": "TRUE gold-oriented gap |N(mu, sigma^2)| (mean, sd: its moments); level ~ N(0, 1); "
            "the judge's view adds persistent_sd * eps + surface_beta * s per response",
        },
        "surface": f.surface,
        "variance": f.variance,
        "objective": round(f.objective, 4),
        "targets": list(f.targets),
        "fit": {
            r["statistic"]: {k: clean(r[k]) for k in ("role", "measured", "lo", "hi", "fitted", "inside")}
            for r in f.rows
        },
        "explain": {
            r["statistic"]: {k: clean(v) for k, v in r.items() if k not in ("statistic", "lo", "hi")}
            for r in f.explain
        },
    }
    body = {"kind": "ordinal", **_plain(f.params), "seed": seed, "tokenizer": "tiny-bpe"}
    body["rubric"] = "open_writing"
    body["provenance"] = _plain(prov)

    def one_line(s: str) -> str:
        return " ".join(str(s).split())

    head = (
        f"# fitted judge {one_line(name)} with persistent and surface error (arenabench/judges/ordinal.py)\n"
        f"# derived by: {one_line(command)}\n"
    )
    return head + yaml.safe_dump(body, sort_keys=False, width=110, default_flow_style=None)


def _plain(x):
    """Plain Python numbers all the way down (``yaml.safe_dump`` refuses numpy scalars)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    return x


def holdout_rows_persistent(measured: dict, predicted: dict[str, float]) -> list[dict]:
    rows = []
    for name, s in measured.items():
        role = "pair-set fit" if _implied(name) or name in POINT_ONLY else "predicted"
        rows.append(_fit_row(name, s, predicted.get(name, math.nan), role))
    return rows


__all__ = [
    "NO_GOLD_TARGETS",
    "PERSISTENT_TARGETS",
    "PersistentFit",
    "fit_persistent",
    "fit_pair_set_persistent",
    "persistent_preset_yaml",
    "simulate_persistent",
    "surface_scale",
]
