"""Fit an :class:`~arenabench.judges.ordinal.OrdinalJudge` to recorded judgments: ``arenabench calibrate``.

**Method: simulated method of moments** (SMM). The recorded pairs are modelled on the judge's
latent scale: pair midpoint ``m ~ N(0, 1)`` (this fixes the unit), gold-oriented gap
``D ~ N(gap_mean, gap_sd²)`` (``a`` is the gold-better response; without gold ``gap_mean = 0``),
``z_a = m + D/2``, ``z_b = m − D/2``, judged by the ordinal judge's pointwise and pairwise
model. ``D`` is the gap *as this judge perceives it*: a judge that systematically prefers the
worse response (LLMBar's adversarial pairs) has ``gap_mean < 0``.

* The cutpoints match the score histogram exactly: for any other parameters they are the
  quantiles of the simulated impressions at the measured cumulative shares.
* The other parameters minimise ``Σ ((simulated − measured) / se)²`` over the statistics in
  :data:`TARGETS` that the data has (``se`` = the bootstrap CI's width / 3.92, at least 0.01),
  by Nelder-Mead on common random numbers (fixed draws: the objective is deterministic).

Why moments, not likelihood: the fit is judged by the very statistics users read (the
goodness-of-fit table puts each beside its CI), the same code computes both sides, and files
that only carry part of the picture (no gold, repeats on a few responses, pairs without scores)
enter through whichever statistics they support. A full likelihood of each item's joint
(score, score, verdict, verdict) would be more efficient but needs the item-level joint model to
be right where it matters least (rare grid levels), and it would weight statistics no one reads.

Not fitted, predicted: ``pair_point_agreement`` (when gold exists: both formats read the same
perceived gap with independent noise — the structural assumption this number checks),
``pair_breaks_point_tie``, ``pair_flip_rate``, ``pair_accuracy_both``, ``rescore_noise_sd``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from arenabench.calibration.stats import JudgeData, measure, point_values
from arenabench.judges.ordinal import OrdinalJudge, response_level_sd
from arenabench.sim import GROUP_SPREAD, PROMPT_SPREAD, QUALITY_MEAN

TARGETS = (
    "point_tie_rate",
    "point_accuracy",
    "pair_tie_rate",
    "pair_first_slot",
    "pair_consistency",
    "pair_accuracy",
    "rescore_agreement",
)
# Fitted only when the data has no gold label (then nothing else ties the pointwise and
# pairwise noise levels together); otherwise predicted out of sample.
NO_GOLD_TARGETS = ("pair_point_agreement",)
N_SIM = 20000
SIM_SEED = 12345
SE_FLOOR = 0.01
# The default simulated groups' quality distribution (arenabench.sim): what the fitted judge
# maps onto the recorded responses' latent level distribution.
SIM_QUALITY_SD = math.hypot(PROMPT_SPREAD, GROUP_SPREAD)


@dataclass
class Fit:
    """The fitted parameters, the recorded gap distribution and the goodness-of-fit rows."""

    params: dict
    gap_mean: float
    gap_sd: float
    measured: dict
    fitted: dict
    targets: list[str]
    objective: float
    evaluations: int
    n_sim: int
    rows: list[dict] = field(default_factory=list)

    def judge(self, **overrides) -> OrdinalJudge:
        return OrdinalJudge(**{**self.params, **overrides})


class _Draws:
    """Common random numbers for one simulated data set of ``n`` items."""

    def __init__(self, n: int, seed: int):
        rng = np.random.default_rng(seed)
        self.n = n
        self.m, self.g = rng.standard_normal(n), rng.standard_normal(n)
        self.fix = rng.standard_normal((2, n))  # fixed pointwise noise of a, b
        self.fresh = rng.standard_normal((3, n))  # fresh draws: a's first score, b's, a's re-score
        self.pair = rng.standard_normal((2, n))  # per-order pair noise: ab, ba


def simulate(
    judge: OrdinalJudge,
    gap_mean: float,
    gap_sd: float,
    like: JudgeData,
    draws: _Draws,
    hist: np.ndarray | None = None,
    level_mean: float = 0.0,
    level_sd: float = 1.0,
) -> JudgeData:
    """Simulated judgments of ``draws.n`` recorded-like pairs, with ``like``'s parts (gold,
    scores, pairs, re-scores). ``hist`` given: the judge's cutpoints are set to match it first.
    Pair midpoints ~ N(level_mean, level_sd²): (0, 1) fixes the unit of a fit; another pair
    set judged by an already fitted judge has its own (:func:`fit_pair_set`)."""
    d = gap_mean + gap_sd * draws.g
    m = level_mean + level_sd * draws.m
    za, zb = m + d / 2, m - d / 2
    has_gold = bool(np.any(like.gold != 0))
    return judgments_of_views(judge, like, draws, za, zb, hist, f"{like.judge} (fitted)", has_gold)


def judgments_of_views(
    judge: OrdinalJudge,
    like: JudgeData,
    draws: _Draws,
    va: np.ndarray,
    vb: np.ndarray,
    hist: np.ndarray | None,
    label: str,
    has_gold: bool = True,
    **extra,
) -> JudgeData:
    """Simulated recorded-like judgments of pairs whose two responses the judge views at ``va``
    and ``vb`` (latent units): scores, re-scores and both-order verdicts with ``like``'s parts and
    ``draws``' noise (``hist`` given: the cutpoints are set to match it first). Shared by the gap
    model (:func:`simulate`) and the persistent one (``persistent.simulate``); ``extra`` fields
    (e.g. response lengths) are passed to :class:`JudgeData`."""
    n = draws.n
    r = judge.rejudge_share
    fixed = math.sqrt(1 - r) * draws.fix
    ua = va + judge.point_noise * (fixed[0] + math.sqrt(r) * draws.fresh[0])
    ub = vb + judge.point_noise * (fixed[1] + math.sqrt(r) * draws.fresh[1])
    has_point = like.grid is not None and len(like.scores) > 0
    if has_point and hist is not None:
        cum = np.cumsum(hist)[:-1]
        judge.cutpoints = np.quantile(np.concatenate([ua, ub]), np.clip(cum, 0.0, 1.0))
    nan = np.full(n, np.nan)
    if has_point:
        s_a, s_b = judge.level(ua).astype(float), judge.level(ub).astype(float)
        scores = np.concatenate([s_a, s_b])
    else:
        s_a, s_b, scores = nan, nan, np.zeros(0)
    if len(like.r1):
        r1 = s_a
        r2 = judge.level(va + judge.point_noise * (fixed[0] + math.sqrt(r) * draws.fresh[2])).astype(float)
    else:
        r1 = r2 = np.zeros(0)
    if len(like.occ_item):
        gap = va - vb
        v_ab = judge.verdict(gap + judge.bias(gap) + judge.pair_noise * draws.pair[0])
        v_ba = -judge.verdict(-gap + judge.bias(-gap) + judge.pair_noise * draws.pair[1])
        occ = np.arange(n)
    else:
        v_ab = v_ba = np.zeros(0)
        occ = np.zeros(0, dtype=int)
    return JudgeData(
        judge=label,
        grid=like.grid,
        gold=np.ones(n) if has_gold else np.zeros(n),
        s_a=s_a,
        s_b=s_b,
        occ_item=occ,
        v_ab=v_ab,
        v_ba=v_ba,
        scores=scores,
        r1=r1,
        r2=r2,
        **extra,
    )


def _values(stats: dict) -> dict[str, float]:
    return {k: v["value"] for k, v in stats.items()}


def fit(
    data: JudgeData,
    n_sim: int = N_SIM,
    seed: int = SIM_SEED,
    measured: dict | None = None,
    maxfev: int = 1500,
) -> Fit:
    """SMM fit of ``data`` (module docstring); ``measured``: its :func:`measure` if already done."""
    measured = measured if measured is not None else measure(data)
    has_gold = bool(np.any(data.gold != 0))
    targets = [t for t in TARGETS if t in measured]
    if not has_gold:
        targets += [t for t in NO_GOLD_TARGETS if t in measured]
    has_pairs = len(data.occ_item) > 0
    has_point = data.grid is not None and len(data.scores) > 0
    forced = has_pairs and measured.get("pair_tie_rate", {}).get("value", 0.0) == 0.0
    hist = point_values(data)[1] if has_point else None
    if "pair_tie_rate" in targets and forced:
        targets.remove("pair_tie_rate")  # no tie in the data: forced choice, tie_margin = 0
    # free parameters: name, start, transform to the parameter's domain
    free: list[tuple[str, float, callable]] = []
    if has_gold:
        free.append(("gap_mean", 1.0, lambda x: x))
    free.append(("gap_sd", math.log(1.0), math.exp))
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
    draws = _Draws(n_sim, seed)
    grid = data.grid or (0, 1)

    def unpack(x):
        p = {
            "gap_mean": 0.0,
            "gap_sd": 1.0,
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
        judge = OrdinalJudge(
            grid=grid,
            point_noise=p["point_noise"],
            pair_noise=p["pair_noise"],
            position_bias=p["position_bias"],
            tie_margin=p["tie_margin"],
            rejudge_share=p["rejudge_share"],
            tokenizer=None,  # the fit simulates latents, never a request: nothing to count
        )
        sim = simulate(judge, p["gap_mean"], p["gap_sd"], data, draws, hist)
        return judge, sim

    def loss(x):
        p = unpack(x)
        _, sim = run(p)
        got = _values(measure(sim, n_boot=0))
        pred = np.array([got.get(t, np.nan) for t in targets])
        return float(np.nansum(((pred - obs) / se) ** 2)) + (1e6 if np.any(np.isnan(pred)) else 0.0)

    x0 = np.array([s for _, s, _ in free])
    # scipy's default first simplex moves a zero start by 0.00025: far below what changes a
    # verdict on the fixed draws. Steps of 0.5 in every (log/logit) coordinate instead.
    simplex = np.vstack([x0] + [x0 + 0.5 * e for e in np.eye(len(x0))])
    best = minimize(
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
    p = unpack(best.x)
    judge, sim = run(p)
    fitted = _values(measure(sim, n_boot=0))
    sd_z = response_level_sd(p["gap_mean"], p["gap_sd"])
    params = {
        "grid": list(grid),
        "cutpoints": [round(float(c), 6) for c in judge.cutpoints],
        "point_noise": round(p["point_noise"], 6),
        "pair_noise": round(p["pair_noise"], 6),
        "position_bias": round(p["position_bias"], 6),
        "position_gap_scale": None,
        "tie_margin": round(p["tie_margin"], 6),
        "rejudge_share": round(p["rejudge_share"], 6),
        "quality_loc": QUALITY_MEAN,
        "quality_scale": round(SIM_QUALITY_SD / sd_z, 6),
    }
    out = Fit(
        params, p["gap_mean"], p["gap_sd"], measured, fitted, targets, float(best.fun), int(best.nfev), n_sim
    )
    out.rows = fit_rows(out)
    return out


def _implied(name: str) -> bool:
    """Statistics the score histogram fixes (matched by the cutpoints)."""
    return name.startswith("hist_") or name in ("point_top_share", "point_mean")


def _fit_row(name: str, s: dict, got: float, role: str) -> dict:
    inside = None if math.isnan(s["lo"]) else bool(s["lo"] - 1e-9 <= got <= s["hi"] + 1e-9)
    return {
        "statistic": name,
        "role": role,
        "measured": s["value"],
        "lo": s["lo"],
        "hi": s["hi"],
        "fitted": got,
        "inside": inside,
    }


def fit_rows(f: Fit) -> list[dict]:
    """Goodness of fit: every measured statistic, its CI, the fitted simulator's value, whether
    it was a fit target, and whether the fitted value lies inside the CI."""
    rows = []
    for name, s in f.measured.items():
        role = "target" if name in f.targets else ("histogram" if _implied(name) else "predicted")
        rows.append(_fit_row(name, s, f.fitted.get(name, math.nan), role))
    return rows


def format_fit(rows: list[dict], fmt: str = "markdown") -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2)
    import pandas as pd

    df = pd.DataFrame(rows)
    if fmt == "csv":
        return df.to_csv(index=False)
    from arenabench.reporting import fixed3, md_table

    df = df.assign(
        ci95=[f"[{r['lo']:.3f}, {r['hi']:.3f}]" if not math.isnan(r["lo"]) else "" for r in rows],
        inside=["" if r["inside"] is None else ("yes" if r["inside"] else "NO") for r in rows],
    )
    return md_table(df[["statistic", "role", "measured", "ci95", "fitted", "inside"]], cell=fixed3)


def predict(
    f: Fit,
    data: JudgeData,
    n_sim: int = N_SIM,
    seed: int = SIM_SEED + 1,
    gap: tuple[float, float] | None = None,
) -> dict[str, float]:
    """The fitted judge's statistics on pairs like ``data`` (out of sample: a new set of draws).
    ``gap``: the recorded gap distribution to use (default the fit's own)."""
    judge = f.judge()
    gm, gs = gap if gap is not None else (f.gap_mean, f.gap_sd)
    return _values(measure(simulate(judge, gm, gs, data, _Draws(n_sim, seed)), n_boot=0))


POINT_ONLY = ("point_tie_rate", "point_accuracy")


def fit_pair_set(
    f: Fit, data: JudgeData, n_sim: int = N_SIM, seed: int = SIM_SEED + 2, maxfev: int = 800
) -> tuple[dict, dict[str, float], dict]:
    """Out of sample: keep the fitted judge (cutpoints, noise, bias, ties) and fit only the new
    pair set's distribution — level mean and SD, gap mean and SD — to its *pointwise*
    statistics (score histogram, point tie rate, point accuracy). Every pairwise and cross
    statistic of the new set is then a prediction. Returns (pair-set parameters, predicted
    statistics, measured statistics)."""
    measured = measure(data)
    names = [k for k in measured if k.startswith("hist_")] + [t for t in POINT_ONLY if t in measured]
    obs = np.array([measured[k]["value"] for k in names])
    se = np.array([max((measured[k]["hi"] - measured[k]["lo"]) / 3.92, SE_FLOOR) for k in names])
    draws = _Draws(n_sim, seed)
    has_gold = bool(np.any(data.gold != 0))

    def unpack(x):
        return {
            "level_mean": float(x[0]),
            "level_sd": float(math.exp(x[1])),
            "gap_mean": float(x[2]) if has_gold else 0.0,
            "gap_sd": float(math.exp(x[3])),
        }

    def stats_of(p):
        sim = simulate(
            f.judge(),
            p["gap_mean"],
            p["gap_sd"],
            data,
            draws,
            level_mean=p["level_mean"],
            level_sd=p["level_sd"],
        )
        return _values(measure(sim, n_boot=0))

    def loss(x):
        got = stats_of(unpack(x))
        pred = np.array([got.get(k, 0.0) for k in names])
        return float(np.sum(((pred - obs) / se) ** 2))

    x0 = np.array([0.0, 0.0, f.gap_mean, math.log(f.gap_sd)])
    simplex = np.vstack([x0] + [x0 + 0.5 * e for e in np.eye(4)])
    best = minimize(
        loss,
        x0,
        method="Nelder-Mead",
        options={"maxfev": maxfev, "xatol": 1e-3, "fatol": 1e-3, "initial_simplex": simplex},
    )
    p = unpack(best.x)
    return p, stats_of(p), measured


# --- the preset YAML ----------------------------------------------------------------------------------


def provenance_sources(files: list[str]) -> list[str]:
    """``repo@commit:path`` of each vendored file (``sources.json`` in an ancestor folder), else
    the file's path and sha256."""
    import hashlib

    out = []
    for f in files:
        p = Path(f).resolve()
        entry = None
        for parent in p.parents:
            src = parent / "sources.json"
            if src.is_file():
                table = json.loads(src.read_text())
                rel = p.relative_to(parent).as_posix()
                if rel in table:
                    entry = table[rel]
                elif rel.startswith("llmbar/") and "llmbar" in table:
                    _, subset, judge, strategy, _ = rel.split("/")
                    entry = table["llmbar"].format(
                        subset=subset.replace("_", "/", 1), judge=judge, strategy=strategy
                    )
                break
        if entry is None:
            entry = f"{f} (sha256 {hashlib.sha256(p.read_bytes()).hexdigest()[:16]})"
        out.append(entry)
    return out


def preset_yaml(f: Fit, name: str, description: str, sources: list[str], command: str, seed: int = 0) -> str:
    import yaml

    prov = {
        "judge": description,
        "sources": sources,
        "command": command,
        "method": "simulated method of moments (arenabench/calibration/fit.py)",
        "recorded_gap": {
            "mean": round(f.gap_mean, 6),
            "sd": round(f.gap_sd, 6),
            "note": "gold-better minus gold-worse, as this judge perceives it; level ~ N(0, 1)",
        },
        "objective": round(f.objective, 4),
        "targets": list(f.targets),
        "fit": {
            r["statistic"]: {
                k: (
                    None
                    if isinstance(r[k], float) and math.isnan(r[k])
                    else (round(r[k], 4) if isinstance(r[k], float) else r[k])
                )
                for k in ("role", "measured", "lo", "hi", "fitted", "inside")
            }
            for r in f.rows
        },
    }
    # the judge's token bill is counted like the simulated presets' (docs/tokens.md)
    body = {"kind": "ordinal", **f.params, "seed": seed, "tokenizer": "tiny-bpe", "rubric": "open_writing"}
    body["provenance"] = prov
    # data text (the description defaults to the recorded files' source names) reaches the file
    # only through the YAML emitter (``provenance``) or as a comment squeezed to one printable line
    shown = sorted({_comment(x) for x in sources})
    head = (
        f"# fitted judge '{_comment(name)}' (arenabench/judges/ordinal.py): {_comment(description)}\n"
        f"# derived by: {_comment(command)}\n"
        "# source(s): " + "; ".join(shown[:3]) + (" ..." if len(shown) > 3 else "") + "\n"
    )
    return head + yaml.safe_dump(body, sort_keys=False, width=110, default_flow_style=None)


def _comment(text: str) -> str:
    """``text`` as the rest of one YAML comment line: every character that is not printable
    (newlines, YAML's other line breaks U+0085/U+2028/U+2029, control and format characters)
    becomes a space, runs of spaces one; so no data text can end the comment and write a key."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())


def holdout_rows(measured: dict, predicted: dict[str, float]) -> list[dict]:
    """Out-of-sample table: measured (CI) beside predicted; the pointwise statistics the pair
    set was fitted to are marked ``pair-set fit``."""
    rows = []
    for name, s in measured.items():
        role = "pair-set fit" if _implied(name) or name in POINT_ONLY else "predicted"
        rows.append(_fit_row(name, s, predicted.get(name, math.nan), role))
    return rows


def plot_fit(rows: list[dict], path: str, title: str) -> None:
    """Two panels: the score histogram (measured with 95% CI, fitted), and every other statistic
    (measured with 95% CI; fitted as a marker: filled = fit target, open = predicted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from arenabench.reporting import save_figure

    hist = [r for r in rows if r["statistic"].startswith("hist_")]
    other = [
        r for r in rows if not r["statistic"].startswith("hist_") and r["statistic"] != "rescore_noise_sd"
    ]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1, 1.5]})
    ax = axes[0]
    if hist:
        lv = [int(r["statistic"][5:]) for r in hist]
        m = np.array([r["measured"] for r in hist])
        err = np.array([[r["measured"] - r["lo"], r["hi"] - r["measured"]] for r in hist]).T
        ax.bar(lv, m, color="#9ecae1", label="measured (95% CI)")
        ax.errorbar(lv, m, yerr=np.clip(err, 0, None), fmt="none", ecolor="#3182bd", capsize=3)
        ax.plot(lv, [r["fitted"] for r in hist], "o", color="#d62728", label="fitted simulator")
        ax.set_xticks(lv)
        ax.legend(fontsize=8)
    ax.set_xlabel("score")
    ax.set_ylabel("share of scores")
    ax.set_title("pointwise score histogram")
    ax = axes[1]
    y = np.arange(len(other))[::-1]
    for yi, r in zip(y, other, strict=True):
        ax.plot([r["lo"], r["hi"]], [yi, yi], "-", color="#3182bd", lw=3, alpha=0.6)
        ax.plot(r["measured"], yi, "|", color="#08519c", ms=12)
        target = r["role"] in ("target", "pair-set fit")
        ax.plot(r["fitted"], yi, "o", color="#d62728", mfc="#d62728" if target else "white", ms=7)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['statistic']} ({r['role']})" for r in other], fontsize=8)
    low = min([0.0] + [v for r in other for v in (r["lo"], r["fitted"]) if not math.isnan(v)])
    ax.set_xlim(low - 0.02, 1.02)
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("value (bar: measured 95% CI; dot: simulator, filled = fitted to, open = predicted)")
    ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
