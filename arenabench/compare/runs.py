"""Which runs a reader means, and reading them: the run-selection value (``RunSelection``: store,
experiment, sweep, unfinished runs, filters), the store a reader means when they name none
(``find_store``), one row per run (``load_runs``, ``select_runs``), a run's metric history and the
checks every reader shares (an unknown metric or grouping column, arms pooled by a grouping)."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from arenabench.tracking import open_client, search_all, tracking_uri

BASE_COLUMNS = ("run_id", "run_name", "status", "start_time")
PRIMARY_METRIC = "eval_sampled_quality"  # the local trainer's: expected true quality at T = 1


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


@dataclass(frozen=True)
class RunSelection:
    """Which runs a reader means: the MLflow store (``uri``; None: :func:`find_store`'s rule is
    the caller's, :func:`arenabench.tracking.tracking_uri`'s default here), the ``experiment``,
    the ``sweep`` (``"latest"``: the sweep that started last, ``"all"``, or a sweep id), whether
    runs that did not finish count (``include_failed``), and ``where`` (:func:`select_runs`'
    filters; None: every run). Every reader of this package takes its runs through one."""

    experiment: str
    uri: str | None = None
    sweep: str = "latest"
    include_failed: bool = False
    where: Mapping[str, Any] | None = None

    @classmethod
    def of(
        cls,
        experiment: str | RunSelection,
        uri: str | None = None,
        sweep: str = "latest",
        include_failed: bool = False,
        where: Mapping[str, Any] | None = None,
    ) -> RunSelection:
        """The selection a reader's arguments name: ``experiment`` itself when it is one (the other
        arguments then left at their defaults), else the selection they make."""
        if not isinstance(experiment, RunSelection):
            return cls(experiment, uri, sweep, include_failed, where)
        if uri is not None or sweep != "latest" or include_failed or where is not None:
            raise ValueError(
                "name the runs once: a RunSelection, or experiment, uri, sweep, include_failed and where"
            )
        return experiment

    def client(self):
        """An MlflowClient on the selection's store (:func:`store_client`)."""
        return store_client(self.uri)

    def runs(self, client=None) -> pd.DataFrame:
        """One row per selected run (:func:`load_runs`' columns and ``attrs``), ``where`` applied."""
        return select_runs(_load(client if client is not None else self.client(), self), self.where)


def store_client(uri: str | None):
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


def _load(client, selection: RunSelection) -> pd.DataFrame:
    experiment, sweep = selection.experiment, selection.sweep
    runs = search_all(client, _experiment_id(client, experiment))
    tag_keys = sorted({k for r in runs for k in r.data.tags if not k.startswith("mlflow.")})
    metric_keys = sorted({k for r in runs for k in r.data.metrics})
    taken = set(BASE_COLUMNS) | set(tag_keys)
    metric_cols = {k: (f"metrics.{k}" if k in taken else k) for k in metric_keys}
    rows, unfinished = [], []
    for r in runs:
        if not selection.include_failed and r.info.status != "FINISHED":
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
            stacklevel=4,
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
    root = roots[0] if roots else Path(__file__).resolve().parents[2]
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
    return RunSelection(experiment, uri, sweep, include_failed).runs()


def _metric_columns(df: pd.DataFrame) -> list[str]:
    if "metrics" in df.attrs:
        return [c for c in df.attrs["metrics"] if c in df.columns]
    return [c for c in df.columns if c not in BASE_COLUMNS and pd.api.types.is_numeric_dtype(df[c])]


def check_metric(df: pd.DataFrame, metric: str) -> None:
    available = _metric_columns(df)
    if metric not in available:
        raise ValueError(f"unknown metric {metric!r}; available: {', '.join(available) or '(none)'}")


def check_by(df: pd.DataFrame, by: str) -> None:
    if by not in df.columns:
        raise ValueError(f"cannot group by {by!r}; columns: {', '.join(map(str, df.columns))}")


def history(client, run_id: str, metric: str) -> pd.DataFrame:
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


def runs_for(selection: RunSelection, metric: str, by: str):
    """(client, the selected runs, the MLflow key of ``metric``): the shared start of every reader
    of per-step histories; one clear error for no runs, an unknown metric or grouping column."""
    client = selection.client()
    df = selection.runs(client)
    if df.empty:
        s = selection
        raise ValueError(f"no runs in experiment {s.experiment!r} (sweep {s.sweep!r}, where {s.where})")
    check_metric(df, metric)
    check_by(df, by)
    check_pooling(df, by)
    return client, df, df.attrs["metric_keys"][metric]  # the MLflow key behind the column
