"""A resumed training job's run: a new run, linked to the one it continues, holding that run's
points up to the checkpoint it resumes from.

A job resumed from a checkpoint (verl's ``trainer.resume_mode=auto``) gets a run of its own — one
launch, one run, with its own owner, params and status — rather than reopening its predecessor:
the predecessor keeps the truthful record of what happened to it (FAILED when its process died,
KILLED when a signal stopped it), MLflow params cannot change when a relaunch changes an
override, and steps the predecessor logged after its last checkpoint (redone by the new launch)
would otherwise get two points. :func:`continue_run` copies the predecessor's points for steps
``<= step`` (the checkpoint's) into the new run and links both ways (tags ``resumed_from`` and
``resume_step`` on the new run, ``resumed_by`` on the old), so the new run alone holds the whole
curve, one point per step, and ``arenabench compare`` (FINISHED runs) reads it as one job.
"""

from __future__ import annotations

from arenabench.tracking.params import METRICS_PER_BATCH
from arenabench.tracking.store import lock_for, search_all
from arenabench.tracking.tags import IDENTITY_TAG


def previous_run(client, experiment_id: str, identity: str, exclude: str):
    """The latest-started run of ``identity`` other than ``exclude`` (any status), or None."""
    runs = [
        r
        for r in search_all(client, experiment_id, f"tags.{IDENTITY_TAG} = '{identity}'")
        if r.info.run_id != exclude
    ]
    return max(runs, key=lambda r: r.info.start_time or 0) if runs else None


def carry_history(client, src: str, dst: str, upto_step: int) -> int:
    """Copy every metric point of run ``src`` at a step ``<= upto_step`` into run ``dst`` (values,
    steps and timestamps as logged); returns how many. Call under :func:`lock_for`."""
    from mlflow.entities import Metric

    points = []
    for key in client.get_run(src).data.metrics:
        for m in client.get_metric_history(src, key):
            if m.step <= upto_step:
                points.append(Metric(m.key, m.value, m.timestamp, m.step))
    for i in range(0, len(points), METRICS_PER_BATCH):
        client.log_batch(dst, metrics=points[i : i + METRICS_PER_BATCH])
    return len(points)


def continue_run(tracker, identity: str, step: int) -> str | None:
    """Make ``tracker``'s new run the continuation of the latest other run of ``identity``, which
    a job resuming from its step-``step`` checkpoint continues: carry its points up to ``step``
    and link the two (see the module docstring). Returns the predecessor's run id (None: there is
    none, and nothing is done)."""
    from mlflow.entities import RunTag

    client = tracker.client
    with lock_for(tracker.uri):
        old = previous_run(client, tracker.experiment_id, identity, exclude=tracker.run_id)
        if old is None:
            return None
        old_id = old.info.run_id
        carried = carry_history(client, old_id, tracker.run_id, step)
        client.log_batch(
            tracker.run_id,
            tags=[
                RunTag("resumed_from", old_id),
                RunTag("resume_step", str(int(step))),
                RunTag("resumed_points", str(carried)),
            ],
        )
        client.log_batch(old_id, tags=[RunTag("resumed_by", tracker.run_id)])
    return old_id
