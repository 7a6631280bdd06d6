"""verl on a laptop: ``arenabench-verl --config-name smoke trainer.device=cpu``.

The same ``conf/verl`` configs a cluster run uses, one override away. ``trainer.device=cpu``
makes the launcher add :data:`OVERRIDES` (before the user's, so any of them can be overridden
back) and :func:`env` (``VERL_PLATFORM=cpu`` and the plugin module in
``VERL_USE_EXTERNAL_MODULES``, so every Ray process registers the CPU platform and the FSDP
engines for ``cpu`` (:mod:`.platform`) beside the ``hf`` rollout backend (:mod:`..hf`), which
serves GPU runs too.

It touches private verl registries, so it runs only on verl :data:`VERL_VERSION` and fails
loudly on any other. This module imports neither verl nor torch.
"""

from __future__ import annotations

from arenabench.trainers.verl import hf
from arenabench.trainers.verl.hf import PLUGIN_MODULE, VERL_VERSION, check_verl_version

_FP32 = "{param_dtype: fp32, reduce_dtype: fp32, buffer_dtype: fp32}"

# what a CPU run changes in a composed conf/verl config (each line says why)
OVERRIDES = (
    # the `hf` rollout backend (verl's are GPU servers), on the host CPU here
    *hf.OVERRIDES,
    # FSDP1 hard-codes sync_module_states=True (a GPU broadcast); FSDP2 runs on gloo
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.ref.strategy=fsdp2",
    # float32 end to end: CPU bf16 is slow, and the rollout computes in float32
    f"+actor_rollout_ref.actor.fsdp_config.mixed_precision={_FP32}",
    f"+actor_rollout_ref.ref.fsdp_config.mixed_precision={_FP32}",
    # no compiler toolchain assumed
    "actor_rollout_ref.actor.use_torch_compile=false",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
    "actor_rollout_ref.ref.use_torch_compile=false",
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile=false",
    # the same attention kernels in actor, ref and rollout
    "+actor_rollout_ref.model.override_config.attn_implementation=eager",
    "actor_rollout_ref.model.use_remove_padding=false",
    # one "GPU" declared to Ray: verl's resource pools count GPU/NPU only (PlatformCPU maps to it)
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "+ray_kwargs.ray_init.num_gpus=1",
    # logical CPUs for Ray's bookkeeping, not cores: verl's pool bundle alone asks for 3 (one per
    # colocated role), plus the task runner, agent-loop, reward-loop and transfer-queue actors
    "ray_kwargs.ray_init.num_cpus=8",
    # the transfer queue hangs at start with its default 8 storage units on 2 cores
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
)


def env(existing_modules: str = "") -> dict[str, str]:
    """The env vars of a CPU run (driver and every Ray worker)."""
    return {
        "VERL_PLATFORM": "cpu",
        "VERL_USE_EXTERNAL_MODULES": hf.with_plugin(existing_modules),
        "TOKENIZERS_PARALLELISM": "false",
    }


__all__ = ["OVERRIDES", "PLUGIN_MODULE", "VERL_VERSION", "check_verl_version", "env"]
