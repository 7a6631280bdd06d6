"""``hydra/launcher=submitit_slurm`` and ``submitit_local`` mean the stacked launchers of
:mod:`.launcher`: their configs are the plugin's own (``SlurmQueueConf``/``LocalQueueConf``,
every key the same) plus ``batch_seeds``, with the ``_target_`` of the stacked class.

They replace the plugin's entries of the same names in hydra's ConfigStore. Hydra imports (and
re-executes) every module under ``hydra_plugins`` in an order that depends on ``sys.path``, so
the entries are stored from a search-path plugin (:class:`StackedSubmititConfigs`), which hydra
calls after that scan and before composing any config: whichever order, ours are the ones used.
Without the cluster extra nothing is stored (``hydra/launcher=submitit_slurm`` is then hydra's
"could not find" error listing the launchers there are).
"""

# no `from __future__ import annotations`: hydra's scanner runs this module before it is in
# sys.modules, where dataclasses cannot resolve string annotations
from dataclasses import dataclass

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.plugins.search_path_plugin import SearchPathPlugin

try:
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
except ImportError:  # no cluster extra
    LocalQueueConf = SlurmQueueConf = None

HERE = "hydra_plugins.arenabench_submitit.launcher"

if SlurmQueueConf is not None:

    @dataclass
    class StackedSlurmConf(SlurmQueueConf):
        _target_: str = f"{HERE}.StackedSlurmLauncher"
        batch_seeds: int = 10  # seeds per scheduler job (1: one job each, hydra's behaviour)

    @dataclass
    class StackedLocalConf(LocalQueueConf):
        _target_: str = f"{HERE}.StackedLocalLauncher"
        batch_seeds: int = 10


def register() -> None:
    """Store the stacked launchers' configs under the plugin's names (idempotent)."""
    if SlurmQueueConf is None:
        return
    cs = ConfigStore.instance()
    cs.store(group="hydra/launcher", name="submitit_slurm", node=StackedSlurmConf(), provider="arenabench")
    cs.store(group="hydra/launcher", name="submitit_local", node=StackedLocalConf(), provider="arenabench")


class StackedSubmititConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        register()
