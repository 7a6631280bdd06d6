"""The sweep launcher: persistent warm worker processes, one progress line, one line per job.

``arenabench-train -m experiment=table2`` (the experiment files select it) or any sweep with
``hydra/launcher=arenabench``. See :mod:`arenabench.sweep` for what it does and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class PoolLauncherConf:
    _target_: str = "hydra_plugins.arenabench_launcher.launcher.PoolLauncher"
    n_jobs: int = 2  # worker processes (each job trains on one torch thread)
    # per-job console lines: "auto" (a live bar on a terminal, plain lines otherwise), "lines", "off"
    progress: str = "auto"
    # jobs that differ only in seed train as one stacked batch of up to this many (1: one job per
    # process); a seed's numbers are the same either way (arenabench/sweep.py)
    batch_seeds: int = 10


ConfigStore.instance().store(group="hydra/launcher", name="arenabench", node=PoolLauncherConf)


class PoolLauncher(Launcher):
    def __init__(self, n_jobs: int = 2, progress: str = "auto", batch_seeds: int = 10) -> None:
        self.n_jobs, self.progress, self.batch_seeds = int(n_jobs), str(progress), int(batch_seeds)
        if self.batch_seeds < 1:
            raise ValueError(f"hydra.launcher.batch_seeds must be >= 1; got {batch_seeds}")
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from arenabench.sweep import launch

        return launch(self, job_overrides, initial_job_idx)

    def __getstate__(self) -> dict[str, Any]:  # never shipped to workers, but keep it cheap
        return {"n_jobs": self.n_jobs, "progress": self.progress, "batch_seeds": self.batch_seeds}
