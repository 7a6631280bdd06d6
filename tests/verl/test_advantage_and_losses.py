"""The arenabench advantage estimator through verl's compute_advantage, and verl's losses on it."""

import math

import numpy as np
import pytest
import torch
from helpers import RESPONSE_LEN, expected_group, verl_batch

import arenabench.trainers.verl.advantage  # noqa: F401  (registers "arenabench")
from arenabench.trainers import losses as local_losses
from arenabench.trainers.verl import launch
from arenabench.trainers.verl.reward_manager import ArenaRewardManager


@pytest.fixture
def scored(tokenizer):
    """A verl batch with rm_scores = the constructor's advantages, placed as the manager does."""
    data, rows = verl_batch(tokenizer)
    adv = torch.zeros(len(rows))
    for p in (0, 1):
        idx, res = expected_group(tokenizer, data, rows, p)
        adv[idx] = torch.tensor(res.advantage, dtype=torch.float32)
    data.batch["token_level_rewards"] = ArenaRewardManager.assemble_rm_scores(data, adv.tolist())
    return data, adv


def test_compute_advantage_passes_constructor_advantages_through(scored):
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data, adv = scored
    out = compute_advantage(data, adv_estimator="arenabench", num_repeat=4)
    mask = data.batch["response_mask"].bool()
    a = out.batch["advantages"]
    assert a.shape == (8, RESPONSE_LEN)
    assert torch.equal(a[~mask], torch.zeros(int((~mask).sum())))
    for b in range(8):
        assert torch.equal(a[b][mask[b]], torch.full((int(mask[b].sum()),), float(adv[b])))
    assert torch.equal(out.batch["returns"], a)


def test_grpo_would_normalize_twice(scored):
    """verl's grpo standardizes again with torch.std (ddof=1): every advantage shrinks by
    sqrt((N-1)/N); norm_adv_by_std_in_grpo=false is equal to the pass-through (mean 0)."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data, adv = scored
    mask = data.batch["response_mask"].bool()
    first = mask.float().argmax(-1)
    grpo = compute_advantage(data, adv_estimator="grpo", num_repeat=4).batch["advantages"]
    got = grpo[torch.arange(8), first]
    np.testing.assert_allclose(got.numpy(), (adv * math.sqrt(3 / 4)).numpy(), atol=1e-5)
    centred = compute_advantage(data, adv_estimator="grpo", num_repeat=4, norm_adv_by_std_in_grpo=False)
    np.testing.assert_allclose(
        centred.batch["advantages"][torch.arange(8), first].numpy(), adv.numpy(), atol=1e-6
    )


def _actor(loss, smoke_env):
    from verl.utils.config import omega_conf_to_dataclass

    cfg = launch.compose("smoke", [f"loss={loss}"])
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


@pytest.mark.parametrize("loss", ["grpo", "cispo", "gspo"])
def test_verl_losses_run_on_our_advantages(loss, scored, smoke_env):
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import compute_advantage

    actor = _actor(loss, smoke_env)
    data, adv = scored
    a = compute_advantage(data, adv_estimator="arenabench", num_repeat=4).batch["advantages"]
    mask = data.batch["response_mask"].float()
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(8, RESPONSE_LEN, generator=g) * 3
    new = (old + 0.3 * torch.randn(8, RESPONSE_LEN, generator=g)).requires_grad_(True)
    fn = core_algos.get_policy_loss_fn(actor.policy_loss.loss_mode)
    value, metrics = fn(old, new, a, mask, actor.loss_agg_mode, actor)
    value.backward()
    assert math.isfinite(value.item()) and torch.isfinite(new.grad).all()
    assert all(math.isfinite(v) for v in metrics.values())
    assert new.grad[mask == 0].abs().sum() == 0  # padding gets no gradient

    # at ratio 1 the values are known in closed form (token-mean over response tokens)
    same = old.clone().requires_grad_(True)
    v1, _ = fn(old, same, a, mask, actor.loss_agg_mode, actor)
    n_tok = mask.sum()
    if loss == "grpo":  # -A · r with r = 1
        assert v1.item() == pytest.approx(float(-(a * mask).sum() / n_tok), abs=1e-6)
    elif loss == "cispo":  # -sg(clip(1)) · A · logp
        assert v1.item() == pytest.approx(float(-(a * old * mask).sum() / n_tok), abs=1e-6)
    else:  # gspo, seq-mean-token-mean of -A · s with s = 1
        per_seq = (-(a * mask).sum(-1) / mask.sum(-1)).mean()
        assert v1.item() == pytest.approx(float(per_seq), abs=1e-6)


@pytest.mark.parametrize("loss", ["grpo", "cispo"])
def test_verl_losses_match_the_local_trainer(loss, scored, smoke_env):
    """conf/verl/loss/{grpo,cispo} and conf/trainer/{grpo,cispo} are the same objective."""
    from verl.trainer.ppo import core_algos

    actor = _actor(loss, smoke_env)
    data, adv = scored
    mask = data.batch["response_mask"].float()
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(8, RESPONSE_LEN, generator=g) * 3
    new = old + 0.5 * torch.randn(8, RESPONSE_LEN, generator=g)
    a = adv.unsqueeze(-1) * mask
    verl_value, _ = core_algos.get_policy_loss_fn(actor.policy_loss.loss_mode)(
        old, new, a, mask, actor.loss_agg_mode, actor
    )
    if loss == "grpo":
        local, _ = local_losses.grpo_loss(
            new,
            old,
            adv,
            mask,
            clip_low=actor.clip_ratio_low,
            clip_high=actor.clip_ratio_high,
            clip_ratio_c=actor.clip_ratio_c,
        )
    else:
        local, _ = local_losses.cispo_loss(
            new, old, adv, mask, clip_low=actor.clip_ratio_low, clip_high=actor.clip_ratio_high
        )
    assert verl_value.item() == pytest.approx(local.item(), rel=1e-6, abs=1e-7)
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == ((0.2, 0.2) if loss == "grpo" else (10.0, 0.2))


def test_verl_use_external_modules_registers_ours_in_a_fresh_worker(tmp_path):
    """What a Ray worker does: `import verl` with the launcher's VERL_USE_EXTERNAL_MODULES."""
    import os
    import subprocess
    import sys

    from arenabench.trainers.verl import launch

    code = (
        "import verl\n"
        "from verl.trainer.ppo import core_algos\n"
        "print(core_algos.get_adv_estimator_fn('arenabench').__name__)\n"
    )
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": launch.ADV_MODULE}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "compute_arenabench_advantage"
