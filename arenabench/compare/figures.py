"""The figures of ``arenabench compare``, the notebooks and the report scripts: learning curves
with their confidence bands (``curves_figure``; small multiples beyond four arms), the collapse
panels (``collapse_figure``), quality against judge cost (``frontier_plot``,
``stats_frontier_figure``), paired differences against a baseline (``paired_difference_figure``),
a swept setting (``sweep_figure``), and the pieces they share (``figure``, ``save_figure``). All on
Agg, never through pyplot's global backend."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from arenabench.compare.runs import COST_LABELS, COST_METRICS, check_by, check_metric


def bare_figure(size):
    """An empty Figure of ``size`` inches on Agg, without touching pyplot's global backend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def figure(size=(8, 4.8), ncols: int = 1):
    """(a :func:`bare_figure`, its ``ncols`` axes side by side)."""
    fig = bare_figure(size)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def _fit(fig, text: str, fontsize: float = 10, share: float = 1.0) -> str:
    """``text`` with each line wrapped to what ``share`` of the figure's width holds at
    ``fontsize`` (a title must not run off a narrow figure)."""
    import textwrap

    chars = max(int(share * fig.get_figwidth() * 72 / (0.55 * fontsize)), 30)
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def save_figure(fig, path: str | Path | None) -> None:
    """Write ``fig`` as a PNG at ``path`` (folders made; nothing if ``path`` is None)."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)


def _panels(n: int, panel: tuple[float, float], margin: tuple[float, float]):
    """Small multiples: (a figure of ``n`` panels of ``panel`` inches, at most five a row, on
    shared axes, plus ``margin``; its axes, flat; the number of columns)."""
    ncols = min(n, 5) or 1
    nrows = max(math.ceil(n / ncols), 1)
    fig = bare_figure((panel[0] * ncols + margin[0], panel[1] * nrows + margin[1]))
    return fig, fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel(), ncols


def _label_panels(axes, n: int, ncols: int, ylabel: str, fontsize: float) -> None:
    """The panels past ``n`` hidden, "training step" under the bottom row, ``ylabel`` left of the
    first column."""
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[len(axes) - ncols :]:
        ax.set_xlabel("training step", fontsize=8)
    for ax in axes[::ncols]:
        ax.set_ylabel(ylabel, fontsize=fontsize)


# the range a per-step metric can take: a confidence band is cut to it (a correlation's band must
# not reach above r = 1)
METRIC_BOUNDS = {
    "adv_oracle_pearson": (-1.0, 1.0),
    "distinct_share": (0.0, 1.0),
    "zero_adv_share": (0.0, 1.0),
    "eval_win_rate": (0.0, 1.0),
    "clip_frac": (0.0, 1.0),
    "judge_consistency": (0.0, 1.0),
    "judge_tie_rate": (0.0, 1.0),
    "judge_cycle_rate": (0.0, 1.0),
    "judge_failure_rate": (0.0, 1.0),
    "sigma_group": (0.0, math.inf),
    "sigma_noise": (0.0, math.inf),
    "snr": (0.0, math.inf),
    "entropy": (0.0, math.inf),
}


def curves_what(metric: str, smooth: str = "") -> str:
    from arenabench.reporting import metric_label

    return f"{metric_label(metric)} — mean over seeds{smooth}, band: 95% CI of the mean"


def curves_figure(
    curves: pd.DataFrame,
    metric: str,
    title: str = "",
    path=None,
    band: bool = True,
    level: float = 0.95,
    panels: int | None = None,
):
    """A :func:`metric_curves` frame as a Figure: the mean per group over steps, each arm in its
    fixed colour (:func:`arenabench.reporting.arm_color`), with the t confidence band of the mean
    over seeds (``level``; cut to the metric's range, :data:`METRIC_BOUNDS`). The title should
    say what the band is (the default does).

    More than ``panels`` groups (default 4) are drawn as small multiples on shared axes, one panel
    per arm with its band, the other arms' means as thin grey lines behind it: ten overlapping
    bands in one panel read as one mass."""
    from arenabench.reporting import arm_color, metric_label, t_half_width

    groups = [(g, c) for g, c in curves.groupby("group", sort=True)]
    lo_b, hi_b = METRIC_BOUNDS.get(metric, (-math.inf, math.inf))

    def draw(ax, group, c, label=True):
        x, m = c["step"].to_numpy(), c["mean"].to_numpy()
        color = arm_color(group)
        ax.plot(x, m, label=f"{group} (n={int(c['n'].max())})" if label else None, lw=1.6, color=color)
        if band:
            h = np.nan_to_num(t_half_width(c["std"].to_numpy(), c["n"].to_numpy(), level), nan=0.0)
            lo, hi = np.clip(m - h, lo_b, hi_b), np.clip(m + h, lo_b, hi_b)
            ax.fill_between(x, lo, hi, color=color, alpha=0.18, lw=0)

    if len(groups) <= (4 if panels is None else panels):
        fig, (ax,) = figure()
        for group, c in groups:
            draw(ax, group, c)
        ax.set_xlabel("training step")
        ax.set_ylabel(metric_label(metric), fontsize=9)
        ax.set_title(_fit(fig, title or curves_what(metric), share=0.9), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        save_figure(fig, path)
        return fig
    fig, axes, ncols = _panels(len(groups), (2.9, 2.3), (0.8, 1.2))
    for ax, (group, c) in zip(axes, groups, strict=False):
        for other, d in groups:
            if other != group:
                ax.plot(d["step"], d["mean"], lw=0.7, color="0.75", zorder=1)
        draw(ax, group, c, label=False)
        ax.set_title(f"{group} (n={int(c['n'].max())})", fontsize=9, color=arm_color(group))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    _label_panels(axes, len(groups), ncols, metric_label(metric).replace(" (", "\n("), 7)
    for ax in axes[len(groups) - ncols : len(groups)]:
        ax.xaxis.set_tick_params(labelbottom=True)
    fig.suptitle(_fit(fig, (title or curves_what(metric)) + "\n(grey: the other arms' means)"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def note_figure(title: str, note: str, path=None, size=(8, 4.8)):
    """A panel that says why a figure has nothing to draw (e.g. SNR under a temperature-0 judge,
    whose re-asked scores never differ: σ_noise = 0, the ratio undefined), in place of a silently
    absent PNG."""
    import textwrap

    fig, (ax,) = figure(size=size)
    ax.set_axis_off()
    ax.text(0.5, 0.5, textwrap.fill(note, 70), ha="center", va="center", fontsize=10, wrap=True,
            transform=ax.transAxes, bbox={"boxstyle": "round", "fc": "0.95", "ec": "0.6"})  # fmt: skip
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def collapse_figure(sigma_group: pd.DataFrame, sigma_noise: pd.DataFrame, title: str = "", path=None):
    """Discriminative collapse (ArenaRL Fig. 1a): per arm, the in-group spread of pointwise judge
    scores σ_group (solid) against the re-judging noise σ_noise (dashed) over steps, both
    :func:`metric_curves` frames (mean over seeds). Small multiples, one panel per arm on shared
    axes, so that ten arms stay readable; the panel where σ_group ends lowest is read against the
    others' without a 20-entry legend."""
    from arenabench.reporting import arm_color

    groups = sorted(set(sigma_group["group"]), key=str)
    fig, axes, ncols = _panels(len(groups), (2.9, 2.4), (0.6, 0.9))
    noise = dict(tuple(sigma_noise.groupby("group", sort=True)))
    for ax, group in zip(axes, groups, strict=False):
        c = sigma_group[sigma_group["group"] == group]
        ax.plot(c["step"], c["mean"], lw=1.6, color="C0", label="σ_group")
        if group in noise:
            n = noise[group]
            ax.plot(n["step"], n["mean"], lw=1.2, ls="--", color="C3", label="σ_noise")
        ax.set_title(str(group), fontsize=9, color=arm_color(group))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    _label_panels(axes, len(groups), ncols, "SD of judge scores\n(score units)", 8)
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(_fit(fig, title or "σ_group (solid) vs σ_noise (dashed), mean over seeds"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def frontier_plot(
    df: pd.DataFrame, x: str = "judge_calls", y: str = "eval_win_rate", by: str = "constructor", path=None
):
    """Mean of ``y`` with its 95% t interval over runs against mean ``x`` per group (one point per
    constructor, in its colour): the training-time analogue of the fidelity frontier. Returns the
    matplotlib Figure (shown inline in a notebook) and writes a PNG if ``path`` is given."""
    for metric in (x, y):
        check_metric(df, metric)
    check_by(df, by)
    from arenabench.reporting import arm_color, metric_label, t_half_width

    g = df.groupby(by)[[x, y]]
    mean, std, n = g.mean(), g.std(ddof=1).fillna(0.0), g.count()
    half = pd.Series(np.nan_to_num(t_half_width(std[y], n[y])), index=mean.index)
    fig, (ax,) = figure(size=(7, 4.5))
    for name in mean.index:
        ax.errorbar([mean.at[name, x]], [mean.at[name, y]], yerr=[half[name]], fmt="o", capsize=3,
                    color=arm_color(name))  # fmt: skip
    if (mean[x] > 0).all():
        ax.set_xscale("log")
    ax.set_xlabel(f"{metric_label(x)} (final, mean over seeds)")
    ax.set_ylabel(f"{metric_label(y)}\n(final, mean, 95% CI over seeds)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.margins(x=0.18, y=0.1)
    fig.tight_layout()
    from arenabench.reporting import label_points

    spans = list(zip(mean[y] - half, mean[y] + half, strict=True))
    label_points(ax, [str(n) for n in mean.index], mean[x].to_numpy(), mean[y].to_numpy(), spans=spans)
    save_figure(fig, path)
    return fig


def paired_difference_figure(table: pd.DataFrame, quantities=("final", "auc"), title: str = "", path=None):
    """Paired differences arm − baseline (an :func:`arm_stats` frame with a baseline): one panel
    per quantity, each arm's mean difference with its t confidence interval, a line at 0."""
    base = table.attrs.get("baseline")
    if base is None:
        raise ValueError("paired_difference_figure needs an arm_stats table with a baseline")
    from arenabench.reporting import arm_color, metric_label, metric_short, metric_unit

    metric = table.attrs.get("metric", "")
    rows = table[table["arm"] != base].iloc[::-1]
    quantities = [q for q in quantities if f"d_{q}" in table]
    fig, axes = figure(size=(4.2 * len(quantities) + 1.2, 0.45 * len(rows) + 1.6), ncols=len(quantities))
    label = {"final": "final", "auc": "AUC", "reach_step": "steps to reach"}
    pct = f"{100 * table.attrs.get('level', 0.95):g}%"
    for ax, q in zip(axes, quantities, strict=True):
        y = np.arange(len(rows))
        m = rows[f"d_{q}"].to_numpy(dtype=float)
        lo = np.nan_to_num(m - rows[f"d_{q}_lo"].to_numpy(dtype=float))
        hi = np.nan_to_num(rows[f"d_{q}_hi"].to_numpy(dtype=float) - m)
        for k, arm in enumerate(rows["arm"]):
            ax.errorbar(m[k], y[k], xerr=[[lo[k]], [hi[k]]], fmt="o", capsize=3, color=arm_color(arm))
        ax.axvline(0.0, color="k", lw=0.8)
        ax.locator_params(axis="x", nbins=5)
        ax.set_yticks(y, [str(a) for a in rows["arm"]], fontsize=8)
        unit = f", {metric_unit(metric)}" if metric and metric_unit(metric) else ""
        ax.set_xlabel(f"Δ {label[q]} {metric_short(metric)} vs {base}{unit}\n(mean over seeds, {pct} CI)",
                      fontsize=9)  # fmt: skip
        ax.grid(alpha=0.3, axis="x")
    what = metric_label(metric) if metric else "the metric"
    fig.suptitle(_fit(fig, title or f"paired differences vs {base} by seed: {what}"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def stats_frontier_figure(
    table: pd.DataFrame, steps: int | None = None, title: str = "", path=None, cost: str = "judge_calls"
):
    """Quality against judge cost per arm, from an :func:`arm_stats` frame: the mean final value
    with its t interval against the mean cumulative judge cost (per step if ``steps`` is given):
    ``cost`` = ``judge_calls`` or a token total of :data:`COST_METRICS` (``judge_tokens``: prefill +
    decode). Arms that ask the judge nothing (oracles) sit at 0."""
    if cost == "judge_tokens":
        need = ("judge_prompt_tokens_total", "judge_completion_tokens_total")
        if not all(c in table for c in need):
            raise ValueError(f"the arm_stats table has no token columns {list(need)} (no tokens logged)")
        total = table[need[0]].to_numpy(dtype=float) + table[need[1]].to_numpy(dtype=float)
    elif cost in table:
        total = table[cost].to_numpy(dtype=float)
    else:
        raise ValueError(
            f"the arm_stats table has no {cost} column; valid: judge_tokens, {list(COST_METRICS)}"
        )
    x = np.nan_to_num(total) / (steps or 1)
    what = (
        "judge calls"
        if cost == "judge_calls"
        else f"judge {COST_LABELS.get(cost, 'tokens').replace('_', ' ')}"
    )
    m = table["final"].to_numpy(dtype=float)
    lo = np.nan_to_num(m - table["final_lo"].to_numpy(dtype=float))
    hi = np.nan_to_num(table["final_hi"].to_numpy(dtype=float) - m)
    from arenabench.reporting import arm_color, label_points, metric_label

    fig, (ax,) = figure(size=(8, 5))
    for k, arm in enumerate(table["arm"]):
        ax.errorbar(x[k], m[k], yerr=[[lo[k]], [hi[k]]], fmt="o", capsize=3, color=arm_color(arm))
    pct = f"{100 * table.attrs.get('level', 0.95):g}%"
    ax.set_xlabel(f"{what} per step" if steps else f"{what} (final, cumulative)")
    metric = table.attrs.get("metric", "")
    ax.set_ylabel(f"final {metric_label(metric)}\n(mean over seeds, {pct} CI)", fontsize=9)
    ax.set_title(_fit(fig, title or f"quality vs {what}", share=0.9), fontsize=10)
    ax.grid(alpha=0.3)
    ax.margins(x=0.18, y=0.1)  # room for the labels inside the frame
    if (x >= 0).all():  # judge calls: no negative axis beyond a sliver for the oracles at 0
        x0, x1 = ax.get_xlim()
        ax.set_xlim(max(x0, -0.04 * x1), x1)
    fig.tight_layout()
    spans = list(
        zip(table["final_lo"].to_numpy(dtype=float), table["final_hi"].to_numpy(dtype=float), strict=True)
    )
    label_points(ax, [str(a) for a in table["arm"]], x, m, spans=spans)
    save_figure(fig, path)
    return fig


def sweep_figure(tables, xlabel: str, quantity: str = "final", title: str = "", path=None):
    """One :func:`arm_stats` frame per value of a swept setting (``{x: table}``, e.g. group size):
    each arm's ``quantity`` with its t interval against x (ArenaRL Fig. 4a's layout)."""
    from arenabench.reporting import arm_color, metric_label

    fig, (ax,) = figure(size=(7, 4.5))
    xs = sorted(tables)
    arms = sorted({a for t in tables.values() for a in t["arm"]}, key=str)
    for k, arm in enumerate(arms):
        pts = [(x, tables[x][tables[x]["arm"] == arm]) for x in xs]
        pts = [(x, r.iloc[0]) for x, r in pts if len(r)]
        if not pts:
            continue
        px = np.array([float(x) for x, _ in pts]) * (1 + 0.03 * (k - (len(arms) - 1) / 2))
        m = np.array([float(r[quantity]) for _, r in pts])
        lo = np.nan_to_num(m - np.array([float(r[f"{quantity}_lo"]) for _, r in pts]))
        hi = np.nan_to_num(np.array([float(r[f"{quantity}_hi"]) for _, r in pts]) - m)
        ax.errorbar(px, m, yerr=[lo, hi], fmt="o-", capsize=3, label=str(arm), color=arm_color(arm))
    ax.set_xscale("log", base=2)
    ax.set_xticks([float(x) for x in xs], [str(x) for x in xs])
    ax.set_xlabel(xlabel)
    metric = next(iter(tables.values())).attrs.get("metric", "")
    q = {"final": "final", "auc": "AUC of"}.get(quantity, quantity)
    ax.set_ylabel(f"{q} {metric_label(metric)}\n(mean over seeds, 95% CI)", fontsize=9)
    ax.set_title(_fit(fig, title or f"{metric} by {xlabel}", share=0.9), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    return fig
