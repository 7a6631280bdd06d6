"""Run ownership, so that runs of SIGKILLed jobs do not stay RUNNING for ever and a restarted
sweep can skip what already finished.

A job killed with SIGKILL cannot close its run. Every run therefore records its owner
(``owner_host``, ``owner_pid``, ``owner_start`` — the process start time, so a recycled pid is not
mistaken for the owner), and a run opened with an ``identity`` (the ``job_key`` tag: what makes
two jobs the same job) first marks FAILED every RUNNING run of that identity whose owner process
is gone (:func:`fail_dead_runs`). :func:`finished_run` finds a FINISHED run of an identity.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from arenabench.tracking.params import TAG_VALUE_LIMIT, truncate
from arenabench.tracking.store import lock_for, open_client, search_all, sqlite_path, tracking_uri
from arenabench.tracking.tags import IDENTITY_TAG


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
    query = f"tags.{IDENTITY_TAG} = '{identity}' and attributes.status = '{status}'"
    return search_all(client, experiment_id, query)


def fail_dead_runs(client, experiment_id: str, identity: str, by: str = "") -> list[str]:
    """Mark FAILED every RUNNING run of ``identity`` whose owner process is gone (call under
    :func:`~arenabench.tracking.store.lock_for`); returns their run ids. A run whose owner this
    host cannot check (another host) is left alone: it may still be running."""
    from mlflow.entities import RunTag

    failed = []
    for run in _runs_of(client, experiment_id, identity, "RUNNING"):
        if owner_alive(run.data.tags) is not False:
            continue
        t = run.data.tags
        why = f"owner process {t.get('owner_pid')} on {t.get('owner_host')} died without closing the run"
        client.log_batch(run.info.run_id, tags=[RunTag("failed_reason", truncate(why + by, TAG_VALUE_LIMIT))])
        client.set_terminated(run.info.run_id, "FAILED")
        failed.append(run.info.run_id)
    return failed


def finished_run(experiment: str, identity: str, uri: str | None = None):
    """The latest FINISHED run of ``identity`` in ``experiment`` (an ``mlflow.entities.Run``), or
    None (also when the store or the experiment does not exist yet)."""
    uri = tracking_uri(uri)
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        return None
    client = open_client(uri)
    with lock_for(uri):
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage != "active":
            return None
        runs = _runs_of(client, exp.experiment_id, identity, "FINISHED")
    return max(runs, key=lambda r: r.info.end_time or 0) if runs else None
