"""Compare training runs logged to MLflow: a table of final metrics per setting over seeds, and
step-wise learning curves (mean over seeds with the 95% CI of the mean).

Runs written by ``arenabench-train`` carry the tags ``constructor``, ``setting`` (the job's hydra
override string without the seed), ``seed``, ``sweep`` (shared by the jobs of one multirun),
``overrides``, ``git_commit`` and ``experiment``, and per-step metrics (``quality_mean``, ``snr``,
``eval_win_rate``, ...). ``arenabench compare --experiment NAME`` is the command-line face.

One module per concern, each reader taking its runs through one value, :class:`RunSelection`
(store, experiment, sweep, unfinished runs, filters; a reader's ``experiment`` argument may be
one):

* ``runs`` — which runs, and reading them: ``RunSelection``, ``find_store``, ``load_runs``,
  ``select_runs``, a run's metric history, the checks every reader shares;
* ``arms`` — statistics over seeds: ``summarize``, ``metric_curves``, ``arm_stats``,
  ``run_values`` and their text formats;
* ``figures`` — curves, collapse panels, frontiers, paired differences, swept settings;
* ``per_run`` — one row per run behind a published table (``runs_table``) and ``--against``
  (``diff_runs``, ``diff_summary``).
"""

from __future__ import annotations

from arenabench.compare.arms import (
    MEAN_STD,
    STATS_FORMATS,
    SUMMARY_FORMATS,
    arm_stats,
    format_stats,
    format_summary,
    metric_curves,
    quarter_change,
    run_curves,
    run_values,
    summarize,
)
from arenabench.compare.figures import (
    METRIC_BOUNDS,
    bare_figure,
    collapse_figure,
    curves_figure,
    figure,
    frontier_plot,
    note_figure,
    paired_difference_figure,
    save_figure,
    stats_frontier_figure,
    sweep_figure,
)
from arenabench.compare.per_run import RUN_KEYS, diff_runs, diff_summary, runs_table
from arenabench.compare.runs import (
    BASE_COLUMNS,
    COST_LABELS,
    COST_METRICS,
    PRIMARY_METRIC,
    PooledArmsWarning,
    RunSelection,
    UnfinishedRunsWarning,
    check_pooling,
    find_store,
    load_runs,
    select_runs,
)

__all__ = [
    "BASE_COLUMNS",
    "COST_LABELS",
    "COST_METRICS",
    "MEAN_STD",
    "METRIC_BOUNDS",
    "PRIMARY_METRIC",
    "RUN_KEYS",
    "STATS_FORMATS",
    "SUMMARY_FORMATS",
    "PooledArmsWarning",
    "RunSelection",
    "UnfinishedRunsWarning",
    "arm_stats",
    "bare_figure",
    "check_pooling",
    "collapse_figure",
    "curves_figure",
    "diff_runs",
    "diff_summary",
    "figure",
    "find_store",
    "format_stats",
    "format_summary",
    "frontier_plot",
    "load_runs",
    "metric_curves",
    "note_figure",
    "paired_difference_figure",
    "quarter_change",
    "run_curves",
    "run_values",
    "runs_table",
    "save_figure",
    "select_runs",
    "stats_frontier_figure",
    "summarize",
    "sweep_figure",
]
