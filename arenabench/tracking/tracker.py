"""Writing to MLflow runs: :class:`RunLogger` logs into an existing run by id; :class:`Tracker`
opens a run, owns it and ends it.

Both write through ``MlflowClient`` (no global fluent state, so several can coexist in one
process and each may point at its own store), every write under
:func:`~arenabench.tracking.store.lock_for`.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

from arenabench.tracking.bulk import write_metrics
from arenabench.tracking.ownership import fail_dead_runs, owner_tags
from arenabench.tracking.params import (
    METRICS_PER_BATCH,
    PARAMS_TAGS_PER_BATCH,
    TAG_VALUE_LIMIT,
    flatten,
    json_safe,
    truncate,
)
from arenabench.tracking.store import (
    get_or_create_experiment,
    lock_for,
    open_client,
    server_unavailable,
    tracking_uri,
)
from arenabench.tracking.tags import IDENTITY_TAG

STATUSES = ("FINISHED", "FAILED", "KILLED")
FAILED_REASON_TAG = "failed_reason"  # the tag ownership.fail_dead_runs also writes

log = logging.getLogger(__name__)


class TrackingUnavailable(RuntimeError):
    """The tracking server stayed unreachable for longer than the tracker's ``retry_s``: the run
    cannot be recorded, so the job stops (its message is one line naming the server, how long,
    and how many points are not stored)."""


def _one_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def source_tags() -> dict[str, str]:
    """MLflow's own context tags for a run started by this process (``mlflow.user``,
    ``mlflow.source.name``/``type``, ``mlflow.source.git.commit``/``branch``/``repoURL``):
    the tags ``mlflow.start_run`` adds, which ``MlflowClient.create_run`` does not. From
    MLflow's context-provider registry, so the UI's source and commit columns fill in."""
    from pathlib import Path

    from mlflow.tracking.context.registry import resolve_tags

    from arenabench.tracking.tags import git_commit

    tags = {k: str(v) for k, v in resolve_tags({}).items()}
    # MLflow looks for git only beside sys.argv[0]: a console script (arenabench-train) or pytest
    # lives in the venv. The code that runs is arenabench's checkout: take its commit there.
    if "mlflow.source.git.commit" not in tags and (commit := git_commit(Path(__file__).parent)):
        tags["mlflow.source.git.commit"] = commit
    return tags


class Killed(SystemExit):
    """Raised by an open :class:`Tracker`'s SIGTERM handler (a scheduler's preemption, a
    ``timeout``): a ``SystemExit`` with the shell's code for death by that signal (128 + signum),
    so a job that does not catch it exits as if killed, after closing its run as ``KILLED``."""

    def __init__(self, signum: int):
        super().__init__(128 + int(signum))
        self.signum = int(signum)


def status_for(exc: BaseException | None) -> str:
    """The status a run ends with when its block ends with ``exc``: ``FINISHED`` (no exception),
    ``KILLED`` (SIGTERM: :class:`Killed`; SIGINT / Ctrl-C: ``KeyboardInterrupt``) or ``FAILED``
    (anything else). The same rule for the local trainer, the verl launcher and the TRL example."""
    if exc is None:
        return "FINISHED"
    if isinstance(exc, Killed | KeyboardInterrupt):
        return "KILLED"
    return "FAILED"


class RunLogger:
    """Logs into one existing MLflow run, by id — e.g. a Ray worker writing into the run its
    launcher opened (verl's reward worker) — without owning it: it never ends the run.

    Metrics are buffered and written every ``flush_every`` :meth:`log_metrics` calls or
    ``flush_seconds`` seconds after the last flush, whichever comes first (and by :meth:`flush`).
    A flush that finds a tracking server away (:func:`~arenabench.tracking.store.server_unavailable`)
    keeps its points and is retried at the next window, so an outage loses nothing while this
    process lives and at most one window if it dies; an outage longer than ``retry_s`` raises
    :class:`TrackingUnavailable` (issue 43). Any other store error is raised at once.

    Attributes:
        skipped: how many metric values were not finite (NaN/±inf). They are not logged (they
            would poison means over seeds and MLflow's charts) but counted, per metric, in
            :attr:`nan_steps` — and logged: at a step where ``<metric>`` is not finite the
            cumulative count is logged as ``<metric>_nan_steps``, so its last value is how many
            steps the run's curve of ``<metric>`` lacks (absent: none).
        nan_steps: ``{metric: steps it was not finite}``.
    """

    def __init__(
        self,
        run_id: str,
        uri: str | None = None,
        flush_every: int = 50,
        *,
        client=None,
        flush_seconds: float = 30.0,
        retry_s: float = 60.0,
    ):
        self.uri = tracking_uri(uri)
        self.client = client if client is not None else open_client(self.uri)
        self.flush_every = max(1, int(flush_every))
        self.flush_seconds = float(flush_seconds)
        self.retry_s = max(0.0, float(retry_s))
        self.flush_failures = 0  # flushes that found the server away (retried later)
        self._last_flush = time.monotonic()
        self._outage_since: float | None = None
        self.skipped = 0
        self.nan_steps: dict[str, int] = {}
        self._run_id = run_id
        self._pending: list = []  # mlflow.entities.Metric
        self._calls = 0
        self._finished = False
        self._status: str | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"MLflow run {self._run_id} has already ended ({self._status})")

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Buffer ``metrics`` at ``step``; a non-finite value is not logged but counted
        (:attr:`skipped`, :attr:`nan_steps`, and the metric ``<metric>_nan_steps``)."""
        from mlflow.entities import Metric

        self._check_open()
        ts = int(time.time() * 1000)
        for k, v in metrics.items():
            value = float(v)
            if not math.isfinite(value):
                self.skipped += 1
                n = self.nan_steps[str(k)] = self.nan_steps.get(str(k), 0) + 1
                self._pending.append(Metric(f"{k}_nan_steps", float(n), ts, int(step)))
                continue
            self._pending.append(Metric(str(k), value, ts, int(step)))
        self._calls += 1
        if self._calls % self.flush_every == 0 or time.monotonic() - self._last_flush >= self.flush_seconds:
            self._flush_window()

    def _flush_window(self) -> None:
        """A flush during the run: a server that is away keeps the points for the next window
        (one warning per outage) until the outage has lasted ``retry_s``."""
        try:
            self.flush()
        except Exception as exc:
            if not server_unavailable(exc):
                raise
            now = self._last_flush = time.monotonic()
            self.flush_failures += 1
            if self._outage_since is None:
                self._outage_since = now
                log.warning(
                    "MLflow tracking server %s unreachable (%s): %d metric points kept, retried at "
                    "the next flush for up to %g s",
                    self.uri, _one_line(exc), len(self._pending), self.retry_s,
                )  # fmt: skip
            if now - self._outage_since >= self.retry_s:
                raise TrackingUnavailable(self._outage_message(exc)) from None
            return
        if self._outage_since is not None:
            log.warning(
                "MLflow tracking server %s back after %.0f s; run %s's metrics written",
                self.uri, time.monotonic() - self._outage_since, self._run_id,
            )  # fmt: skip
            self._outage_since = None

    def _outage_message(self, exc: BaseException) -> str:
        since = self._outage_since if self._outage_since is not None else time.monotonic()
        return (
            f"MLflow tracking server {self.uri} unreachable for {time.monotonic() - since:.0f} s "
            f"(tracking.retry_s={self.retry_s:g}); {len(self._pending)} metric points of run "
            f"{self._run_id} not stored: {_one_line(exc)}"
        )

    def flush(self) -> None:
        """Write buffered metrics now: into a SQL store in one bulk insert
        (:func:`~arenabench.tracking.bulk.write_metrics`, the same rows), else at most 1000 per
        ``log_batch`` call (MLflow's limit)."""
        if self._pending:
            with lock_for(self.uri):
                if write_metrics(self.client, self._run_id, self._pending):
                    self._pending.clear()
        while self._pending:
            chunk = self._pending[:METRICS_PER_BATCH]
            with lock_for(self.uri):
                self.client.log_batch(self._run_id, metrics=chunk)
            del self._pending[: len(chunk)]  # only once written: a retry re-sends the rest
        self._last_flush = time.monotonic()

    def _retrying(self, write, deadline: float) -> None:
        """``write()``, retried while the server is away (backoff 1, 2, 4 … 10 s) until
        ``deadline`` (``time.monotonic()``); at least one try. Other errors raise at once."""
        wait = 1.0
        while True:
            try:
                return write()
            except Exception as exc:
                if not server_unavailable(exc) or time.monotonic() + wait > deadline:
                    raise
                if self._outage_since is None:
                    self._outage_since = time.monotonic()
                log.warning("MLflow tracking server %s unreachable (%s): retrying", self.uri, _one_line(exc))
            time.sleep(wait)
            wait = min(2 * wait, 10.0)

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log params (values ``str()``-ed and truncated to MLflow's limit; nested mappings are
        flattened with :func:`~arenabench.tracking.params.flatten`)."""
        from mlflow.entities import Param

        self._check_open()
        items = [Param(k, v) for k, v in flatten(params).items()]
        for i in range(0, len(items), PARAMS_TAGS_PER_BATCH):
            with lock_for(self.uri):
                self.client.log_batch(self._run_id, params=items[i : i + PARAMS_TAGS_PER_BATCH])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._check_open()
        items = [RunTag(str(k), truncate(str(v), TAG_VALUE_LIMIT)) for k, v in tags.items()]
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
            self.client.log_dict(self._run_id, json_safe(d), artifact_file)

    def log_figure(self, fig, artifact_file: str) -> None:
        """A matplotlib figure as an image artifact, as ``MlflowClient.log_figure`` stores it
        (``savefig`` to a file of that name, then ``log_artifact``), but drawn *before* taking the
        store's lock: drawing a run's ``curves.png`` is ~0.3 CPU-s, and under the lock a sweep's
        other workers waited for it (issue 28: ~0.3 s a job)."""
        import posixpath
        import tempfile

        path = posixpath.normpath(artifact_file)
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, posixpath.basename(path))
            fig.savefig(local)
            self.log_artifact(local, posixpath.dirname(path) or None)

    def log_artifact(self, local_path: str | os.PathLike, artifact_path: str | None = None) -> None:
        with lock_for(self.uri):
            self.client.log_artifact(self._run_id, str(local_path), artifact_path)

    def __repr__(self) -> str:
        return f"RunLogger(run_id={self._run_id!r}, uri={self.uri!r})"


def _end_fluent_run(run_id: str, status: str) -> None:
    """End mlflow's *fluent* active run if it is ``run_id``: a framework logging into our run by
    ``MLFLOW_RUN_ID`` in this process (transformers' ``MLflowCallback`` under TRL) leaves it active
    when training raises, and mlflow's exit hook would then end it FINISHED over our status."""
    import sys

    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return
    active = mlflow.active_run()
    if active is not None and active.info.run_id == run_id:
        mlflow.end_run(status)


class Tracker(RunLogger):
    """One MLflow run that this process opens and ends: a :class:`RunLogger` that also owns
    its run.

    ``with Tracker("table2", run_name=..., params=flatten(cfg), tags={...}) as t:
    t.log_metrics({"snr": 1.3}, step=0)``. Buffered metrics are also written when the run ends.
    A block that raises flushes what was logged, ends the run and lets the exception propagate:
    as ``KILLED`` when a signal stopped it — while the run is open (and the tracker was created
    in the main thread) SIGTERM raises :class:`Killed`, SIGINT raises ``KeyboardInterrupt`` as
    usual — and as ``FAILED`` for any other exception (:func:`status_for`). The previous SIGTERM
    handler is restored when the run ends. A SIGKILLed job cannot close its run: the next job of
    the same ``identity`` closes it as FAILED (below).

    With ``identity`` (tag ``job_key``) the tracker first marks FAILED the RUNNING runs of the
    same identity whose owner process died (a SIGKILLed job: see
    :mod:`arenabench.tracking.ownership`); their ids are in :attr:`stale_failed`. Every run
    carries owner tags (host, pid, process start time) and MLflow's standard context tags
    (:func:`source_tags`: ``mlflow.user``, ``mlflow.source.name``/``type``,
    ``mlflow.source.git.commit``/``branch``/``repoURL``), as runs of MLflow's fluent API (TRL's)
    carry them. ``create``: make a missing sqlite folder (else it is an error).

    Attributes:
        skipped: non-finite metric values dropped (see :class:`RunLogger`).
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
        create: bool = False,
        flush_seconds: float = 30.0,
        retry_s: float = 60.0,
    ):
        uri = tracking_uri(uri)
        flush_every = max(1, int(flush_every))  # a bad value fails before a run exists
        flush_seconds, retry_s = float(flush_seconds), float(retry_s)
        self.experiment = experiment
        self._prev_sigterm: Any = None
        self._sigterm_installed = False
        self.stale_failed: list[str] = []
        all_tags = {**(tags or {}), **owner_tags(), **({IDENTITY_TAG: identity} if identity else {})}
        run_tags = {str(k): truncate(str(v), TAG_VALUE_LIMIT) for k, v in all_tags.items()}
        run_tags = {**source_tags(), **run_tags}
        client = open_client(uri, create=create)  # first connect may create the tables: under the lock
        with lock_for(uri):
            self.experiment_id = get_or_create_experiment(client, experiment, uri)
            if identity:
                self.stale_failed = fail_dead_runs(
                    client, self.experiment_id, identity, by=f" (found by pid {os.getpid()})"
                )
            run = client.create_run(self.experiment_id, run_name=run_name, tags=run_tags)
        super().__init__(
            run.info.run_id, uri, flush_every, client=client, flush_seconds=flush_seconds, retry_s=retry_s
        )
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
            status = status_for(exc)
            reason = f"{type(exc).__name__}: {_one_line(exc)}" if status == "FAILED" else None
            try:
                self.finish(status, reason)
            except Exception as close_exc:  # keep the job's own exception the one that propagates
                exc.add_note(f"(arenabench: closing the MLflow run also failed: {close_exc!r})")
        return False

    def env(self) -> dict[str, str]:
        """The env vars that make a framework's own MLflow logger (transformers' callback under
        TRL, verl's in its Ray workers) log into this run instead of opening one."""
        return {
            "MLFLOW_TRACKING_URI": self.uri,
            "MLFLOW_RUN_ID": self.run_id,
            "MLFLOW_EXPERIMENT_NAME": self.experiment,
        }

    @property
    def status(self) -> str | None:
        """The status the run was ended with; None while it is open."""
        return self._status

    # -- ending

    def finish(self, status: str = "FINISHED", reason: str | None = None) -> None:
        """Flush and end the run with ``status`` (FINISHED, FAILED or KILLED; ``reason``: the tag
        ``failed_reason``). Idempotent: later calls do nothing. A tracking server that is away
        is retried for ``retry_s`` (flush and close together); if the final flush fails the run
        ends FAILED with the reason and the error is raised (a KILLED run waits at most 10 s: a
        scheduler's SIGKILL follows its SIGTERM); if the server cannot be reached to
        close the run, :class:`TrackingUnavailable` says so (the run stays RUNNING in the store
        until the next job of its identity closes it FAILED: its owner is gone)."""
        status = status.upper()
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {status!r}")
        if self._finished:
            return
        # a signalled job (SIGTERM: a scheduler's preemption, whose SIGKILL follows within its
        # grace period, often 30 s) waits at most 10 s for a server that is away
        deadline = time.monotonic() + (min(self.retry_s, 10.0) if status == "KILLED" else self.retry_s)
        try:
            self._retrying(self.flush, deadline)
        except BaseException as exc:
            why = f"final metric flush failed ({len(self._pending)} points not stored): {_one_line(exc)}"
            self._end("FAILED", why, deadline)
            if isinstance(exc, Exception) and server_unavailable(exc):
                raise TrackingUnavailable(self._outage_message(exc)) from exc
            raise
        self._end(status, reason, deadline)

    def mark(self, status: str) -> None:
        """Write ``status`` to the store now while the run stays open here (:meth:`finish` still
        writes the final status): for a process that may be SIGKILLed before it can finish, e.g.
        a launcher waiting for its workers after a scheduler's SIGTERM."""
        status = status.upper()
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {status!r}")
        if self._finished:
            return
        with lock_for(self.uri):
            self.client.set_terminated(self._run_id, status)

    def _end(self, status: str, reason: str | None = None, deadline: float | None = None) -> None:
        from mlflow.entities import RunTag

        self._finished = True
        self._status = status
        tags = [RunTag(FAILED_REASON_TAG, truncate(reason, TAG_VALUE_LIMIT))] if reason else []

        def close():
            with lock_for(self.uri):
                if tags:
                    self.client.log_batch(self._run_id, tags=tags)
                self.client.set_terminated(self._run_id, status)

        try:
            _end_fluent_run(self._run_id, status)
            try:
                self._retrying(close, time.monotonic() + self.retry_s if deadline is None else deadline)
            except Exception as exc:
                if not server_unavailable(exc):
                    raise
                raise TrackingUnavailable(
                    f"MLflow tracking server {self.uri} unreachable: run {self._run_id} could not be "
                    f"closed {status} ({reason or 'no reason'}); it stays RUNNING until the next job "
                    f"of its identity closes it FAILED: {_one_line(exc)}"
                ) from None
        finally:
            self._restore_sigterm()

    # -- SIGTERM → Killed while the run is open

    def _on_sigterm(self, signum, frame):
        if self._finished:  # still installed because a later tracker stacked on it: delegate
            prev = self._prev_sigterm
            if callable(prev):
                return prev(signum, frame)
            if prev == signal.SIG_IGN:
                return None
        raise Killed(signum)

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
