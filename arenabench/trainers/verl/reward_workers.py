"""The reward worker's Ray concurrency, sized to a step so that every sample can park in the barrier.

A sample waiting in the group barrier holds one of its reward worker's Ray call slots until its
group is scored. verl 0.9.1 creates the worker with ``ray.remote(RewardLoopWorker)`` and no
``max_concurrency``, so Ray's async-actor default (:data:`RAY_DEFAULT_SLOTS`) applies. In a step
with more samples than that, the parked samples wait for siblings that Ray queues behind them. They
wait until the barrier's timeout closes their groups short, and then the siblings arrive late and
are scored alone, with zero advantage.

No verl config key sets that option. Several workers with each group routed by ``uid`` would need a
routing hook that verl lacks (the agent loop picks a worker with ``random.choice``), and their
metrics would no longer be one point per step. So :func:`install` wraps
``RewardLoopManager._init_reward_loop_workers`` to create the one worker with
``max_concurrency = slots(config)``: room for every sample of the largest step to wait at once,
plus Ray's default for any other call. Importing the reward manager installs it. verl imports the
reward manager (``resolve_reward_manager_cls``) in the trainer process just before it creates the
worker, so ``verl.trainer.main_ppo`` run without our launcher gets the larger limit too.

The wrap touches a private verl method, so it is installed on verl :data:`VERL_VERSION` only. On any
other version the worker keeps Ray's default, and the launcher refuses steps larger than that.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from arenabench.trainers.verl.hf import VERL_VERSION

log = logging.getLogger(__name__)

# Ray's default max_concurrency for an async actor (ray._common.ray_constants)
RAY_DEFAULT_SLOTS = 1000


def samples_per_step(config: Mapping[str, Any]) -> int:
    """The most samples the reward worker holds at once: the larger of a training step
    (``train_batch_size × rollout.n``) and a validation batch (``val_batch_size × val_kwargs.n``)."""
    data, rollout = config["data"], config["actor_rollout_ref"]["rollout"]
    out = 0
    for key, batch, n in (
        ("train_batch_size", data.get("train_batch_size"), rollout["n"]),
        ("val_batch_size", data.get("val_batch_size"), rollout["val_kwargs"]["n"]),
    ):
        if batch is None:
            raise ValueError(
                f"data.{key}=null makes verl send the whole dataset at once, and its size is unknown "
                "when the reward worker is created: set it (conf/verl/base.yaml sets "
                "val_batch_size=${data.train_batch_size})"
            )
        out = max(out, int(batch) * int(n))
    return out


def slots(config: Mapping[str, Any]) -> int:
    """The reward worker's ``max_concurrency``: every sample of a step parked at once, plus
    Ray's default for the rest."""
    return samples_per_step(config) + RAY_DEFAULT_SLOTS


def sized(version: str) -> bool:
    """Whether :func:`install` sizes the worker on this verl version."""
    return version == VERL_VERSION


def install() -> bool:
    """Make verl's ``RewardLoopManager`` create its workers with :func:`slots` of its config;
    idempotent. Returns False, with a warning, on a verl it was not written for."""
    import ray
    import verl
    from verl.experimental.reward_loop import reward_loop

    if not sized(verl.__version__):
        log.warning(
            "arenabench: the reward worker keeps Ray's max_concurrency=%d on verl==%s (sized only on "
            "verl==%s): keep samples per step <= %d",
            RAY_DEFAULT_SLOTS,
            verl.__version__,
            VERL_VERSION,
            RAY_DEFAULT_SLOTS,
        )
        return False
    manager = reward_loop.RewardLoopManager
    original = manager._init_reward_loop_workers
    if getattr(original, "arenabench_sized", False):
        return True

    def _init_reward_loop_workers(self):
        n = slots(self.config)
        self.reward_loop_workers_class = ray.remote(max_concurrency=n)(reward_loop.RewardLoopWorker)
        # in the launch log (Ray forwards the trainer process's stderr): the sizing took effect
        print(f"arenabench: reward worker max_concurrency={n}", file=sys.stderr, flush=True)
        return original(self)

    _init_reward_loop_workers.arenabench_sized = True
    manager._init_reward_loop_workers = _init_reward_loop_workers
    return True
