"""The module verl imports in every process of a run that uses our extensions
(``VERL_USE_EXTERNAL_MODULES``, set by the launcher for ``rollout.name=hf`` and for
``trainer.device=cpu``).

It registers, through verl 0.9.1's own registries, the ``hf`` rollout backend — in verl's
rollout and replica registries, with its agent loop ``hf_single_turn_agent``
(:mod:`arenabench.trainers.verl.hf_rollout`) — on any device; and, only when
``VERL_PLATFORM=cpu``, the CPU platform and the FSDP engines for ``cpu``
(:mod:`arenabench.trainers.verl.cpu.platform`). A GPU run thus keeps verl's own platform and
engines untouched. It refuses any verl but :data:`~arenabench.trainers.verl.hf.VERL_VERSION`.

The module was ``arenabench.trainers.verl.cpu.plugin`` before it served GPU runs; that name still
works (a shim that imports this one).
"""

from __future__ import annotations

import importlib.metadata
import os

from arenabench.trainers.verl.hf import NAME, VERL_VERSION, check_verl_version

check_verl_version(importlib.metadata.version("verl"))

ROLLOUT_MODULE = "arenabench.trainers.verl.hf_rollout"
AGENT_LOOP = "hf_single_turn_agent"


def _register_rollout() -> None:
    from verl.experimental.agent_loop import agent_loop
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{ROLLOUT_MODULE}.HFServerAdapter"

    def _load_hf():
        from arenabench.trainers.verl.hf_rollout import HFReplica

        return HFReplica

    RolloutReplicaRegistry.register(NAME, _load_hf)
    agent_loop._agent_loop_registry[AGENT_LOOP] = {"_target_": f"{ROLLOUT_MODULE}.SessionAgentLoop"}


def on_cpu() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


if on_cpu():
    from arenabench.trainers.verl.cpu import platform as _cpu_platform

    _cpu_platform.install()
_register_rollout()

__all__ = ["AGENT_LOOP", "ROLLOUT_MODULE", "VERL_VERSION", "on_cpu"]
