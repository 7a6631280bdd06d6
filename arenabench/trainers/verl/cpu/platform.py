"""verl's CPU platform: what ``trainer.device=cpu`` registers in every verl process.

verl 0.9.1 has no CPU path: with no accelerator its platform manager falls back to ``nvidia``,
and the FSDP engines are registered for ``cuda``/``npu`` only. The plugin module
(:mod:`arenabench.trainers.verl.plugin`, imported by ``import verl`` in each Ray process because
the launcher lists it in ``VERL_USE_EXTERNAL_MODULES``) imports this module and calls
:func:`install` when ``VERL_PLATFORM=cpu``, which registers through verl's own registries:

* :class:`PlatformCPU` under ``cpu`` (``PlatformRegistry``). Its Ray resource is ``GPU``: the run
  declares one (``ray_kwargs.ray_init.num_gpus=1``) because verl's resource check and placement
  groups count only GPU/NPU. Its ``device_module`` is :data:`CPU_DEVICE`, ``torch.cpu`` plus the
  memory and name queries verl's logging calls (``memory_reserved``, ``get_device_name``, ...),
  which ``torch.cpu`` lacks;
* verl's FSDP engines (actor/ref and critic classes, unchanged) for device ``cpu``
  (``EngineRegistry``; FSDP2 only — FSDP1 hard-codes ``sync_module_states=True``, a GPU op).

The rollout is the ``hf`` backend (:mod:`arenabench.trainers.verl.hf_rollout`), which the plugin
registers for GPU runs too. Two calls verl makes cannot work on a CPU and have no extension point;
each is narrowed here (on a CPU run only — a GPU run keeps verl's own):

* FSDP2's ``CPUOffloadPolicy(pin_memory=True)`` (verl's ref engine): pinned memory needs an
  accelerator, so the engine module's ``CPUOffloadPolicy`` is a subclass that never pins;
* ``init_process_group("cpu:gloo,cpu:gloo")`` (verl builds ``cpu:gloo,<device>:<backend>``):
  torch rejects the duplicate, so exactly that string becomes ``cpu:gloo``.

These touch private verl names, so the module refuses any verl but :data:`VERL_VERSION`.
"""

from __future__ import annotations

import importlib.metadata
import os
from contextlib import contextmanager
from typing import Any

import torch

from arenabench.trainers.verl.hf import VERL_VERSION, check_verl_version

check_verl_version(importlib.metadata.version("verl"))

from verl.plugin.platform.platform_base import PlatformBase  # noqa: E402
from verl.plugin.platform.platform_manager import PlatformRegistry  # noqa: E402

NAME = "cpu"


class _CPUDevice:
    """``torch.cpu`` plus the ``torch.cuda``-style calls verl makes on its device module (memory
    and name queries, seeding, RNG state for checkpoints).

    Memory counters are 0: verl only logs them. ``mem_get_info`` reports host memory."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    def __repr__(self) -> str:
        return "<arenabench CPU device module (torch.cpu)>"

    @staticmethod
    def get_device_name(*args, **kwargs) -> str:
        return "CPU"

    @staticmethod
    def memory_allocated(*args, **kwargs) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(*args, **kwargs) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def mem_get_info(*args, **kwargs) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return vm.available, vm.total

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    # the device's generator is the CPU one: verl's checkpoint restores it under the key "cpu"
    # (FSDPCheckpointManager.load_rng_state), which a resumed CPU run needs
    get_rng_state = staticmethod(torch.get_rng_state)
    set_rng_state = staticmethod(torch.set_rng_state)


CPU_DEVICE = _CPUDevice()


@PlatformRegistry.register(platform=NAME)
class PlatformCPU(PlatformBase):
    """verl's platform interface on the host CPU (see the module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self):
        return CPU_DEVICE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        # never auto-detected: a CPU run selects it with VERL_PLATFORM=cpu
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == NAME

    def current_device(self):
        return "cpu"  # what torch.cpu.current_device() returns; `tensor.to(0)` would mean cuda:0

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        return None

    def synchronize(self, device_index=None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # declared with ray_init.num_gpus: verl's pools count GPU/NPU only

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


def _register_engines() -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl as fsdp

    for model_type, cls in (
        ("language_model", fsdp.FSDPEngineWithLMHead),
        ("value_model", fsdp.FSDPEngineWithValueHead),
    ):
        for backend in ("fsdp", "fsdp2"):
            EngineRegistry._engines.setdefault(model_type, {}).setdefault(backend, {})[NAME] = cls

    base = fsdp.CPUOffloadPolicy
    if not getattr(base, "_arenabench_unpinned", False):

        class UnpinnedCPUOffloadPolicy(base):
            """FSDP2 CPU offload that never pins memory (pinning needs an accelerator)."""

            _arenabench_unpinned = True

            def __init__(self, pin_memory: bool = False):
                super().__init__(pin_memory=False)

        fsdp.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def _dedupe_gloo() -> None:
    import torch.distributed as dist

    init = dist.init_process_group
    if getattr(init, "_arenabench_cpu", False):
        return

    def init_process_group(backend=None, *args, **kwargs):
        if backend == "cpu:gloo,cpu:gloo":
            backend = "cpu:gloo"
        return init(backend, *args, **kwargs)

    init_process_group._arenabench_cpu = True
    init_process_group.__wrapped__ = init
    dist.init_process_group = init_process_group


def install() -> None:
    """Register the ``cpu`` engines and narrow verl's two GPU-only calls (idempotent)."""
    _register_engines()
    _dedupe_gloo()


__all__ = ["CPU_DEVICE", "NAME", "VERL_VERSION", "PlatformCPU", "install"]
