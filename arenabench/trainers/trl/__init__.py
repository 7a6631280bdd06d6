"""TRL adapter: any registered constructor + judge as a group-aware reward for TRL's ``GRPOTrainer``.

* ``reward`` — :class:`ArenaReward`, an async TRL reward function: it recovers the groups TRL's
  flat batch hides (each prompt repeated ``num_generations`` times, consecutively), checks them,
  runs every group of the call through one :class:`~arenabench.engine.Engine` run (one judge batch
  per wave) in a worker thread, and returns one value per completion (``None`` for a group the
  judge failed: :func:`arenabench.advantages.mask_unreliable`);
* ``example`` — ``python -m arenabench.trainers.trl.example``: a tiny local model trained with
  ``seeded_single_elim`` on the simulated judge on the CPU (or a real model and a ``vllm serve``
  judge by flags).

Importing this package does not import TRL, transformers or torch (``reward`` needs none of them).
"""

from arenabench.trainers.trl.reward import (
    OUTPUTS,
    RECOMMENDED_SCALE_REWARDS,
    ArenaReward,
    GroupLayoutError,
    RewardCall,
    recover_groups,
)

__all__ = [
    "OUTPUTS",
    "RECOMMENDED_SCALE_REWARDS",
    "ArenaReward",
    "GroupLayoutError",
    "RewardCall",
    "recover_groups",
]
