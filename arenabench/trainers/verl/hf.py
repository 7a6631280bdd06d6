"""The ``hf`` rollout mode: ``transformers`` generation behind verl's rollout interfaces, on the
GPU of the actor worker it serves when there is one, on the host CPU otherwise.

For a GPU machine without vLLM (debugging, a small model, a vLLM/torch version clash) it is one
override away: ``actor_rollout_ref.rollout.name=hf``; on a CPU machine ``trainer.device=cpu``
brings it with the rest of the CPU mode (:mod:`arenabench.trainers.verl.cpu`). Either way the
launcher adds :data:`OVERRIDES` (before the user's, so any can be overridden back) and lists
:data:`PLUGIN_MODULE` in ``VERL_USE_EXTERNAL_MODULES``, so every Ray process registers the
backend (:mod:`arenabench.trainers.verl.plugin`, :mod:`arenabench.trainers.verl.hf_rollout`).

It registers into private verl registries, so it runs on verl :data:`VERL_VERSION` only and fails
loudly on any other. This module imports neither verl nor torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VERL_VERSION = "0.9.1"
# the module verl imports in every process (VERL_USE_EXTERNAL_MODULES): the hf backend, and the
# CPU platform when VERL_PLATFORM=cpu
PLUGIN_MODULE = "arenabench.trainers.verl.plugin"
NAME = "hf"

# what the hf backend changes in a composed conf/verl config (each line says why)
OVERRIDES = (
    # verl's rollout backends are vLLM/SGLang/TRT-LLM servers; this one is ours
    f"actor_rollout_ref.rollout.name={NAME}",
    # one process per replica: no tensor/data/pipeline parallel generation
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.data_parallel_size=1",
    "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
    # verl's single-turn loop, each request keyed by its session: reruns reproduce every rollout
    "actor_rollout_ref.rollout.agent.default_agent_loop=hf_single_turn_agent",
    # the rollout's log-probs, so verl logs training/rollout_probs_diff_* (the weight-sync check)
    "actor_rollout_ref.rollout.calculate_log_probs=true",
)


def check_verl_version(version: str) -> None:
    """Raise unless ``version`` is the verl the hf backend and the CPU mode were written against."""
    if version != VERL_VERSION:
        raise RuntimeError(
            f"arenabench's hf rollout backend and verl CPU mode (rollout.name=hf, trainer.device=cpu) "
            f"register into private verl registries and support verl=={VERL_VERSION} only; installed: "
            f"verl=={version}. Install verl=={VERL_VERSION}, or use rollout.name=vllm on a GPU."
        )


def wanted(cfg: Mapping[str, Any]) -> bool:
    """Whether a composed config uses the hf rollout backend."""
    return str(cfg["actor_rollout_ref"]["rollout"]["name"]) == NAME


def with_plugin(existing_modules: str = "") -> str:
    """``VERL_USE_EXTERNAL_MODULES`` with :data:`PLUGIN_MODULE` first (the platform and the
    backend must exist before anything asks for them)."""
    mods = [m for m in existing_modules.split(",") if m]
    if PLUGIN_MODULE not in mods:
        mods.insert(0, PLUGIN_MODULE)
    return ",".join(mods)
