"""``arenabench-train`` / ``python -m arenabench.train``: the hydra app over ``conf/``.

One job = one MLflow run (params = the resolved config flattened to dotted override keys;
tags = constructor, setting, seed, sweep, overrides, git commit, job_key). A job that raises
closes its run as FAILED. ``-m experiment=table2`` runs a whole sweep (joblib launcher, parallel
jobs).

Restarting a killed sweep with the same command: each job's ``job_key`` (:func:`job_identity`)
names it across launches; a job whose identical run already FINISHED is skipped
(``tracking.skip_finished``), and the runs of SIGKILLed jobs are closed as FAILED when their job
starts again (:class:`~arenabench.tracking.Tracker`). Training is deterministic in the
config, so with ``judge.cache`` set the restarted job replays the killed one's steps from the
judgment cache without paying a judge call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

CONF = str(Path(__file__).resolve().parents[1] / "conf")
log = logging.getLogger(__name__)
# the last job this process ran (run_job fills it, the sweep launcher's one-line summary reads it):
# final metrics + steps, skipped
LAST_JOB: dict[str, Any] = {}
# config keys that do not change what a job computes: not part of its identity
NOT_IDENTITY = ("progress", "tracking")
NOT_IDENTITY_JUDGE = ("cache",)


def job_identity(resolved: Mapping[str, Any], commit: str) -> str:
    """What makes two launches the same job: the resolved config (less display, tracking and the
    cache location) and the code commit. Uncommitted edits do not change it: after editing code,
    rerun with ``tracking.skip_finished=false``."""
    cfg = {k: v for k, v in resolved.items() if k not in NOT_IDENTITY}
    if isinstance(cfg.get("judge"), Mapping):
        cfg["judge"] = {k: v for k, v in cfg["judge"].items() if k not in NOT_IDENTITY_JUDGE}
    text = json.dumps({"config": cfg, "commit": commit}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def job_tags(cfg: DictConfig) -> dict[str, str]:
    """Tags that let ``arenabench compare`` group runs: the override string without the seed is
    the *setting*; jobs of one multirun share the *sweep* id; ``reward`` is the conf/reward file
    (``rrc_scr_cara``, ``rlvr``), ``constructor`` the registered name behind it."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from arenabench.tracking import IDENTITY_TAG, build_job_tags, git_commit

    hc = HydraConfig.get()
    commit = git_commit() or "unknown"
    return build_job_tags(
        list(hc.overrides.task),
        not_setting=("seed=", "experiment=", "progress=", "tracking.", "hydra."),  # not compared
        constructor=cfg.reward.name,
        reward=hc.runtime.choices.get("reward", cfg.reward.name),  # the conf file: tells variants apart
        seed=cfg.seed,
        sweep=hc.sweep.dir if hc.mode == RunMode.MULTIRUN else hc.run.dir,
        experiment=cfg.name,
        commit=commit,
        extra={IDENTITY_TAG: job_identity(OmegaConf.to_container(cfg, resolve=True), commit)},
    )


class _Recorder:
    """Forwards metrics to the tracker and keeps them for the job's own curves artifact."""

    def __init__(self, tracker):
        self.tracker, self.history = tracker, []

    def log_metrics(self, metrics, step: int) -> None:
        self.tracker.log_metrics(metrics, step=step)
        self.history.append((step, dict(metrics)))

    def set_tags(self, tags) -> None:
        self.tracker.set_tags(tags)


# the job's own curves artifact: the primary metric first (greedy quality beside it, dashed), then
# the training samples' quality, the SNR of pointwise scores and the KL to the reference
RUN_PANELS = (
    ("eval_sampled_quality", "eval_quality"),
    ("quality_mean",),
    ("snr",),
    ("kl",),
)


def curves_figure(history, title: str = "", panels=RUN_PANELS, reuse=None):
    """One panel per entry of ``panels`` vs step (the first metric of a panel solid, the others
    dashed), titled with the run (arm and seed): the plot each run carries as an MLflow artifact.
    ``reuse``: a figure this function drew for another run of the batch; when it has the same
    layout (same lines, markers and title), its lines get this run's data instead of a new figure
    being built (the same pixels — ``tests/test_figures.py`` — for ~0.12 of the ~0.33 CPU-s a
    run's figure costs)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = [[(n, [(s, m[n]) for s, m in history if n in m]) for n in names] for names in panels]
    series = [[(n, pts) for n, pts in panel if pts] for panel in series]
    # eval metrics are logged every eval_every steps: those lines show their points
    layout = (tuple(tuple((n, len(pts) <= 40) for n, pts in panel) for panel in series), bool(title))
    if reuse is not None and getattr(reuse, "curves_layout", None) == layout:
        for ax, panel in zip(reuse.axes, series, strict=True):
            for line, (_, pts) in zip(ax.get_lines(), panel, strict=True):
                line.set_data(*zip(*pts, strict=True))
            ax.relim()
            ax.autoscale_view()
        if title:
            reuse.suptitle(title, fontsize=10)
        return reuse
    fig = Figure(figsize=(10, 6))
    FigureCanvasAgg(fig)
    for k, (names, panel) in enumerate(zip(panels, series, strict=True)):
        ax = fig.add_subplot(2, 2, k + 1)
        for n, pts in panel:
            style = {"lw": 1.4, "ls": "-"} if n == names[0] else {"lw": 1.0, "ls": "--"}
            if len(pts) <= 40:
                style.update(marker="o", ms=3)
            ax.plot(*zip(*pts, strict=True), label=n, **style)
        ax.set_title(names[0] + (" (primary)" if names[0] == "eval_sampled_quality" else ""), fontsize=9)
        if len(names) > 1:
            ax.legend(fontsize=7, loc="best")
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    # fixed margins, not tight_layout: that measures every tick label by drawing the figure once
    # more (~0.3 CPU-s of the 0.4 a run's figure cost)
    top = 0.9 if title else 0.95
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=top, wspace=0.22, hspace=0.38)
    fig.curves_layout = layout
    return fig


@dataclass
class Job:
    """One hydra job made ready to train (:func:`prepare_job`): its validated config, its MLflow
    identity and tags, or the metrics of the identical FINISHED run that makes it a skip."""

    cfg: DictConfig
    resolved: dict
    run: Any  # RunConfig
    tags: dict[str, str] | None = None  # None: tracking off
    identity: str | None = None
    skipped: dict[str, float] | None = None


def prepare_job(cfg: DictConfig) -> Job:
    """Everything a job does before it trains, under its own hydra config (``job_tags`` reads
    it): validate, name it, and skip it if its identical run already FINISHED."""
    from arenabench.trainers.local.config import validate_run

    resolved = OmegaConf.to_container(cfg, resolve=True)
    run = validate_run(resolved)  # every bad value fails here, before an MLflow run opens
    if not run.tracking.enabled:
        return Job(cfg, resolved, run)

    from arenabench.tracking import IDENTITY_TAG, finished_run

    tags = job_tags(cfg)
    identity = tags.pop(IDENTITY_TAG)
    job = Job(cfg, resolved, run, tags, identity)
    if run.tracking.skip_finished:
        done = finished_run(run.tracking.experiment, identity, uri=run.tracking.uri)
        if done is not None:
            log.warning(
                "skipping %r: identical run %s (job_key %s) already FINISHED in experiment %r",
                tags["overrides"],
                done.info.run_id,
                identity,
                run.tracking.experiment,
            )
            job.skipped = dict(done.data.metrics)
    return job


def _open_tracker(stack: contextlib.ExitStack, job: Job):
    """``job``'s MLflow run, opened in ``stack`` (closed FAILED if training raises), its config
    logged; a recorder that keeps the history for its ``curves.png``."""
    from arenabench.tracking import Tracker, flatten

    tracker = stack.enter_context(
        Tracker(
            job.run.tracking.experiment,
            run_name=f"{job.tags['setting']} seed={job.run.seed}",
            params=flatten(job.resolved),
            tags=job.tags,
            uri=job.run.tracking.uri,
            flush_every=job.run.tracking.flush_every,
            flush_seconds=job.run.tracking.flush_seconds,
            retry_s=job.run.tracking.retry_s,
            identity=job.identity,
            create=job.run.tracking.create,
        )
    )
    if tracker.stale_failed:
        log.warning("closed as FAILED the runs of dead processes: %s", ", ".join(tracker.stale_failed))
    tracker.log_text(OmegaConf.to_yaml(job.cfg, resolve=True), "config.yaml")
    return _Recorder(tracker)


def run_jobs(jobs: list[Job]) -> list[dict[str, float]]:
    """Train the jobs that are not skips as one stacked batch (``train_seeds``: a sweep's seeds,
    which share the loop's shape, task and model), each into its own MLflow run (none with
    tracking off); return every job's final metrics in order. A job's numbers are those it gets
    alone (trainers/local/stacked.py). If training raises, every run of the batch closes FAILED
    and the error propagates."""
    from arenabench.trainers.local.trainer import train_seeds

    todo = [j for j in jobs if j.skipped is None]
    finals: list[dict[str, float]] = []
    with contextlib.ExitStack() as stack:
        recs = [None if j.tags is None else _open_tracker(stack, j) for j in todo]
        if todo:
            finals = train_seeds([j.resolved for j in todo], recs, progress=todo[0].run.progress)
        fig = None  # one figure redrawn for each run of the batch (curves_figure's reuse)
        for j, rec, final in zip(todo, recs, finals, strict=True):
            if rec is not None:
                title = f"{j.run.tracking.experiment}: {j.tags['setting']} seed={j.run.seed}"
                rec.tracker.log_dict(final, "final_metrics.json")
                fig = curves_figure(rec.history, title=title, reuse=fig)
                rec.tracker.log_figure(fig, "curves.png")
    trained = iter(finals)
    return [j.skipped if j.skipped is not None else next(trained) for j in jobs]


def run_job(cfg: DictConfig) -> dict[str, float]:
    """One job alone (a single run, hydra's basic launcher): :func:`prepare_job` + :func:`run_jobs`."""
    # the canonical module's LAST_JOB, which the sweep launcher reads (this file may run as __main__)
    from arenabench import train as app

    job = prepare_job(cfg)
    final = run_jobs([job])[0]
    app.LAST_JOB.update(final={**final, "steps": job.run.steps}, **({"skipped": True} if job.skipped else {}))
    return final


def job_value(final: Mapping[str, float]) -> float:
    """What a job returns to hydra (its sweeper's ``return_value``): the final greedy win rate."""
    return final.get("eval_win_rate", float("nan"))


@hydra.main(version_base="1.3", config_path=CONF, config_name="train")
def main(cfg: DictConfig) -> float:
    return job_value(run_job(cfg))


if __name__ == "__main__":
    main()
