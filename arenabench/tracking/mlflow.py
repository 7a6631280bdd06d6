"""MLflow tracking for training jobs: one :class:`Tracker` = one MLflow run.

The default store is MLflow 3's sqlite backend (``sqlite:///results/mlflow.db``). Parallel hydra
jobs (the joblib launcher runs them in separate processes) share that one database file, and
SQLite + MLflow do not survive concurrent first use: every process that connects to a fresh
database runs MLflow's table creation / alembic migrations, and the losers fail with
``table ... already exists`` / ``duplicate column name``. Every touch of the store here therefore
happens under :func:`lock_for` — an exclusive ``fcntl.flock`` on ``<db path>.lock`` — covering the
first connect, experiment get-or-create, run creation, each metric flush, artifact logging and
the end of the run. Writes are serialized; a job holds the lock only for one short transaction.

Crash safety. A job killed with SIGKILL cannot close its run, which would stay RUNNING for
ever. Every run therefore records its owner (``owner_host``, ``owner_pid``, ``owner_start`` —
the process start time, so a recycled pid is not mistaken for the owner), and a run opened with
an ``identity`` (the ``job_key`` tag: what makes two jobs the same job) first marks FAILED every
RUNNING run of that identity whose owner process is gone. :func:`finished_run` finds a FINISHED
run of an identity, so a restarted sweep can skip what already finished.

``mlflow`` is imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_URI = "sqlite:///results/mlflow.db"

# MLflow's per-value / per-call limits (mlflow.utils.validation), restated so this module need
# not import mlflow to apply them.
PARAM_VALUE_LIMIT = 6000
TAG_VALUE_LIMIT = 8000
METRICS_PER_BATCH = 1000
PARAMS_TAGS_PER_BATCH = 100

_STATUSES = ("FINISHED", "FAILED", "KILLED")
IDENTITY_TAG = "job_key"


# --------------------------------------------------------------------------- URIs and locking


def _sqlite_parts(uri: str) -> tuple[str, str, str] | None:
    """``(scheme, path, query)`` of a file-backed sqlite URI; None for other schemes and for
    in-memory databases (``sqlite://``, ``sqlite:///:memory:``)."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return None
    path, qsep, query = rest[1:].partition("?")
    if path in ("", ":memory:"):
        return None
    return scheme, path, qsep + query


def tracking_uri(uri: str | None = None) -> str:
    """The tracking URI to use: ``uri`` if given, else ``$MLFLOW_TRACKING_URI``, else
    :data:`DEFAULT_URI`. A sqlite URI with a relative path is made absolute (relative to the
    current directory, so that every job of a sweep and a later ``arenabench compare`` agree on
    the file) and the database's parent directory is created."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    parts = _sqlite_parts(uri)
    if parts is None:
        return uri
    scheme, path, query = parts
    p = Path(path)
    if not p.is_absolute():
        p = Path.cwd() / p
        uri = f"{scheme}:///{p}{query}"  # p starts with "/": sqlite:////abs/path.db
    p.parent.mkdir(parents=True, exist_ok=True)
    return uri


def sqlite_path(uri: str | None = None) -> Path | None:
    """The database file behind a sqlite tracking URI (resolved as :func:`tracking_uri` does);
    None for other stores."""
    parts = _sqlite_parts(tracking_uri(uri))
    return None if parts is None else Path(parts[1])


class _FileLock:
    """An exclusive flock on one file, reentrant within a thread and exclusive across threads
    (flock alone conflicts between open file descriptions, so a nested acquire in the same
    thread would deadlock)."""

    def __init__(self, path: Path):
        self.path = path
        self.rlock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None

    def acquire(self) -> None:
        self.rlock.acquire()
        try:
            if self.depth == 0:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self.fd = fd
            self.depth += 1
        except BaseException:
            self.rlock.release()
            raise

    def release(self) -> None:
        try:
            self.depth -= 1
            if self.depth == 0 and self.fd is not None:
                fd, self.fd = self.fd, None
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)
        finally:
            self.rlock.release()


_LOCKS: dict[str, _FileLock] = {}
_LOCKS_GUARD = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child must not inherit a held lock: drop its copy of the descriptor (closing it
    # leaves the parent's flock alone; LOCK_UN would release it for the parent too).
    global _LOCKS_GUARD
    for lock in _LOCKS.values():
        if lock.fd is not None:
            with contextlib.suppress(OSError):
                os.close(lock.fd)
    _LOCKS.clear()
    _LOCKS_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def lock_for(uri: str | None = None) -> Iterator[None]:
    """Hold an exclusive ``fcntl.flock`` on ``<db path>.lock`` while the block runs, for a
    sqlite store (a no-op for any other scheme: servers and real databases do their own
    concurrency control). Reentrant in one thread; serializes threads and processes."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    key = str(db) + ".lock"
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = _FileLock(Path(key))
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


# --------------------------------------------------------------------------- params and provenance


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a (resolved) config into MLflow params keyed exactly as hydra overrides name
    them: ``{"reward": {"name": "anchor"}, "trainer": {"lr": 1e-5}}`` →
    ``{"reward.name": "anchor", "trainer.lr": "1e-05"}``.

    Nested mappings recurse (an empty one becomes ``"{}"``); every leaf is ``str()``-ed, so lists
    and tuples read as ``"[1, 2]"`` and None as ``"None"``. A value longer than MLflow's param
    limit (6000 characters) is truncated to it, ending in ``"..."``; the full config is still
    logged as the ``config.yaml`` artifact by the training app."""
    out: dict[str, str] = {}
    for k, v in cfg.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            if len(v):
                out.update(flatten(v, key))
                continue
            text = "{}"
        elif isinstance(v, Sequence) and not isinstance(v, str | bytes):
            text = str(list(v))
        else:
            text = str(v)
        out[key] = _truncate(text, PARAM_VALUE_LIMIT)
    return out


def git_commit(path: str | os.PathLike = ".") -> str | None:
    """``git rev-parse HEAD`` in ``path``; None when that fails (no git, not a repository)."""
    try:
        p = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = p.stdout.strip()
    return sha if p.returncode == 0 and sha else None


def _json_safe(obj: Any) -> Any:
    """numpy scalars/arrays and other odd leaves → plain JSON/YAML-serialisable values."""
    if isinstance(obj, Mapping):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return _json_safe(obj.tolist())
    return str(obj)


def _preimport_store(uri: str) -> None:
    """Import MLflow's SQLAlchemy store (about a second of CPU) before taking the lock, so that
    parallel jobs serialize only their database work, not their imports."""
    if sqlite_path(uri) is not None:
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401


def _artifact_dir(db: Path, experiment: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("._") or "experiment"
    return (db.parent / "mlruns" / slug).as_uri()


def _get_or_create_experiment(client, name: str, uri: str) -> str:
    """Experiment id by name, created if missing (call under :func:`lock_for`). For a sqlite
    store new experiments keep their artifacts next to the database (``<db dir>/mlruns/<name>``)
    rather than in ``./mlruns`` of whatever directory the job started in."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        db = sqlite_path(uri)
        location = _artifact_dir(db, name) if db is not None else None
        try:
            return client.create_experiment(name, artifact_location=location)
        except MlflowException:  # created meanwhile by a job on a store lock_for cannot guard
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage != "active":
        raise ValueError(
            f"MLflow experiment {name!r} is deleted; restore it (`mlflow experiments restore "
            f"--experiment-id {exp.experiment_id}`) or use another name"
        )
    return exp.experiment_id


# --------------------------------------------------------------------------- run owners


def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22); None
    where there is no procfs or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and ")"
    return fields[19] if len(fields) > 19 else None


def owner_tags() -> dict[str, str]:
    """Who owns a run being opened: this host, this process and its start time."""
    pid = os.getpid()
    return {"owner_host": socket.gethostname(), "owner_pid": str(pid), "owner_start": _proc_start(pid) or ""}


def owner_alive(tags: Mapping[str, str]) -> bool | None:
    """Whether the process that owns a run (from its owner tags) still runs: False when it is gone
    (no such pid, a zombie, or a pid recycled by a process that started later), True when it runs,
    None when this host cannot tell (another host, or a run without owner tags)."""
    host, pid = tags.get("owner_host"), tags.get("owner_pid", "")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        state = ""
    if state in ("Z", "X"):  # killed, not yet reaped
        return False
    start = tags.get("owner_start")
    now = _proc_start(int(pid))
    return not (start and now and start != now)


def _runs_of(client, experiment_id: str, identity: str, status: str) -> list:
    from mlflow.entities import ViewType

    query = f"tags.{IDENTITY_TAG} = '{identity}' and attributes.status = '{status}'"
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], query, run_view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def fail_dead_runs(client, experiment_id: str, identity: str, by: str = "") -> list[str]:
    """Mark FAILED every RUNNING run of ``identity`` whose owner process is gone (call under
    :func:`lock_for`); returns their run ids. A run whose owner this host cannot check (another
    host) is left alone: it may still be running."""
    from mlflow.entities import RunTag

    failed = []
    for run in _runs_of(client, experiment_id, identity, "RUNNING"):
        if owner_alive(run.data.tags) is not False:
            continue
        t = run.data.tags
        why = f"owner process {t.get('owner_pid')} on {t.get('owner_host')} died without closing the run"
        client.log_batch(
            run.info.run_id, tags=[RunTag("failed_reason", _truncate(why + by, TAG_VALUE_LIMIT))]
        )
        client.set_terminated(run.info.run_id, "FAILED")
        failed.append(run.info.run_id)
    return failed


def finished_run(experiment: str, identity: str, uri: str | None = None):
    """The latest FINISHED run of ``identity`` in ``experiment`` (an ``mlflow.entities.Run``), or
    None (also when the store or the experiment does not exist yet)."""
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(uri)
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        return None
    _preimport_store(uri)
    with lock_for(uri):
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage != "active":
            return None
        runs = _runs_of(client, exp.experiment_id, identity, "FINISHED")
    return max(runs, key=lambda r: r.info.end_time or 0) if runs else None


# --------------------------------------------------------------------------- the tracker


class Tracker:
    """One MLflow run, written through ``MlflowClient`` (no global fluent state, so several
    trackers can coexist in one process and each may point at its own store).

    ``with Tracker("table2", run_name=..., params=flatten(cfg), tags={...}) as t:
    t.log_metrics({"snr": 1.3}, step=0)``. Metrics are buffered and written with ``log_batch``
    every ``flush_every`` :meth:`log_metrics` calls and when the run ends. A block that raises —
    KeyboardInterrupt and SystemExit included — flushes what was logged, ends the run as
    ``FAILED`` and lets the exception propagate. While the run is open (and the tracker was
    created in the main thread) SIGTERM raises SystemExit, so a killed job closes as FAILED too;
    the previous handler is restored when the run ends.

    With ``identity`` (tag ``job_key``) the tracker first marks FAILED the RUNNING runs of the
    same identity whose owner process died (a SIGKILLed job: see the module doc); their ids are
    in :attr:`stale_failed`. Every run carries owner tags (host, pid, process start time).

    Attributes:
        skipped: how many metric values were dropped because they were not finite (NaN/±inf):
            they would poison means over seeds and MLflow's charts, so they are counted here
            rather than logged.
        stale_failed: run ids of dead owners' runs this tracker closed as FAILED.
    """

    def __init__(
        self,
        experiment: str,
        run_name: str | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        uri: str | None = None,
        flush_every: int = 50,
        identity: str | None = None,
    ):
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri(uri)
        self.experiment = experiment
        self.flush_every = max(1, int(flush_every))
        self.skipped = 0
        self._pending: list = []  # mlflow.entities.Metric
        self._calls = 0
        self._finished = False
        self._status: str | None = None
        self._prev_sigterm: Any = None
        self._sigterm_installed = False
        self.stale_failed: list[str] = []
        all_tags = {**(tags or {}), **owner_tags(), **({IDENTITY_TAG: identity} if identity else {})}
        run_tags = {str(k): _truncate(str(v), TAG_VALUE_LIMIT) for k, v in all_tags.items()}
        _preimport_store(self.uri)
        with lock_for(self.uri):  # first connect may create the tables: one process at a time
            self.client = MlflowClient(tracking_uri=self.uri)
            self.experiment_id = _get_or_create_experiment(self.client, experiment, self.uri)
            if identity:
                self.stale_failed = fail_dead_runs(
                    self.client, self.experiment_id, identity, by=f" (found by pid {os.getpid()})"
                )
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=run_tags)
        self._run_id = run.info.run_id
        try:
            if params:
                self.log_params(params)
        except BaseException:
            self._end("FAILED")
            raise
        self._install_sigterm()

    # -- context manager

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.finish("FINISHED")
        else:
            try:
                self.finish("FAILED")
            except Exception as close_exc:  # keep the job's own exception the one that propagates
                exc.add_note(f"(arenabench: closing the MLflow run also failed: {close_exc!r})")
        return False

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def status(self) -> str | None:
        """The status the run was ended with; None while it is open."""
        return self._status

    # -- logging

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"MLflow run {self._run_id} has already ended ({self._status})")

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Buffer ``metrics`` at ``step``; non-finite values are skipped (counted in
        :attr:`skipped`)."""
        from mlflow.entities import Metric

        self._check_open()
        ts = int(time.time() * 1000)
        for k, v in metrics.items():
            value = float(v)
            if not math.isfinite(value):
                self.skipped += 1
                continue
            self._pending.append(Metric(str(k), value, ts, int(step)))
        self._calls += 1
        if self._calls % self.flush_every == 0:
            self.flush()

    def flush(self) -> None:
        """Write buffered metrics now, at most 1000 per ``log_batch`` call (MLflow's limit)."""
        while self._pending:
            chunk = self._pending[:METRICS_PER_BATCH]
            with lock_for(self.uri):
                self.client.log_batch(self._run_id, metrics=chunk)
            del self._pending[: len(chunk)]  # only once written: a retry re-sends the rest

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log params (values ``str()``-ed and truncated to MLflow's limit; nested mappings are
        flattened with :func:`flatten`)."""
        from mlflow.entities import Param

        self._check_open()
        items = [Param(k, v) for k, v in flatten(params).items()]
        for i in range(0, len(items), PARAMS_TAGS_PER_BATCH):
            with lock_for(self.uri):
                self.client.log_batch(self._run_id, params=items[i : i + PARAMS_TAGS_PER_BATCH])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._check_open()
        items = [RunTag(str(k), _truncate(str(v), TAG_VALUE_LIMIT)) for k, v in tags.items()]
        for i in range(0, len(items), PARAMS_TAGS_PER_BATCH):
            with lock_for(self.uri):
                self.client.log_batch(self._run_id, tags=items[i : i + PARAMS_TAGS_PER_BATCH])

    def log_text(self, text: str, artifact_file: str) -> None:
        with lock_for(self.uri):
            self.client.log_text(self._run_id, text, artifact_file)

    def log_dict(self, d: Mapping[str, Any], artifact_file: str) -> None:
        """``d`` as YAML (``.yaml``/``.yml``) or JSON (any other suffix); numpy values become
        plain numbers."""
        with lock_for(self.uri):
            self.client.log_dict(self._run_id, _json_safe(d), artifact_file)

    def log_figure(self, fig, artifact_file: str) -> None:
        with lock_for(self.uri):
            self.client.log_figure(self._run_id, fig, artifact_file)

    def log_artifact(self, local_path: str | os.PathLike, artifact_path: str | None = None) -> None:
        with lock_for(self.uri):
            self.client.log_artifact(self._run_id, str(local_path), artifact_path)

    # -- ending

    def finish(self, status: str = "FINISHED") -> None:
        """Flush and end the run with ``status`` (FINISHED, FAILED or KILLED). Idempotent: later
        calls do nothing. If the final flush fails the run ends FAILED and the error is raised."""
        status = status.upper()
        if status not in _STATUSES:
            raise ValueError(f"status must be one of {', '.join(_STATUSES)}; got {status!r}")
        if self._finished:
            return
        try:
            self.flush()
        except BaseException:
            self._end("FAILED")
            raise
        self._end(status)

    def _end(self, status: str) -> None:
        self._finished = True
        self._status = status
        try:
            with lock_for(self.uri):
                self.client.set_terminated(self._run_id, status)
        finally:
            self._restore_sigterm()

    # -- SIGTERM → SystemExit while the run is open

    def _on_sigterm(self, signum, frame):
        if self._finished:  # still installed because a later tracker stacked on it: delegate
            prev = self._prev_sigterm
            if callable(prev):
                return prev(signum, frame)
            if prev == signal.SIG_IGN:
                return None
        raise SystemExit(128 + signum)

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):  # e.g. an embedded interpreter without signal support
            return
        self._sigterm_installed = True

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        self._sigterm_installed = False
        if threading.current_thread() is not threading.main_thread():
            return
        # Restore only if ours is still the active handler (another tracker may have stacked
        # its own on top; it restores ours-or-older when it ends).
        if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            prev = self._prev_sigterm
            signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)

    def __repr__(self) -> str:
        return f"Tracker(experiment={self.experiment!r}, run_id={self._run_id!r}, uri={self.uri!r})"
