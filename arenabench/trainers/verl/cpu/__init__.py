"""verl on a laptop: ``arenabench-verl --config-name smoke trainer.device=cpu``.

The same ``conf/verl`` configs a cluster run uses, one override away. ``trainer.device=cpu``
makes the launcher add :data:`OVERRIDES` (before the user's, so any of them can be overridden
back) and :func:`env` (``VERL_PLATFORM=cpu`` and :data:`PLUGIN_MODULE` in
``VERL_USE_EXTERNAL_MODULES``, so every Ray process registers the CPU platform, the FSDP engines
for ``cpu`` and the ``hf`` rollout backend: :mod:`.plugin`, :mod:`.rollout`).

It touches private verl registries, so it runs only on verl :data:`VERL_VERSION` and fails
loudly on any other. This module imports neither verl nor torch.
"""

from __future__ import annotations

VERL_VERSION = "0.9.1"
PLUGIN_MODULE = "arenabench.trainers.verl.cpu.plugin"

_FP32 = "{param_dtype: fp32, reduce_dtype: fp32, buffer_dtype: fp32}"

# what a CPU run changes in a composed conf/verl config (each line says why)
OVERRIDES = (
    # the `hf` backend (.rollout): verl's rollout backends are GPU servers
    "actor_rollout_ref.rollout.name=hf",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.data_parallel_size=1",
    "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
    # verl's single-turn loop, each request keyed by its session: reruns reproduce every rollout
    "actor_rollout_ref.rollout.agent.default_agent_loop=hf_single_turn_agent",
    # the rollout's log-probs, so verl logs training/rollout_probs_diff_* (the weight-sync check)
    "actor_rollout_ref.rollout.calculate_log_probs=true",
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


def check_verl_version(version: str) -> None:
    """Raise unless ``version`` is the verl this CPU mode was written against."""
    if version != VERL_VERSION:
        raise RuntimeError(
            f"arenabench's verl CPU mode (trainer.device=cpu) registers into private verl registries "
            f"and supports verl=={VERL_VERSION} only; installed: verl=={version}. Install "
            f"verl=={VERL_VERSION} or run on a GPU."
        )


def env(existing_modules: str = "") -> dict[str, str]:
    """The env vars of a CPU run (driver and every Ray worker)."""
    mods = [m for m in existing_modules.split(",") if m]
    if PLUGIN_MODULE not in mods:
        mods.insert(0, PLUGIN_MODULE)  # first: the platform must exist before anything asks for it
    return {
        "VERL_PLATFORM": "cpu",
        "VERL_USE_EXTERNAL_MODULES": ",".join(mods),
        "TOKENIZERS_PARALLELISM": "false",
    }
