"""The MLflow store: which URI, which sqlite file, the lock every write takes, and experiments.

The default store is MLflow 3's sqlite backend (``sqlite:///results/mlflow.db``). Parallel hydra
jobs (the joblib launcher runs them in separate processes) share that one database file, and
SQLite + MLflow do not survive concurrent first use: every process that connects to a fresh
database runs MLflow's table creation / alembic migrations, and the losers fail with
``table ... already exists`` / ``duplicate column name``. Every touch of the store therefore
happens under :func:`lock_for` — an exclusive ``fcntl.flock`` on ``<db path>.lock`` — covering the
first connect, experiment get-or-create, run creation, each metric flush, artifact logging and
the end of the run. Writes are serialized; a job holds the lock only for one short transaction.

``mlflow`` is imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

DEFAULT_URI = "sqlite:///results/mlflow.db"


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
    the file). Creates nothing: :func:`open_client` checks (or, asked to, creates) the folder."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    parts = _sqlite_parts(uri)
    if parts is None:
        return uri
    scheme, path, query = parts
    p = Path(path)
    if not p.is_absolute():
        p = Path.cwd() / p
        uri = f"{scheme}:///{p}{query}"  # p starts with "/": sqlite:////abs/path.db
    return uri


def check_store_folder(uri: str | None = None, *, create: bool = False) -> str:
    """The resolved ``uri``; for a sqlite store whose folder does not exist, a ValueError naming
    it — a typo in a path must not silently start a new, empty store somewhere else — unless
    ``create`` (then the folder is made)."""
    uri = tracking_uri(uri)
    db = sqlite_path(uri)
    if db is not None and not db.parent.is_dir():
        if not create:
            raise ValueError(
                f"tracking URI {uri}: folder {db.parent} does not exist (a typo?); create it, or "
                "ask for it to be created (arenabench-train: tracking.create=true)"
            )
        db.parent.mkdir(parents=True, exist_ok=True)
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


def preimport_store(uri: str) -> None:
    """Import MLflow's SQLAlchemy store (about a second of CPU) before taking the lock, so that
    parallel jobs serialize only their database work, not their imports."""
    if sqlite_path(uri) is not None:
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401


def open_client(uri: str | None = None, *, must_exist: bool = False, create: bool = False):
    """An ``MlflowClient`` on the store ``uri`` (resolved by :func:`tracking_uri`), connected
    under :func:`lock_for` because a first connect may create or migrate the tables.
    ``must_exist``: a missing sqlite file is a ValueError, so that readers do not create an
    empty database. A sqlite store's folder must exist unless ``create``
    (:func:`check_store_folder`). A store that cannot be read (not a database, corrupt, a newer
    schema) is one ValueError naming it, not a SQLAlchemy traceback."""
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(uri)
    db = sqlite_path(uri)
    if must_exist and db is not None and not db.exists():
        raise ValueError(f"no MLflow database at {db} (tracking URI {uri})")
    check_store_folder(uri, create=create)
    preimport_store(uri)
    with lock_for(uri):
        if db is None:
            if is_server(uri):
                bound_http_retries()
                check_server(uri)
            return MlflowClient(tracking_uri=uri)
        try:  # connecting opens (a new file: creates) the database; the query reads it
            client = MlflowClient(tracking_uri=uri)
            client.search_experiments(max_results=1)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ValueError(f"cannot open MLflow store {db}: {first[:300]}") from None
        return client


def is_server(uri: str | None = None) -> bool:
    """Whether ``uri`` names a tracking server (``http``/``https``): a store reached over the
    network, which may be away for a while (:func:`check_server`, the tracker's retries)."""
    return tracking_uri(uri).split("://", 1)[0].lower() in ("http", "https")


# MLflow's own HTTP retries default to 7 with backoff factor 2 and a 120 s timeout: ~4 minutes
# per request against a server that is down (issue 43: 4 min of retries, then 8 min of hanging
# at the end of the run). The tracker retries a flush itself (tracking.retry_s), so each request
# fails fast; a value the user set in the environment wins.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


def bound_http_retries() -> None:
    """Set :data:`HTTP_RETRY_DEFAULTS` in this process's environment where unset (child
    processes — Ray workers, a framework's own MLflow logger — inherit them)."""
    for k, v in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(k, v)


def server_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says a tracking server could not be reached or answered with a transient
    error (refused, reset, timed out, 5xx/429 after MLflow's retries) — an outage that a retry
    may outlive — rather than a request the server refused for what it asked."""
    import requests

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, requests.exceptions.RequestException | ConnectionError | TimeoutError):
            return True
        msg = str(e)
        if "API request to" in msg and ("failed with exception" in msg or "Max retries exceeded" in msg):
            return True
        if getattr(e, "error_code", None) in ("TEMPORARILY_UNAVAILABLE", "RESOURCE_EXHAUSTED"):
            return True
        e = e.__cause__ or e.__context__
    return False


def check_server(uri: str, timeout: float = 10.0) -> None:
    """A tracking server answers (one search request, no retries, ``timeout`` s): else one
    ValueError naming it, before any run opens (issue 43: a server that is down cost 4 min of
    retries and chained tracebacks)."""
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    try:
        resp = http_request(
            get_default_host_creds(uri),
            "/api/2.0/mlflow/experiments/search",
            "POST",
            max_retries=0,
            backoff_factor=0,
            timeout=timeout,
            raise_on_status=False,
            json={"max_results": 1},
        )
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        reason = "unreachable" if server_unavailable(exc) else "error"
        raise ValueError(f"MLflow tracking server {uri} {reason}: {first[:200]}") from None
    if resp.status_code != 200:
        raise ValueError(
            f"MLflow tracking server {uri} answered HTTP {resp.status_code} "
            f"({resp.text.strip()[:160]!r}): is it an MLflow server, and the credentials right?"
        )


def artifact_dir(db: Path, experiment: str) -> str:
    """Where a sqlite store keeps an experiment's artifacts: ``<db dir>/mlruns/<name>``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment).strip("._") or "experiment"
    return (db.parent / "mlruns" / slug).as_uri()


def get_or_create_experiment(client, name: str, uri: str) -> str:
    """Experiment id by name, created if missing (call under :func:`lock_for`). For a sqlite
    store new experiments keep their artifacts next to the database (:func:`artifact_dir`)
    rather than in ``./mlruns`` of whatever directory the job started in."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        db = sqlite_path(uri)
        location = artifact_dir(db, name) if db is not None else None
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


def search_all(client, experiment_id: str, filter_string: str = "") -> list:
    """Every active run of an experiment matching ``filter_string``, all pages of
    ``search_runs`` (one page holds at most 1000)."""
    from mlflow.entities import ViewType

    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs
