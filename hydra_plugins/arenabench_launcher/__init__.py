"""Hydra launcher plugin ``hydra/launcher=arenabench``: :mod:`arenabench.sweep` does the work.

Hydra instantiates launchers only from the ``hydra_plugins`` namespace, so this package holds
the class and its ConfigStore entry and nothing else."""

from hydra_plugins.arenabench_launcher.launcher import PoolLauncher, PoolLauncherConf

__all__ = ["PoolLauncher", "PoolLauncherConf"]
