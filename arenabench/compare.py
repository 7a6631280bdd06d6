"""Compare training runs logged to MLflow: a table of final metrics per setting over seeds, and
step-wise learning curves (mean ± std over seeds).

Runs written by ``arenabench-train`` carry the tags ``constructor``, ``setting`` (the job's hydra
override string without the seed), ``seed``, ``sweep`` (shared by the jobs of one multirun),
``overrides``, ``git_commit`` and ``experiment``, and per-step metrics (``quality_mean``, ``snr``,
``eval_win_rate``, ...). ``arenabench compare --experiment NAME`` is the command-line face.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from arenabench.tracking import open_client, search_all, tracking_uri

BASE_COLUMNS = ("run_id", "run_name", "status", "start_time")
SUMMARY_FORMATS = ("table", "markdown", "csv")
MEAN_STD = "mean ± std"


def _client(uri: str | None):
    """An MlflowClient on an existing store (a missing sqlite file is an error, not a new empty
    database)."""
    from mlflow.exceptions import MlflowException

    uri = tracking_uri(uri)
    try:
        return open_client(uri, must_exist=True)
    except MlflowException as exc:
        raise ValueError(f"cannot open MLflow store {uri}: {exc.message}") from exc


def _experiment_id(client, experiment: str) -> str:
    from mlflow.entities import ViewType

    exp = client.get_experiment_by_name(experiment)
    if exp is None or exp.lifecycle_stage != "active":
        names = sorted(e.name for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY))
        raise ValueError(f"unknown experiment {experiment!r}; experiments in the store: {', '.join(names)}")
    return exp.experiment_id


def _select_sweep(df: pd.DataFrame, sweep: str) -> tuple[pd.DataFrame, str | None]:
    """The rows of the requested sweep, and its id (None for "all" / untagged runs)."""
    if sweep == "all" or df.empty:
        return df, None
    if "sweep" not in df.columns or df["sweep"].isna().all():
        if sweep == "latest":
            return df, None  # runs without sweep tags: nothing to tell apart
        raise ValueError(f"unknown sweep {sweep!r}: no run carries a sweep tag")
    tagged = df[df["sweep"].notna()]
    if sweep == "latest":
        starts = tagged.groupby("sweep")["start_time"].agg(["min", "max"])
        sweep = starts.sort_values(["min", "max"]).index[-1]
    elif sweep not in set(tagged["sweep"]):
        raise ValueError(f"unknown sweep {sweep!r}; sweeps: {', '.join(sorted(set(tagged['sweep'])))}")
    return df[df["sweep"] == sweep], str(sweep)


def _load(client, experiment: str, sweep: str, include_failed: bool) -> pd.DataFrame:
    runs = search_all(client, _experiment_id(client, experiment))
    tag_keys = sorted({k for r in runs for k in r.data.tags if not k.startswith("mlflow.")})
    metric_keys = sorted({k for r in runs for k in r.data.metrics})
    taken = set(BASE_COLUMNS) | set(tag_keys)
    metric_cols = {k: (f"metrics.{k}" if k in taken else k) for k in metric_keys}
    rows = []
    for r in runs:
        if not include_failed and r.info.status != "FINISHED":
            continue
        row = {
            "run_id": r.info.run_id,
            "run_name": r.info.run_name,
            "status": r.info.status,
            "start_time": pd.to_datetime(r.info.start_time, unit="ms", utc=True),
        }
        row.update({k: r.data.tags.get(k) for k in tag_keys})
        # run.data.metrics holds each metric's value at its largest step: the last value
        row.update({metric_cols[k]: r.data.metrics.get(k, math.nan) for k in metric_keys})
        rows.append(row)
    df = pd.DataFrame(rows, columns=[*BASE_COLUMNS, *tag_keys, *metric_cols.values()])
    df, sweep_id = _select_sweep(df, sweep)
    df = df.sort_values("start_time", kind="stable").reset_index(drop=True)
    df.attrs.update(
        experiment=experiment,
        sweep=sweep_id,
        tags=tag_keys,
        metrics=list(metric_cols.values()),
        metric_keys={c: k for k, c in metric_cols.items()},
    )
    return df


def load_runs(
    experiment: str, uri: str | None = None, sweep: str = "latest", include_failed: bool = False
) -> pd.DataFrame:
    """One row per run of ``experiment``: ``run_id``, ``run_name``, ``status``, ``start_time``
    (UTC), every user tag (``constructor``, ``setting``, ``seed``, ``sweep``, ... as strings) and
    every metric's last value (the value at its largest step; a metric whose name clashes with a
    tag becomes ``metrics.<name>``). Only FINISHED runs unless ``include_failed``.

    ``sweep``: ``"latest"`` keeps the runs of the sweep (``sweep`` tag) that started last among
    the runs kept, ``"all"`` every run, anything else is a sweep id. An unknown experiment or
    sweep id raises ValueError listing the ones there are. ``df.attrs`` records the metric
    columns (``"metrics"``) and the sweep id kept (``"sweep"``; None for ``"all"``)."""
    return _load(_client(uri), experiment, sweep, include_failed)


def _metric_columns(df: pd.DataFrame) -> list[str]:
    if "metrics" in df.attrs:
        return [c for c in df.attrs["metrics"] if c in df.columns]
    return [c for c in df.columns if c not in BASE_COLUMNS and pd.api.types.is_numeric_dtype(df[c])]


def _check_metric(df: pd.DataFrame, metric: str) -> None:
    available = _metric_columns(df)
    if metric not in available:
        raise ValueError(f"unknown metric {metric!r}; available: {', '.join(available) or '(none)'}")


def _check_by(df: pd.DataFrame, by: str) -> None:
    if by not in df.columns:
        raise ValueError(f"cannot group by {by!r}; columns: {', '.join(map(str, df.columns))}")


def _fmt_mean_std(mean: float, std: float) -> str:
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def summarize(df: pd.DataFrame, metric: str = "eval_win_rate", by: str = "setting") -> pd.DataFrame:
    """Per ``by`` group: ``n`` (runs — one per seed — with a value for ``metric``), ``mean``,
    ``std`` (ddof=1; NaN for a single seed) and a formatted ``mean ± std`` column, sorted by mean
    descending. An unknown metric raises ValueError listing the available ones."""
    if df.empty:
        raise ValueError("no runs to summarize")
    _check_metric(df, metric)
    _check_by(df, by)
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
        cols = list(summary.columns)

        def cell(v) -> str:
            if isinstance(v, float):
                return "" if math.isnan(v) else f"{v:.3f}"
            return str(v)

        lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in summary.itertuples(index=False)]
        return "\n".join(lines)
    return summary.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="")


def _history(client, run_id: str, metric: str) -> pd.DataFrame:
    hist = client.get_metric_history(run_id, metric)
    h = pd.DataFrame([(m.step, m.timestamp, m.value) for m in hist], columns=["step", "timestamp", "value"])
    # a step logged twice (a resumed job): its last value counts
    return h.sort_values(["step", "timestamp"], kind="stable").drop_duplicates("step", keep="last")


def metric_curves(
    experiment: str,
    metric: str,
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    path: str | Path | None = None,
    include_failed: bool = False,
    smooth: int = 1,
) -> pd.DataFrame:
    """Step-wise ``metric`` per ``by`` group, averaged over the group's runs (seeds): returns
    ``step, group, mean, std, n`` (std ddof=1, NaN where one run has the step) and, if ``path``
    is given, writes a PNG of the mean per group with a ±std band versus step. ``smooth > 1``
    replaces mean and std by their trailing rolling mean over that many logged steps (noisy
    per-step metrics such as SNR); the raw values are in ``raw_mean``."""
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1 (1 = no smoothing); got {smooth}")
    client = _client(uri)
    df = _load(client, experiment, sweep, include_failed)
    if df.empty:
        raise ValueError(f"no runs in experiment {experiment!r} (sweep {sweep!r})")
    _check_metric(df, metric)
    _check_by(df, by)
    key = df.attrs["metric_keys"][metric]  # the MLflow key behind the column
    parts = []
    for run_id, group in zip(df["run_id"], df[by], strict=True):
        h = _history(client, run_id, key)
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
        _plot_curves(curves, Path(path), metric, title=f"{experiment}: {metric}, mean ± std over seeds")
    return curves


def _plot_curves(curves: pd.DataFrame, path: Path, metric: str, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.8))
    FigureCanvasAgg(fig)  # Agg, without touching pyplot's global backend
    ax = fig.add_subplot()
    for group, c in curves.groupby("group", sort=True):
        x, m = c["step"].to_numpy(), c["mean"].to_numpy()
        s = np.nan_to_num(c["std"].to_numpy(), nan=0.0)
        (line,) = ax.plot(x, m, label=f"{group} (n={int(c['n'].max())})", lw=1.6)
        ax.fill_between(x, m - s, m + s, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


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


def frontier_plot(
    df: pd.DataFrame, x: str = "judge_calls", y: str = "eval_win_rate", by: str = "constructor", path=None
):
    """Mean ± std of ``y`` against mean ``x`` per group (one point per constructor): the
    training-time analogue of the fidelity frontier. Returns the matplotlib Figure (shown inline
    in a notebook) and writes a PNG if ``path`` is given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    for metric in (x, y):
        _check_metric(df, metric)
    _check_by(df, by)
    g = df.groupby(by)[[x, y]]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.errorbar(mean[x], mean[y], yerr=std[y], fmt="o", capsize=3)
    for name, row in mean.iterrows():
        ax.annotate(str(name), (row[x], row[y]), fontsize=8, xytext=(4, 4), textcoords="offset points")
    if (mean[x] > 0).all():
        ax.set_xscale("log")
    ax.set_xlabel(f"{x} (final, mean over seeds)")
    ax.set_ylabel(f"{y} (final, mean ± std)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig
