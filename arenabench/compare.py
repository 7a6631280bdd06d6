"""Compare training runs logged to MLflow: a table of final metrics per setting over seeds, and
step-wise learning curves (mean over seeds with the 95% CI of the mean).

Runs written by ``arenabench-train`` carry the tags ``constructor``, ``setting`` (the job's hydra
override string without the seed), ``seed``, ``sweep`` (shared by the jobs of one multirun),
``overrides``, ``git_commit`` and ``experiment``, and per-step metrics (``quality_mean``, ``snr``,
``eval_win_rate``, ...). ``arenabench compare --experiment NAME`` is the command-line face.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from arenabench.tracking import open_client, search_all, tracking_uri

BASE_COLUMNS = ("run_id", "run_name", "status", "start_time")
PRIMARY_METRIC = "eval_sampled_quality"  # the local trainer's: expected true quality at T = 1


class UnfinishedRunsWarning(UserWarning):
    """Runs of the compared sweep that are not FINISHED (running or failed) were left out."""


class PooledArmsWarning(UserWarning):
    """A ``by`` group holds runs of several settings (arms): its n and mean pool them."""


def check_pooling(df: pd.DataFrame, by: str) -> dict[str, list[str]]:
    """Groups of ``by`` that pool several arms: ``{group: its settings}``, with a warning. An arm
    is the experiment's *setting* (the job's overrides less the seed): ``--by constructor`` puts
    ``pointwise`` and ``pointwise_budget`` (constructor ``pointwise``, ``votes=4``) in one group,
    whose n then counts each seed twice."""
    if by == "setting" or "setting" not in df.columns or by not in df.columns:
        return {}
    pooled = {
        str(g): sorted(map(str, sub["setting"].dropna().unique()))
        for g, sub in df.groupby(by, dropna=False)
        if sub["setting"].nunique() > 1
    }
    if pooled:
        desc = "; ".join(f"{g!r}: {' | '.join(v)}" for g, v in sorted(pooled.items()))
        warnings.warn(
            f"grouping by {by!r} pools different arms (settings) — {desc}; their runs are counted "
            "and averaged together. Group by setting (the default) to compare arms",
            PooledArmsWarning,
            stacklevel=3,
        )
    return pooled


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
    rows, unfinished = [], []
    for r in runs:
        if not include_failed and r.info.status != "FINISHED":
            unfinished.append((r.data.tags.get("sweep"), r.info.status))
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
    left_out = Counter(st for sw, st in unfinished if sweep_id is None or sw == sweep_id)
    if left_out:
        where = f"sweep {sweep_id}" if sweep_id else f"experiment {experiment!r}"
        counts = ", ".join(f"{n} {st}" for st, n in sorted(left_out.items()))
        warnings.warn(
            f"{sum(left_out.values())} run(s) of {where} did not finish ({counts}) and are left out: "
            "a sweep still running, or jobs that failed (rerun the sweep's command: finished jobs "
            "are skipped)",
            UnfinishedRunsWarning,
            stacklevel=3,
        )
    df.attrs.update(
        experiment=experiment,
        sweep=sweep_id,
        unfinished=dict(left_out),
        tags=tag_keys,
        metrics=list(metric_cols.values()),
        metric_keys={c: k for k, c in metric_cols.items()},
    )
    return df


def find_store(uri: str | None = None) -> str:
    """The store a reader means when they name none (``arenabench compare``, the notebooks; one
    rule, stated here and in README.md's tour):

    1. ``uri`` if given, else ``$MLFLOW_TRACKING_URI``;
    2. else ``results/mlflow.db`` at the repository root if that file exists (what
       ``arenabench-train`` and ``make tables`` write);
    3. else ``results/demo/mlflow.db`` if it exists (what ``make demo`` writes);
    4. else ``results/mlflow.db`` (a missing store is then reported by whoever opens it).

    The repository root is found from the current directory upwards (Jupyter starts a notebook's
    kernel in ``notebooks/``, where a relative ``results/mlflow.db`` would name a new, empty
    store), else next to the installed package. Writers (``arenabench-train``, the report scripts)
    keep :func:`arenabench.tracking.tracking_uri`'s default, so a report never reads the demo's
    store by accident."""
    import os

    if uri or os.environ.get("MLFLOW_TRACKING_URI"):
        return tracking_uri(uri)
    here = Path.cwd().resolve()
    roots = [
        d
        for d in (here, *here.parents)
        if (d / "conf" / "train.yaml").exists() and (d / "pyproject.toml").exists()
    ]
    root = roots[0] if roots else Path(__file__).resolve().parents[1]
    main, demo = root / "results" / "mlflow.db", root / "results" / "demo" / "mlflow.db"
    return f"sqlite:///{demo if demo.exists() and not main.exists() else main}"


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


def _history(client, run_id: str, metric: str) -> pd.DataFrame:
    hist = client.get_metric_history(run_id, metric)
    h = pd.DataFrame([(m.step, m.timestamp, m.value) for m in hist], columns=["step", "timestamp", "value"])
    # a step logged twice (a resumed job): its last value counts
    return h.sort_values(["step", "timestamp"], kind="stable").drop_duplicates("step", keep="last")


def select_runs(df: pd.DataFrame, where: dict[str, str] | None) -> pd.DataFrame:
    """The rows of ``df`` matching every ``{key: value}`` of ``where`` (None or {}: all rows): a
    column named ``key`` must equal ``value`` (as strings; a list/tuple/set value: be one of
    them), else the run's ``overrides`` tag must hold the token ``key=value`` (e.g.
    ``group_size=4``, swept on the command line)."""
    if not where:
        return df
    keep = pd.Series(True, index=df.index)
    for k, v in where.items():
        if k in df.columns and isinstance(v, (list, tuple, set)):
            keep &= df[k].astype(str).isin({str(x) for x in v})
        elif k in df.columns:
            keep &= df[k].astype(str) == str(v)
        elif "overrides" in df.columns:
            keep &= df["overrides"].fillna("").map(lambda o, t=f"{k}={v}": t in str(o).split())
        else:
            raise ValueError(f"cannot select on {k!r}: no such column and no 'overrides' tag")
    out = df[keep].copy()
    out.attrs.update(df.attrs)
    return out


def _runs_for(uri, experiment: str, sweep: str, include_failed: bool, where, metric: str, by: str):
    """(client, the selected runs, the MLflow key of ``metric``): the shared start of every reader
    of per-step histories; one clear error for no runs, an unknown metric or grouping column."""
    client = _client(uri)
    df = select_runs(_load(client, experiment, sweep, include_failed), where)
    if df.empty:
        raise ValueError(f"no runs in experiment {experiment!r} (sweep {sweep!r}, where {where})")
    _check_metric(df, metric)
    _check_by(df, by)
    check_pooling(df, by)
    return client, df, df.attrs["metric_keys"][metric]  # the MLflow key behind the column


def metric_curves(
    experiment: str,
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
    :func:`select_runs`."""
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1 (1 = no smoothing); got {smooth}")
    client, df, key = _runs_for(uri, experiment, sweep, include_failed, where, metric, by)
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
        _plot_curves(curves, Path(path), metric, title=f"{experiment}: {_curves_what(metric)}")
    return curves


def _figure(size=(8, 4.8), ncols: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)  # Agg, without touching pyplot's global backend
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


def _curves_what(metric: str, smooth: str = "") -> str:
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
        fig, (ax,) = _figure()
        for group, c in groups:
            draw(ax, group, c)
        ax.set_xlabel("training step")
        ax.set_ylabel(metric_label(metric), fontsize=9)
        ax.set_title(_fit(fig, title or _curves_what(metric), share=0.9), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        save_figure(fig, path)
        return fig
    ncols = min(len(groups), 5)
    nrows = math.ceil(len(groups) / ncols)
    fig = _bare_figure((2.9 * ncols + 0.8, 2.3 * nrows + 1.2))
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax, (group, c) in zip(axes, groups, strict=False):
        for other, d in groups:
            if other != group:
                ax.plot(d["step"], d["mean"], lw=0.7, color="0.75", zorder=1)
        draw(ax, group, c, label=False)
        ax.set_title(f"{group} (n={int(c['n'].max())})", fontsize=9, color=arm_color(group))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    for ax in axes[(nrows - 1) * ncols :]:
        ax.set_xlabel("training step", fontsize=8)
    for ax in axes[len(groups) - ncols : len(groups)]:
        ax.xaxis.set_tick_params(labelbottom=True)
    for ax in axes[::ncols]:
        ax.set_ylabel(metric_label(metric).replace(" (", "\n("), fontsize=7)
    fig.suptitle(_fit(fig, (title or _curves_what(metric)) + "\n(grey: the other arms' means)"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def note_figure(title: str, note: str, path=None, size=(8, 4.8)):
    """A panel that says why a figure has nothing to draw (e.g. SNR under a temperature-0 judge,
    whose re-asked scores never differ: σ_noise = 0, the ratio undefined), in place of a silently
    absent PNG."""
    import textwrap

    fig, (ax,) = _figure(size=size)
    ax.set_axis_off()
    ax.text(0.5, 0.5, textwrap.fill(note, 70), ha="center", va="center", fontsize=10, wrap=True,
            transform=ax.transAxes, bbox={"boxstyle": "round", "fc": "0.95", "ec": "0.6"})  # fmt: skip
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def _plot_curves(curves: pd.DataFrame, path: Path, metric: str, title: str) -> None:
    curves_figure(curves, metric, title=title, path=path)


def collapse_figure(sigma_group: pd.DataFrame, sigma_noise: pd.DataFrame, title: str = "", path=None):
    """Discriminative collapse (ArenaRL Fig. 1a): per arm, the in-group spread of pointwise judge
    scores σ_group (solid) against the re-judging noise σ_noise (dashed) over steps, both
    :func:`metric_curves` frames (mean over seeds). Small multiples, one panel per arm on shared
    axes, so that ten arms stay readable; the panel where σ_group ends lowest is read against the
    others' without a 20-entry legend."""
    from arenabench.reporting import arm_color

    groups = sorted(set(sigma_group["group"]), key=str)
    ncols = min(len(groups), 5) or 1
    nrows = max(math.ceil(len(groups) / ncols), 1)
    fig = _bare_figure((2.9 * ncols + 0.6, 2.4 * nrows + 0.9))
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
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
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    for ax in axes[(nrows - 1) * ncols :]:
        ax.set_xlabel("training step", fontsize=8)
    for ax in axes[::ncols]:
        ax.set_ylabel("SD of judge scores\n(score units)", fontsize=8)
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(_fit(fig, title or "σ_group (solid) vs σ_noise (dashed), mean over seeds"), fontsize=10)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def _bare_figure(size):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)  # Agg, without touching pyplot's global backend
    return fig


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
    """Mean of ``y`` with its 95% t interval over runs against mean ``x`` per group (one point per
    constructor, in its colour): the training-time analogue of the fidelity frontier. Returns the
    matplotlib Figure (shown inline in a notebook) and writes a PNG if ``path`` is given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    for metric in (x, y):
        _check_metric(df, metric)
    _check_by(df, by)
    from arenabench.reporting import arm_color, metric_label, t_half_width

    g = df.groupby(by)[[x, y]]
    mean, std, n = g.mean(), g.std(ddof=1).fillna(0.0), g.count()
    half = pd.Series(np.nan_to_num(t_half_width(std[y], n[y])), index=mean.index)
    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
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
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig


# --------------------------------------------------------------------------- statistics over seeds

STATS_FORMATS = ("table", "markdown", "csv", "json")
# what an arm paid, beside every number: cumulative judge calls and the run's judge tokens
# (prefill, of it served from a prefix cache, decode; arenabench.judges.stack), final values
COST_METRICS = (
    "judge_calls",
    "judge_prompt_tokens_total",
    "judge_cached_prompt_tokens_total",
    "judge_completion_tokens_total",
)
COST_LABELS = dict(
    zip(COST_METRICS, ("judge_calls", "prefill_tokens", "cached_tokens", "decode_tokens"), strict=True)
)


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


def _run_curves(uri, experiment: str, sweep: str, include_failed: bool, where, metric: str, by: str):
    """(runs with ``_final``/``_start``/``_auc``/``_points``, ``{row: (steps, values)}``, all
    selected runs): every run's logged curve of ``metric``; runs without one are left out."""
    from arenabench import stats

    client, df, key = _runs_for(uri, experiment, sweep, include_failed, where, metric, by)
    curves, keep = {}, []
    for idx, run_id in zip(df.index, df["run_id"], strict=True):
        h = _history(client, run_id, key)
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
    experiment: str,
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
    cumulative) and the start's ``init_sha256`` tag (None for runs logged before it existed)."""
    runs, _, _ = _run_curves(uri, experiment, sweep, include_failed, where, metric, by)
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
    out.attrs.update(metric=metric, by=by, experiment=experiment, sweep=runs.attrs.get("sweep"))
    return out


def arm_stats(
    experiment: str,
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
    ``{"group_size": "4"}`` for one group size of a sweep over several."""
    from arenabench import stats

    if reach is not None and not 0 < reach <= 1:
        raise ValueError(f"reach must be a fraction in (0, 1]; got {reach}")
    runs, curves, df = _run_curves(uri, experiment, sweep, include_failed, where, metric, by)
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
        metric=metric, by=by, baseline=base, reach=reach, level=level, experiment=experiment,
        sweep=df.attrs.get("sweep"), where=dict(where or {}),
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


# --------------------------------------------------------------------------- figures of arm_stats


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
    fig, axes = _figure(size=(4.2 * len(quantities) + 1.2, 0.45 * len(rows) + 1.6), ncols=len(quantities))
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

    fig, (ax,) = _figure(size=(8, 5))
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

    fig, (ax,) = _figure(size=(7, 4.5))
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


# --------------------------------------------------------------------------- one row per run

RUN_KEYS = ("arm", "seed")  # what identifies a run of a committed per-run table (+ group_size)


def _pooled_rate(client, run_id: str, rate: str, count: str) -> float:
    """Σ rate·count / Σ count over a run's steps (e.g. ties per answered comparison over the whole
    run: steps with no comparison weigh nothing); NaN when nothing was counted."""
    r, c = _history(client, run_id, rate), _history(client, run_id, count)
    m = r.merge(c, on="step", suffixes=("_r", "_c"))
    total = float(m["value_c"].sum())
    return float((m["value_r"] * m["value_c"]).sum() / total) if total > 0 else math.nan


def runs_table(
    experiment: str,
    metrics,
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    where: dict[str, str] | None = None,
    pooled: dict[str, tuple[str, str]] | None = None,
    params: tuple[str, ...] = (),
) -> pd.DataFrame:
    """The per-run values behind a published table, one row per run: ``arm`` (the ``by`` tag;
    ``arm_by`` names it), ``seed``, ``run_id``, ``init_sha256`` (the start's content hash),
    ``judge_calls``, and per metric ``<m>_final``, ``<m>_auc``, ``<m>_points`` (logged values) and
    ``<m>_nan_steps`` (steps it was not finite); ``pooled={name: (rate, count)}`` adds Σ rate·count
    / Σ count over the run (e.g. ``tie_rate``); ``params``: run params as columns (dots → ``_``).
    Written as ``results/train/<experiment>_runs.csv`` and read back by :func:`diff_runs`."""
    metrics = list(metrics)
    first = run_values(experiment, metrics[0], uri, sweep, by, where=where)
    out = first[["arm", "seed", "run_id", "init_sha256", "judge_calls"]].copy()
    out.insert(1, "arm_by", by)
    for m in metrics:
        v = first if m == metrics[0] else run_values(experiment, m, uri, sweep, by, where=where)
        v = v.set_index("run_id")
        for q in ("final", "auc", "points", "nan_steps"):
            out[f"{m}_{q}"] = out["run_id"].map(v[q])
    if pooled or params:
        client = _client(uri)
        for name, (rate, count) in (pooled or {}).items():
            out[name] = [_pooled_rate(client, r, rate, count) for r in out["run_id"]]
        for p in params:
            got = [client.get_run(r).data.params.get(p) for r in out["run_id"]]
            out[p.replace(".", "_")] = got
    out = out.sort_values(["arm", "seed"], key=lambda c: c.map(_natural), kind="stable")
    out.attrs.update(experiment=experiment, by=by, metrics=metrics)
    return out.reset_index(drop=True)


def _natural(v):
    s = str(v)
    return (0, int(s), "") if s.lstrip("-").isdigit() else (1, 0, s)


def diff_runs(committed: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """Run by run (matched on arm, seed and, where both have it, group_size): every quantity both
    tables hold — numbers and the ``init_sha256`` hash — committed vs rerun, their difference and
    ``same`` (exactly equal: bit for bit, as CSV floats round-trip). Runs present on one side only
    appear with the other side empty."""
    keys = [*RUN_KEYS, *(["group_size"] if {"group_size"} <= set(committed) & set(rerun) else [])]
    skip = {*keys, "arm_by", "run_id", "experiment", "init_source"}
    shared = [c for c in committed.columns if c in rerun.columns and c not in skip]
    a = committed.assign(**{k: committed[k].astype(str) for k in keys})
    b = rerun.assign(**{k: rerun[k].astype(str) for k in keys})
    m = a.merge(b, on=keys, how="outer", suffixes=("@committed", "@rerun"), indicator=True)
    rows = []
    for _, r in m.iterrows():
        for c in shared:
            x, y = r[f"{c}@committed"], r[f"{c}@rerun"]
            num = c != "init_sha256"
            if num:
                x, y = pd.to_numeric(x, errors="coerce"), pd.to_numeric(y, errors="coerce")
                same = (x == y) or (math.isnan(x) and math.isnan(y) and r["_merge"] == "both")
                d = y - x
            else:
                same, d = (x == y) and isinstance(x, str), math.nan
            rows.append(
                {**{k: r[k] for k in keys}, "quantity": c, "committed": x, "rerun": y, "diff": d,
                 "same": bool(same), "present": str(r["_merge"]).replace("_only", "")}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=[*keys, "quantity", "committed", "rerun", "diff", "same", "present"])


def diff_summary(diff: pd.DataFrame) -> str:
    """A few lines: runs matched, how many are identical in every quantity, the checkpoint hashes,
    and per quantity the largest |difference| and the mean difference (rerun − committed)."""
    keys = [c for c in (*RUN_KEYS, "group_size") if c in diff]
    both = diff[diff["present"] == "both"]
    per_run = both.groupby(keys)["same"].all()
    lines = [
        f"{len(per_run)} runs in both; {int(per_run.sum())} identical in every quantity; "
        f"{diff[diff['present'] != 'both'].groupby(keys).ngroups} on one side only"
    ]
    h = both[both["quantity"] == "init_sha256"]
    if len(h):
        lines.append(f"checkpoint hash (init_sha256) equal in {int(h['same'].sum())} of {len(h)} runs")
    for q, g in both[both["quantity"] != "init_sha256"].groupby("quantity", sort=False):
        d = g["diff"].astype(float)
        if d.notna().any():
            lines.append(
                f"{q}: {int(g['same'].sum())}/{len(g)} identical, max |Δ| {d.abs().max():.3g}, "
                f"mean Δ {d.mean():+.3g}"
            )
    return "\n".join(lines)
