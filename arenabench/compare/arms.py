"""Statistics over seeds: a table of final values per setting (``summarize``), step-wise curves
(``metric_curves``, mean over seeds with its spread), and per arm the t intervals of final value,
area under the curve and steps to reach a target, with paired differences against a baseline by
seed (``arm_stats``, ``arenabench compare --stats/--baseline/--reach``); one row per run
(``run_values``) is what they pool."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from arenabench.compare.figures import curves_figure, curves_what
from arenabench.compare.runs import (
    COST_LABELS,
    COST_METRICS,
    RunSelection,
    check_by,
    check_metric,
    check_pooling,
    history,
    runs_for,
)

SUMMARY_FORMATS = ("table", "markdown", "csv")
MEAN_STD = "mean ± std"


STATS_FORMATS = ("table", "markdown", "csv", "json")


def _fmt_mean_std(mean: float, std: float) -> str:
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def summarize(df: pd.DataFrame, metric: str = "eval_win_rate", by: str = "setting") -> pd.DataFrame:
    """Per ``by`` group: ``n`` (runs — one per seed — with a value for ``metric``), ``mean``,
    ``std`` (ddof=1; NaN for a single seed) and a formatted ``mean ± std`` column, sorted by mean
    descending. An unknown metric raises ValueError listing the available ones."""
    if df.empty:
        raise ValueError("no runs to summarize")
    check_metric(df, metric)
    check_by(df, by)
    check_pooling(df, by)
    values = df[[by, metric]].dropna(subset=[metric])
    g = values.groupby(by, dropna=False)[metric]
    out = pd.DataFrame({"n": g.count(), "mean": g.mean(), "std": g.std(ddof=1)}).reset_index()
    out[MEAN_STD] = [_fmt_mean_std(m, s) for m, s in zip(out["mean"], out["std"], strict=True)]
    out = out.sort_values(["mean", by], ascending=[False, True], kind="stable").reset_index(drop=True)
    out.attrs.update(metric=metric, by=by)
    return out


def format_summary(summary: pd.DataFrame, fmt: str = "table") -> str:
    """``table`` (aligned text), ``markdown`` or ``csv`` (full precision, parses back exactly)."""
    if fmt not in SUMMARY_FORMATS:
        raise ValueError(f"format must be one of {', '.join(SUMMARY_FORMATS)}; got {fmt!r}")
    if fmt == "csv":
        return summary.to_csv(index=False).rstrip("\n")
    if fmt == "markdown":
        from arenabench.reporting import fixed3, md_table

        return md_table(summary, cell=fixed3)
    return summary.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="")


def metric_curves(
    experiment: str | RunSelection,
    metric: str,
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    path: str | Path | None = None,
    include_failed: bool = False,
    smooth: int = 1,
    where: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Step-wise ``metric`` per ``by`` group, averaged over the group's runs (seeds): returns
    ``step, group, mean, std, n`` (std ddof=1, NaN where one run has the step) and, if ``path``
    is given, writes a PNG of the mean per group with its 95% confidence band versus step. ``smooth > 1``
    replaces mean and std by their trailing rolling mean over that many logged steps (noisy
    per-step metrics such as SNR); the raw values are in ``raw_mean``. ``where``: as
    :func:`select_runs`. ``experiment`` may be a :class:`RunSelection` instead of the five
    arguments that make one."""
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1 (1 = no smoothing); got {smooth}")
    selection = RunSelection.of(experiment, uri, sweep, include_failed, where)
    client, df, key = runs_for(selection, metric, by)
    parts = []
    for run_id, group in zip(df["run_id"], df[by], strict=True):
        h = history(client, run_id, key)
        if len(h):
            parts.append(h.assign(group=group)[["step", "group", "value"]])
    if not parts:
        raise ValueError(f"no history for metric {metric!r}")
    long = pd.concat(parts, ignore_index=True)
    g = long.groupby(["group", "step"], sort=True)["value"]
    curves = pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1), "n": g.count()}).reset_index()
    curves = curves[["step", "group", "mean", "std", "n"]]
    curves["raw_mean"] = curves["mean"]
    if smooth > 1:
        for col in ("mean", "std"):
            curves[col] = curves.groupby("group")[col].transform(
                lambda v: v.rolling(smooth, min_periods=1).mean()
            )
    if path is not None:
        title = f"{selection.experiment}: {curves_what(metric)}"
        curves_figure(curves, metric, title=title, path=Path(path))
    return curves


def quarter_change(curves: pd.DataFrame) -> pd.DataFrame:
    """Per group of a :func:`metric_curves` frame: the mean of the (raw) curve over the first and
    the last quarter of its steps, and their ratio — e.g. whether SNR fell as quality rose."""
    rows = []
    for group, c in curves.sort_values("step").groupby("group", sort=True):
        v = c["raw_mean"] if "raw_mean" in c else c["mean"]
        k = max(len(v) // 4, 1)
        first, last = float(v.iloc[:k].mean()), float(v.iloc[-k:].mean())
        rows.append(
            {
                "group": group,
                "first_quarter": first,
                "last_quarter": last,
                "ratio": last / first if first else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["group", "first_quarter", "last_quarter", "ratio"])


def _resolve_baseline(arms: list, baseline: str, by: str):
    """The arm named ``baseline``: an exact ``by`` value, else the one arm whose ``by`` value (an
    override string such as ``reward=pointwise judge=cot``) holds the token ``reward=<baseline>``."""
    if baseline in arms:
        return baseline
    token = f"reward={baseline}"
    hits = [a for a in arms if token in str(a).split()]
    if len(hits) == 1:
        return hits[0]
    why = "matches several" if hits else "is not one of the"
    raise ValueError(
        f"baseline {baseline!r} {why} arms (grouped by {by!r}): "
        f"{', '.join(map(str, hits or arms))}; name one exactly, or group with --by reward"
    )


def _seed_map(runs: pd.DataFrame, arm) -> dict[str, int]:
    """seed tag → row of an arm's runs; a missing or repeated seed is a clear error."""
    if "seed" not in runs.columns or runs["seed"].isna().any():
        raise ValueError(f"arm {arm!r}: paired differences need a 'seed' tag on every run")
    seeds = runs["seed"].astype(str)
    dup = sorted(seeds[seeds.duplicated()].unique())
    if dup:
        raise ValueError(
            f"arm {arm!r} has several runs of seed(s) {', '.join(dup)}: cannot pair by seed "
            "(pick one sweep with --sweep)"
        )
    return dict(zip(seeds, runs.index, strict=True))


def _fmt_ci(m: float, lo: float, hi: float, signed: bool = False) -> str:
    if math.isnan(m):
        return ""
    s = f"{m:+.3f}" if signed else f"{m:.3f}"
    return s if math.isnan(lo) else f"{s} [{lo:.3f}, {hi:.3f}]"


def run_curves(selection: RunSelection, metric: str, by: str):
    """(runs with ``_final``/``_start``/``_auc``/``_points``, ``{row: (steps, values)}``, all
    selected runs): every run's logged curve of ``metric``; runs without one are left out."""
    from arenabench import stats

    client, df, key = runs_for(selection, metric, by)
    curves, keep = {}, []
    for idx, run_id in zip(df.index, df["run_id"], strict=True):
        h = history(client, run_id, key)
        if len(h):
            curves[idx] = (h["step"].to_numpy(dtype=float), h["value"].to_numpy(dtype=float))
            keep.append(idx)
    runs = df.loc[keep].copy()
    if runs.empty:
        raise ValueError(f"no history for metric {metric!r}")
    runs["_final"] = [curves[i][1][-1] for i in runs.index]
    runs["_start"] = [curves[i][1][0] for i in runs.index]
    runs["_auc"] = [stats.curve_auc(*curves[i]) for i in runs.index]
    runs["_points"] = [len(curves[i][1]) for i in runs.index]
    return runs, curves, df


def run_values(
    experiment: str | RunSelection,
    metric: str = "eval_win_rate",
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    include_failed: bool = False,
    where: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One row per run — the values :func:`arm_stats` pools: ``arm``, ``seed``, ``run_id``,
    ``final`` and ``auc`` of ``metric``, ``points`` (its logged values), ``nan_steps`` (steps it
    was not finite: the ``<metric>_nan_steps`` count; 0 when absent), ``judge_calls`` (final,
    cumulative) and the start's ``init_sha256`` tag (None for runs logged before it existed).
    ``experiment`` may be a :class:`RunSelection` instead of the five arguments that make one."""
    selection = RunSelection.of(experiment, uri, sweep, include_failed, where)
    runs, _, _ = run_curves(selection, metric, by)
    cols = runs.attrs.get("metric_keys", {})
    by_key = {k: c for c, k in cols.items()}
    out = pd.DataFrame(
        {
            "arm": runs[by].to_numpy(),
            "seed": runs["seed"].to_numpy() if "seed" in runs else None,
            "run_id": runs["run_id"].to_numpy(),
            "final": runs["_final"].to_numpy(),
            "auc": runs["_auc"].to_numpy(),
            "points": runs["_points"].to_numpy(),
        }
    )
    nan_col = by_key.get(f"{metric}_nan_steps")
    out["nan_steps"] = runs[nan_col].fillna(0).astype(int).to_numpy() if nan_col else 0
    calls = by_key.get("judge_calls")
    out["judge_calls"] = runs[calls].to_numpy() if calls else math.nan
    out["init_sha256"] = runs["init_sha256"].to_numpy() if "init_sha256" in runs else None
    out.attrs.update(metric=metric, by=by, experiment=selection.experiment, sweep=runs.attrs.get("sweep"))
    return out


def arm_stats(
    experiment: str | RunSelection,
    metric: str = "eval_win_rate",
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    baseline: str | None = None,
    reach: float | None = None,
    level: float = 0.95,
    include_failed: bool = False,
    where: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Per arm (``by`` group): over its runs (one per seed) the mean and ``level`` t interval of
    ``metric``'s final logged value (``final``, ``final_lo``, ``final_hi``) and of the area under its
    logged curve (``auc``: trapezoid over the logged steps / step span, see
    :func:`arenabench.stats.curve_auc`), the mean final cumulative ``judge_calls`` and judge
    tokens (:data:`COST_METRICS`, where logged; docs/tokens.md), and ``n``.

    ``reach=f``: ``reach_step`` (+ interval, and ``reached`` = runs that got there) is the first
    logged step where a run's curve reaches ``start + f·(ref − start)``, start = the run's first
    logged value, ref = the final value of the baseline run with the same seed (with
    ``baseline``) or the run's own final value (without).

    ``baseline``: ``d_<quantity>``, ``d_<quantity>_lo/_hi`` and ``p_<quantity>`` (two-sided paired
    t-test) of arm − baseline over seeds matched by the ``seed`` tag (for ``reach_step``, over the
    seeds where both reached). Every arm must hold exactly the baseline's seeds, or ValueError.
    Rows: the baseline first, then by ``final`` descending; ``df.attrs`` records the settings.

    ``where``: keep only the runs matching every ``{key: value}`` (see :func:`select_runs`), e.g.
    ``{"group_size": "4"}`` for one group size of a sweep over several. ``experiment`` may be a
    :class:`RunSelection` instead of the five arguments that make one."""
    from arenabench import stats

    if reach is not None and not 0 < reach <= 1:
        raise ValueError(f"reach must be a fraction in (0, 1]; got {reach}")
    selection = RunSelection.of(experiment, uri, sweep, include_failed, where)
    runs, curves, df = run_curves(selection, metric, by)
    by_key = {k: c for c, k in df.attrs["metric_keys"].items()}
    cost_cols = {m: by_key[m] for m in COST_METRICS if m in by_key}
    arms = sorted(runs[by].dropna().unique(), key=str)
    base = _resolve_baseline(arms, baseline, by) if baseline is not None else None
    seeds = {a: _seed_map(runs[runs[by] == a], a) for a in arms} if base is not None else {}
    if base is not None:
        want = set(seeds[base])
        for a in arms:
            if set(seeds[a]) != want:
                raise ValueError(
                    f"seeds do not match: arm {a!r} has seeds {sorted(seeds[a])}, baseline {base!r} "
                    f"has {sorted(want)}; paired differences need the same seeds in every arm"
                )
    if reach is not None:
        ref = runs["_final"].copy()
        if base is not None:
            base_final = {s: runs.at[i, "_final"] for s, i in seeds[base].items()}
            ref = pd.Series([base_final[str(s)] for s in runs["seed"]], index=runs.index)
        runs["_reach"] = [
            stats.steps_to_reach(
                *curves[i], stats.reach_target(runs.at[i, "_start"], ref[i], reach), runs.at[i, "_start"]
            )
            for i in runs.index
        ]
    quantities = ["final", "auc"] + (["reach_step"] if reach is not None else [])
    col = {"final": "_final", "auc": "_auc", "reach_step": "_reach"}
    rows = []
    for a in arms:
        r = runs[runs[by] == a]
        row = {"arm": a, "n": len(r)}
        row.update({m: float(r[c].mean()) for m, c in cost_cols.items()})
        for q in quantities:
            ci = stats.t_interval(r[col[q]], level)
            row.update({q: ci["mean"], f"{q}_lo": ci["lo"], f"{q}_hi": ci["hi"]})
        if reach is not None:
            row["reached"] = int(r["_reach"].notna().sum())
        if base is not None:
            order = sorted(seeds[base])
            mine, theirs = seeds[a], seeds[base]
            for q in quantities:
                if a == base:
                    row.update({f"d_{q}": math.nan, f"d_{q}_lo": math.nan, f"d_{q}_hi": math.nan})
                    row[f"p_{q}"] = math.nan
                    continue
                x = [runs.at[mine[s], col[q]] for s in order]
                y = [runs.at[theirs[s], col[q]] for s in order]
                d = stats.paired_t(x, y, level)
                row.update(
                    {f"d_{q}": d["mean"], f"d_{q}_lo": d["lo"], f"d_{q}_hi": d["hi"], f"p_{q}": d["p"]}
                )
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_is_base"] = out["arm"] == base
    out = out.sort_values(["_is_base", "final", "arm"], ascending=[False, False, True], kind="stable")
    out = out.drop(columns="_is_base").reset_index(drop=True)
    out.attrs.update(
        metric=metric, by=by, baseline=base, reach=reach, level=level, experiment=selection.experiment,
        sweep=df.attrs.get("sweep"), where=dict(selection.where or {}),
    )  # fmt: skip
    return out


def format_stats(table: pd.DataFrame, fmt: str = "table") -> str:
    """An :func:`arm_stats` frame as ``json`` (records, every number, NaN as null), ``csv`` (every
    number), or a readable ``table`` / ``markdown`` (each quantity as ``mean [lo, hi]``)."""
    if fmt not in STATS_FORMATS:
        raise ValueError(f"format must be one of {', '.join(STATS_FORMATS)}; got {fmt!r}")
    if fmt == "json":
        import json

        recs = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in table.to_dict(orient="records")
        ]
        return json.dumps({"settings": dict(table.attrs), "arms": recs}, indent=2, default=str)
    if fmt == "csv":
        return table.to_csv(index=False).rstrip("\n")
    a = table.attrs
    pct = f"{100 * a.get('level', 0.95):g}%"
    show = pd.DataFrame({"arm": table["arm"], "n": table["n"]})
    for m in COST_METRICS:
        if m in table:
            show[COST_LABELS[m]] = [f"{v:.0f}" for v in table[m]]
    quantities = [q for q in ("final", "auc", "reach_step") if q in table]
    label = {"final": "final", "auc": "AUC", "reach_step": f"step@{a.get('reach')}"}
    for q in quantities:
        show[f"{label[q]} [{pct} CI]"] = [
            _fmt_ci(*v) for v in zip(table[q], table[f"{q}_lo"], table[f"{q}_hi"], strict=True)
        ]
        if q == "reach_step":
            show["reached"] = table["reached"]
    if a.get("baseline") is not None:
        for q in quantities:
            show[f"Δ{label[q]} vs {a['baseline']}"] = [
                _fmt_ci(*v, signed=True)
                for v in zip(table[f"d_{q}"], table[f"d_{q}_lo"], table[f"d_{q}_hi"], strict=True)
            ]
            show[f"p {label[q]}"] = ["" if math.isnan(p) else f"{p:.3g}" for p in table[f"p_{q}"]]
    return format_summary(show, "markdown" if fmt == "markdown" else "table")
