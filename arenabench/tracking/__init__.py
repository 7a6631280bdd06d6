"""Experiment tracking (MLflow). ``import arenabench.tracking`` stays light: mlflow itself is
imported only when a :class:`Tracker` is opened or a store is read.

Modules, by concern: :mod:`~arenabench.tracking.store` (URI, sqlite file, lock, experiments),
:mod:`~arenabench.tracking.ownership` (owners of runs, dead runs, finished runs),
:mod:`~arenabench.tracking.resume` (a resumed job's run continues its predecessor's),
:mod:`~arenabench.tracking.params` (flattening and MLflow's limits),
:mod:`~arenabench.tracking.tags` (provenance and the job tags both apps use),
:mod:`~arenabench.tracking.tracker` (:class:`RunLogger`, :class:`Tracker`). Import from here.
"""

from arenabench.tracking.ownership import fail_dead_runs, finished_run, owner_alive, owner_tags
from arenabench.tracking.params import (
    METRICS_PER_BATCH,
    PARAM_VALUE_LIMIT,
    PARAMS_TAGS_PER_BATCH,
    TAG_VALUE_LIMIT,
    flatten,
    json_safe,
    truncate,
)
from arenabench.tracking.resume import carry_history, continue_run, previous_run
from arenabench.tracking.store import (
    DEFAULT_URI,
    HTTP_RETRY_DEFAULTS,
    artifact_dir,
    bound_http_retries,
    check_server,
    check_store_folder,
    get_or_create_experiment,
    is_server,
    lock_for,
    open_client,
    preimport_store,
    search_all,
    server_unavailable,
    sqlite_path,
    tracking_uri,
)
from arenabench.tracking.tags import IDENTITY_TAG, build_job_tags, git_commit
from arenabench.tracking.tracker import (
    STATUSES,
    Killed,
    RunLogger,
    Tracker,
    TrackingUnavailable,
    source_tags,
    status_for,
)

__all__ = [
    "DEFAULT_URI",
    "HTTP_RETRY_DEFAULTS",
    "IDENTITY_TAG",
    "Killed",
    "METRICS_PER_BATCH",
    "PARAMS_TAGS_PER_BATCH",
    "PARAM_VALUE_LIMIT",
    "STATUSES",
    "TAG_VALUE_LIMIT",
    "RunLogger",
    "Tracker",
    "TrackingUnavailable",
    "artifact_dir",
    "bound_http_retries",
    "check_server",
    "build_job_tags",
    "check_store_folder",
    "carry_history",
    "continue_run",
    "fail_dead_runs",
    "finished_run",
    "flatten",
    "get_or_create_experiment",
    "git_commit",
    "is_server",
    "json_safe",
    "lock_for",
    "open_client",
    "owner_alive",
    "owner_tags",
    "preimport_store",
    "previous_run",
    "search_all",
    "server_unavailable",
    "source_tags",
    "sqlite_path",
    "status_for",
    "tracking_uri",
    "truncate",
]
