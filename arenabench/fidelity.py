"""Fidelity study: how well does each constructor recover the true order, per judge call?"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from arenabench import judges, rewards
from arenabench.advantages import standardize
from arenabench.diagnostics import HEALTH_METRICS, ComparisonHealth, health_rates, tie_rate
from arenabench.engine import Engine
from arenabench.metrics import kendall_tau_b, pearson, spearman
from arenabench.rewards import Constructor
from arenabench.sim import qualities, simulate_groups
from arenabench.stats import paired_t, t_interval
from arenabench.types import ConstructorResult, Group

COLUMNS = [
    "constructor",
    "group_size",
    "comparisons_per_group",
    "judge_calls_per_group",
    "waves",
    "kendall_tau",
    "spearman",
    "top1",
    "adv_corr",
    "zero_adv",
]
# Per-group diagnostics some constructors report in ``extra["summary"]``; a row carries the
# ones its constructor reports (mean over groups), other rows show them as empty.
SUMMARY_COLUMNS = ["routed", "zero_adv_before", "prob_extreme", "cyclic", "reference_rollouts"]
# With ``diagnostics``: the judge's health over every comparison of the row (issue 18):
# position consistency, tie, cycle and failure rates (``arenabench.diagnostics.health_rates``).
HEALTH_COLUMNS = list(HEALTH_METRICS)
# Groups the judge left wholly unranked (every request failed): counted at tau = 0 in the means
# and reported beside them; present only in a row that has some (issue 43).
FAILED_COLUMNS = ["failed_groups"]
# The 95% t half-width of a row's mean over its groups (``stats.t_interval``; the groups are
# independent draws).
CI_METRICS = ["kendall_tau", "top1", "adv_corr"]
CI_COLUMNS = [f"{m}_ci95" for m in CI_METRICS]
# Two rows of one N share their groups, so a difference between them is paired: each row's
# mean difference from BASELINE's over the same groups, its 95% t half-width and the paired
# t-test p (``stats.paired_t``). Round-robin: every pair, ArenaRL's reference topology. Present
# when BASELINE is among the rows.
BASELINE = "round_robin"
PAIRED_METRICS = ["kendall_tau", "adv_corr"]
PAIRED_COLUMNS = [f"{m}_vs_{BASELINE}{s}" for m in PAIRED_METRICS for s in ("", "_ci95", "_p")]
FORMATS = ("table", "json", "csv", "markdown")


def group_metrics(res: ConstructorResult, q: np.ndarray) -> dict[str, float]:
    """Kendall τ-b / Spearman ρ of the constructor's reward vs true quality, top-1 credit
    (1/k when the true best is among k tied leaders), Pearson r between the constructor's
    advantages and oracle GRPO advantages on true quality, and whether every advantage is
    zero. A correlation with a constant side (a zero-advantage group) counts as 0: no signal.

    Unranked trajectories (their requests failed) count as tied last, below every ranked one; a
    group the judge left wholly unranked is a constant side, so τ, ρ and r are 0 (no
    information), never NaN (NaN, dropped by the mean over groups, overstated τ when the judge
    failed: issue 43). ``failed_group`` marks such a group (:func:`run_fidelity` counts them)."""
    score = -np.asarray(res.rank, float)
    unranked = np.isnan(score)
    if unranked.any():  # tied last: a finite value, so tied pairs compare as ties, not as NaN
        score[unranked] = score[~unranked].min() - 1.0 if (~unranked).any() else 0.0
    leaders = np.flatnonzero(score == score.max())
    return {
        "kendall_tau": kendall_tau_b(score, q),
        "spearman": spearman(score, q),
        "top1": (1.0 / len(leaders)) if int(np.argmax(q)) in leaders else 0.0,
        "adv_corr": pearson(res.advantage, standardize(q)),
        "zero_adv": float(not np.any(res.advantage)),
        "failed_group": float(unranked.all()),
    }


def evaluate(
    constructor: Constructor, groups: Sequence[Group], judge, seed: int = 0, chunk: int = 64, on_chunk=None
) -> tuple[pd.DataFrame, tuple[ComparisonHealth, int, int]]:
    """One constructor on ``groups``, ``chunk`` at a time (like K prompts of a training step)
    through one engine: a row of :func:`group_metrics` and costs per group, and the judge's
    health over all of them as ``(ComparisonHealth, failed requests, requests sent)`` — the
    arguments of :func:`arenabench.diagnostics.health_rates`, which add up over calls.
    ``on_chunk()`` is called after each chunk (a progress bar)."""
    engine = Engine(judge, seed=seed)
    per_group: list[dict] = []
    health, failures, sent = ComparisonHealth(), 0, 0
    for step, k in enumerate(range(0, len(groups), chunk)):
        part = groups[k : k + chunk]
        out = engine.run(constructor, part, step=step)
        per_group += [_row(r, g) for r, g in zip(out.results, part, strict=True)]
        health += out.stats.health
        failures += out.stats.failures
        sent += out.stats.judge_calls - out.stats.retries
        if on_chunk is not None:
            on_chunk()
    return pd.DataFrame(per_group), (health, failures, sent)


def run_fidelity(
    constructors: Sequence[str] | None = None,
    group_size: int = 8,
    n_groups: int = 500,
    judge: str = "calibrated",
    seed: int = 0,
    chunk: int = 64,
    progress: bool = True,
    order: str | None = None,
    diagnostics: bool = False,
) -> list[dict]:
    """One row per constructor (a name or a ``name:key=value`` spec). Groups are run ``chunk``
    at a time (like K prompts of a training step), all in lockstep through one engine.
    ``order``: the slot-order policy for every spec that names none (``rewards.with_order``;
    the row's name says it). ``diagnostics``: add :data:`HEALTH_COLUMNS` to every row. ``judge``: a
    preset name, or a judge object. A row whose judge left some groups wholly unranked (every
    request failed) counts them at τ = 0 in the mean and says how many in ``failed_groups``
    (:data:`FAILED_COLUMNS`; absent when none)."""
    names = list(constructors) if constructors else rewards.names()
    names = [rewards.with_order(n, order) for n in names]
    built = [rewards.from_spec(n) for n in names]  # fail fast on a bad name or parameter
    if group_size < 2:  # one answer has no ranking to be faithful to: τ and top-1 are undefined
        raise ValueError(f"group size must be >= 2 (-N 2 or more); got {group_size}")
    if n_groups < 1:
        raise ValueError(f"groups must be >= 1; got {n_groups}")
    the_judge = judges.get(judge, seed=seed) if isinstance(judge, str) else judge
    groups = simulate_groups(n_groups, group_size, seed=seed)
    n_chunks = -(-len(groups) // chunk)
    rows = []
    bar = (
        tqdm(total=len(names) * n_chunks, desc=f"fidelity N={group_size}", unit="chunk") if progress else None
    )
    per_group = {}
    for name, cons in zip(names, built, strict=True):
        df, health = evaluate(cons, groups, the_judge, seed, chunk, bar.update if bar is not None else None)
        per_group[name] = df
        ci = {f"{m}_ci95": _half_width(t_interval(df[m])) for m in CI_METRICS}
        failed = int(df.pop("failed_group").sum())
        rows.append(
            {
                "constructor": name,
                "group_size": group_size,
                **df.mean().to_dict(),
                **ci,
                **health_rates(*health),
                **({"failed_groups": failed} if failed else {}),  # beside the mean, never silent
            }
        )
    if bar is not None:
        bar.close()
    if BASELINE in per_group:
        base = per_group[BASELINE]
        for row in rows:
            for m in PAIRED_METRICS:
                d = paired_t(per_group[row["constructor"]][m], base[m])
                col = f"{m}_vs_{BASELINE}"
                row.update({col: d["mean"], f"{col}_ci95": _half_width(d), f"{col}_p": d["p"]})
    keep = COLUMNS + CI_COLUMNS + PAIRED_COLUMNS + SUMMARY_COLUMNS + FAILED_COLUMNS
    keep += HEALTH_COLUMNS if diagnostics else []
    return [{k: row[k] for k in keep if k in row} for row in rows]


def _half_width(interval: dict) -> float:
    """``hi − mean`` of a :mod:`arenabench.stats` interval (NaN under two values)."""
    return interval["hi"] - interval["mean"]


def judge_tie_rate(
    judge: str = "calibrated", group_size: int = 8, n_groups: int = 500, seed: int = 0
) -> dict:
    """:func:`arenabench.diagnostics.tie_rate` of the judge preset on the study's groups (the
    same judge and groups :func:`run_fidelity` uses for these arguments)."""
    return tie_rate(judges.get(judge, seed=seed), simulate_groups(n_groups, group_size, seed=seed))


def tie_rate_line(judge: str = "calibrated", group_size: int = 8, n_groups: int = 500, seed: int = 0) -> str:
    """One sentence for a report header: the preset's tie rate on the default groups."""
    t = judge_tie_rate(judge, group_size, n_groups, seed)
    return (
        f"tie rate of judge `{judge}` at N = {group_size} ({n_groups} groups, every pair): "
        f"{t['request_tie_rate']:.1%} of single-order comparisons, "
        f"{t['match_tie_rate']:.1%} of bidirectional matches (summed scores)"
    )


def _row(res: ConstructorResult, group: Group) -> dict:
    summary = res.extra.get("summary", {})
    return {
        "comparisons_per_group": res.comparisons,
        "judge_calls_per_group": res.judge_calls,
        "waves": res.waves,
        **group_metrics(res, qualities(group)),
        **{k: float(summary[k]) for k in SUMMARY_COLUMNS if k in summary},
    }


def columns(rows: list[dict]) -> list[str]:
    """COLUMNS, then the confidence, paired, summary, failed-group and health columns any row has."""
    extra = CI_COLUMNS + PAIRED_COLUMNS + SUMMARY_COLUMNS + FAILED_COLUMNS + HEALTH_COLUMNS
    return COLUMNS + [c for c in extra if any(c in r for r in rows)]


def format_rows(rows: list[dict], fmt: str = "table") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt == "json":
        return json.dumps(rows, indent=2)
    cols = columns(rows)
    df = pd.DataFrame(rows, columns=cols)
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        from arenabench.reporting import fixed3, md_table

        return md_table(df, cell=fixed3)
    return df.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="")


def plot_frontier(rows: list[dict], path: str | None, title: str | None = None):
    """Kendall τ (mean over groups, 95% t interval) vs judge calls per group, one panel per group
    size, each point labelled with its constructor (labels placed apart, leader lines where they had
    to move). Rows that ask the judge nothing (oracles) have no place on the log axis and are left
    out. One title: the figure's; the panels are titled by N only when there are several."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, ScalarFormatter

    from arenabench.reporting import arm_color, label_points, save_figure

    df = pd.DataFrame(rows)
    df = df[df["judge_calls_per_group"] > 0]
    sizes = sorted(df["group_size"].unique())
    fig = Figure(figsize=(6.5 * len(sizes), 6.0))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(sizes), sharey=True, squeeze=False)[0]
    placements = []
    for ax, n in zip(axes, sizes, strict=True):
        sub = df[df["group_size"] == n].sort_values(["judge_calls_per_group", "kendall_tau"])
        x, y = sub["judge_calls_per_group"].to_numpy(float), sub["kendall_tau"].to_numpy(float)
        ci = sub["kendall_tau_ci95"].to_numpy(float) if "kendall_tau_ci95" in sub else np.zeros_like(y)
        ci = np.nan_to_num(ci)
        ax.errorbar(x, y, yerr=ci, fmt="none", capsize=2, lw=1, ecolor="0.55")
        ax.scatter(x, y, s=22, zorder=3, c=[arm_color(c) for c in sub["constructor"]])  # one colour per arm
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 3.0, 5.0)))  # labelled minor ticks that fit
        ax.xaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="x", which="both", labelsize=7)
        ax.set_xlabel("judge calls per group (log scale)")
        if len(sizes) > 1:
            ax.set_title(f"N = {n}")
        ax.grid(alpha=0.3, which="both")
        ax.margins(x=0.25, y=0.08)
        placements.append((ax, sub["constructor"].tolist(), x, y, list(zip(y - ci, y + ci, strict=True))))
    axes[0].set_ylabel("Kendall τ vs the true order (mean, 95% CI)")
    import textwrap

    width = 62 * len(sizes)  # one panel holds ~62 characters of the title's font
    text = title or "Fidelity per judge call"
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")))
    fig.tight_layout()
    for ax, names, x, y, spans in placements:
        label_points(ax, names, x, y, fontsize=7, spans=spans)
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig
