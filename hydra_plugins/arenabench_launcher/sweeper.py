"""The sweeper ``hydra/sweeper=arenabench`` (``conf/train.yaml`` selects it): hydra's basic
sweeper, with one cheaper step. See :func:`arenabench.sweep.seed_groups` for why."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Dict, Optional  # noqa: UP035 (OmegaConf reads these annotations at runtime)

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class SeedSweeperConf:
    _target_: str = "hydra_plugins.arenabench_launcher.sweeper.SeedSweeper"
    max_batch_size: Optional[int] = None  # noqa: UP045
    params: Optional[Dict[str, str]] = None  # noqa: UP006, UP045


ConfigStore.instance().store(group="hydra/sweeper", name="arenabench", node=SeedSweeperConf)


class SeedSweeper(BasicSweeper):
    """``BasicSweeper`` (same jobs, same order, same batches) whose check that a batch composes
    composes one job per group of jobs that differ only in an integer ``seed=``: hydra composes
    every job there (~0.1 s each, in the main process, before the first job starts: ~10 s of a
    100-job sweep), and a seed's integer value cannot change what composes."""

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from arenabench.sweep import seed_groups

        super().validate_batch_is_legal([batch[g[0]] for g in seed_groups(batch)])
