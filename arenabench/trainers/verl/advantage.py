"""The ``arenabench`` advantage estimator for verl: constructor advantages, passed through.

Constructors already return group-standardized advantages (rank → ``1 − rank/(N−1)`` →
``(r − μ)/(σ + ε)``, population σ), and the reward manager writes them as each response's
reward on its last valid token. verl's ``grpo`` estimator would standardize them a second time
(with ``torch.std``, ddof = 1, over whichever group members reached the update), which rescales
every advantage by ``sqrt((N−1)/N)`` and, after a dropped sample, shifts the group mean.
``algorithm.adv_estimator=arenabench`` instead broadcasts each response's summed reward over its
response tokens, unchanged.

The nearest built-in setting is ``algorithm.adv_estimator=grpo
algorithm.norm_adv_by_std_in_grpo=false``: it subtracts the group mean (0 up to rounding for a
complete group) and divides by nothing — equal to the pass-through only while every member of a
group reaches the advantage step.

Import this module where verl computes advantages (the trainer's Ray task runner): the launcher
puts it in ``VERL_USE_EXTERNAL_MODULES``, which ``import verl`` reads in every Ray worker.
"""

from __future__ import annotations

import torch
from verl.trainer.ppo import core_algos

NAME = "arenabench"


def compute_arenabench_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    config=None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``advantages = returns = (Σ_t reward_t) · response_mask``: no baseline, no scaling."""
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        adv = scores.unsqueeze(-1) * response_mask
    return adv, adv


if core_algos.ADV_ESTIMATOR_REGISTRY.get(NAME) is None:
    core_algos.register_adv_est(NAME)(compute_arenabench_advantage)
