"""Hydra's submitit launchers, one scheduler job per stacked seed group (docs/cluster.md).

``arenabench-train -m experiment=table2 hydra/launcher=submitit_slurm``: the 100 jobs of table2
(10 arms x 10 seeds) become 10 SLURM array tasks, each training one arm's 10 seeds as one
stacked batch (``arenabench.sweep.execute_bundle``: each seed its own hydra job dir, config
dumps, validation, skip check and MLflow run, then ``arenabench.train.run_jobs``), exactly what
a worker of the local launcher runs for that group. A seed's numbers do not depend on its
batch-mates (``tests/test_sweep_configs.py``), so both launchers give the same runs
(``tests/test_cluster_submitit.py``, on ``submitit_local``). ``batch_seeds``: at most this many
seeds per scheduler job (1: hydra's behaviour, one job each). A task function that is not
arenabench's own (``arenabench.train.main``) is launched one job per scheduler job, as hydra does.

Needs the ``cluster`` extra (``hydra-submitit-launcher``); imported only when a submitit launcher
is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
        BaseSubmititLauncher,
        LocalLauncher,
        SlurmLauncher,
    )
except ImportError:  # no cluster extra: nothing here (hydra scans this module anyway)
    BaseSubmititLauncher = None


if BaseSubmititLauncher is None:
    __all__: list[str] = []
else:
    __all__ = ["StackedLocalLauncher", "StackedSlurmLauncher"]


class _Stacked(BaseSubmititLauncher or object):
    """A submitit launcher whose scheduler jobs are stacked seed groups."""

    def __init__(self, batch_seeds: int = 10, **params: Any) -> None:
        self.batch_seeds = int(batch_seeds)
        if self.batch_seeds < 1:
            raise ValueError(f"hydra.launcher.batch_seeds must be >= 1; got {batch_seeds}")
        super().__init__(**params)
        self._groups: list[tuple[list[int], list[list[str]]]] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        from arenabench.sweep import _stackable, bundles

        if self.batch_seeds == 1 or not _stackable(self.task_function):
            self._groups = []
            return super().launch(job_overrides, initial_job_idx)
        parts = bundles(job_overrides, self.batch_seeds, workers=1)  # workers=1: groups of batch_seeds
        self._groups = [
            ([initial_job_idx + i for i in p], [list(job_overrides[i]) for i in p]) for p in parts
        ]
        # hydra's launch submits one array task per entry; entry g's first job stands for group g
        # (its overrides show in hydra's log); __call__ runs the whole group
        per_group = super().launch([job_overrides[p[0]] for p in parts], 0)
        results: list[Any] = [None] * len(job_overrides)
        for p, rets in zip(parts, per_group, strict=True):
            for i, ret in zip(p, rets, strict=True):
                results[i] = ret
        return results

    def __call__(self, sweep_overrides, job_dir_key, job_num, job_id, singleton_state):
        if not self._groups:
            return super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)
        from arenabench.sweep import execute_bundle, execute_job

        idxs, overrides = self._groups[job_num]
        if len(idxs) == 1:
            args = (self.hydra_context, self.config, self.task_function, singleton_state)
            return [execute_job(idxs[0], overrides[0], *args)[0]]
        done = execute_bundle(idxs, overrides, self.hydra_context, self.config, singleton_state)
        return [ret for ret, _ in done]

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Preempted or timed out (``max_num_timeout`` > 0): resubmit the same group; its
        finished seeds are skipped (``tracking.skip_finished``), the others run again."""
        return super().checkpoint(*args, **kwargs)


if BaseSubmititLauncher is not None:

    class StackedSlurmLauncher(_Stacked, SlurmLauncher):
        pass

    class StackedLocalLauncher(_Stacked, LocalLauncher):
        pass
