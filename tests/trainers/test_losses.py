import math

import pytest
import torch

from arenabench.trainers.losses import (
    AGG_MODES,
    KL_KINDS,
    POLICY_LOSSES,
    aggregate,
    cispo_loss,
    get_policy_loss,
    grpo_loss,
    kl_penalty,
    masked_mean,
)

# The hand batch: B=2, T=3, token (1, 2) masked. Ratios r = π/π_old per token:
#   (0,0) A=+1.0, r=1.5  → above 1+ε: clipped branch −A·1.2
#   (0,1) A=−2.0, r=0.5  → below 1−ε: clipped branch −A·0.8 (= 1.6 > −A·r = 1.0)
#   (0,2) A=−1.0, r=5.0  → dual clip: min(−A·r = 5, −A·3) = 3
#   (1,0) A=+0.5, r=1.1  → unclipped
#   (1,1) A=−0.5, r=0.9  → unclipped
#   (1,2) masked, with absurd values (log-ratio 50, A=100) that must not leak in
RATIOS = [[1.5, 0.5, 5.0], [1.1, 0.9, None]]
ADV = [[1.0, -2.0, -1.0], [0.5, -0.5, 100.0]]
LOGP = [[-0.5, -1.5, -0.2], [-0.7, -1.2, -3.0]]
MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
VALID = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
N_VALID = 5


def hand_batch(requires_grad=True):
    log_ratio = [[math.log(r) if r is not None else 50.0 for r in row] for row in RATIOS]
    logp = torch.tensor(LOGP, dtype=torch.float64, requires_grad=requires_grad)
    old = torch.tensor(LOGP, dtype=torch.float64) - torch.tensor(log_ratio, dtype=torch.float64)
    adv = torch.tensor(ADV, dtype=torch.float64)
    mask = torch.tensor(MASK, dtype=torch.float64)
    return logp, old, adv, mask


def grad_of(loss, logp):
    (g,) = torch.autograd.grad(loss, logp)
    return g


# ------------------------------------------------------------------ GRPO


def test_grpo_hand_value_and_clipfrac():
    logp, old, adv, mask = hand_batch()
    loss, stats = grpo_loss(logp, old, adv, mask)
    per_token = [-1.0 * 1.2, 2.0 * 0.8, 1.0 * 3.0, -0.5 * 1.1, 0.5 * 0.9]
    expected = sum(per_token) / N_VALID  # = 3.3 / 5
    assert expected == pytest.approx(0.66)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["pg_loss"] == pytest.approx(expected, abs=1e-6)
    # clipped branch taken at (0,0) and (0,1); the dual-clipped (0,2) counts in clipfrac_lower only
    assert stats["clipfrac"] == pytest.approx(2 / 5, abs=1e-6)
    assert stats["clipfrac_lower"] == pytest.approx(1 / 5, abs=1e-6)
    assert stats["ratio_mean"] == pytest.approx((1.5 + 0.5 + 5.0 + 1.1 + 0.9) / 5, abs=1e-6)
    logs = [math.log(r) for r in (1.5, 0.5, 5.0, 1.1, 0.9)]
    assert stats["ppo_kl"] == pytest.approx(-sum(logs) / 5, abs=1e-6)
    assert stats["kl"] == 0.0
    assert all(isinstance(v, float) for v in stats.values())


def test_grpo_gradients_zero_where_clipped():
    logp, old, adv, mask = hand_batch()
    loss, _ = grpo_loss(logp, old, adv, mask)
    g = grad_of(loss, logp)
    expected = [[0.0, 0.0, 0.0], [-0.5 * 1.1 / N_VALID, 0.5 * 0.9 / N_VALID, 0.0]]
    for i in range(2):
        for j in range(3):
            assert g[i, j].item() == pytest.approx(expected[i][j], abs=1e-9), (i, j)


def test_grpo_without_dual_clip():
    logp, old, adv, mask = hand_batch()
    loss, stats = grpo_loss(logp, old, adv, mask, clip_ratio_c=None)
    per_token = [-1.0 * 1.2, 2.0 * 0.8, 1.0 * 5.0, -0.5 * 1.1, 0.5 * 0.9]
    assert loss.item() == pytest.approx(sum(per_token) / N_VALID, abs=1e-6)
    assert stats["clipfrac_lower"] == 0.0
    # without the dual clip the exploded negative token keeps its gradient −A·r/N
    assert grad_of(loss, logp)[0, 2].item() == pytest.approx(1.0 * 5.0 / N_VALID, abs=1e-9)


def test_grpo_asymmetric_clip_and_seq_mean():
    logp, old, adv, mask = hand_batch()
    # clip-higher: ε_high = 0.6 leaves r = 1.5 unclipped; ε_low = 0.2 still clips r = 0.5
    loss, stats = grpo_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.6, agg="seq-mean-token-mean")
    row0 = (-1.0 * 1.5 + 2.0 * 0.8 + 1.0 * 3.0) / 3
    row1 = (-0.5 * 1.1 + 0.5 * 0.9) / 2
    assert loss.item() == pytest.approx((row0 + row1) / 2, abs=1e-6)
    assert stats["clipfrac"] == pytest.approx(1 / 5, abs=1e-6)


def test_grpo_kl_term_is_separate_loss():
    logp, old, adv, mask = hand_batch()
    ref = torch.tensor([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]], dtype=torch.float64)
    loss, stats = grpo_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=0.1)
    k3 = []
    for i, j in VALID:
        d = -1.0 - LOGP[i][j]  # ref − logp
        k3.append(math.exp(d) - d - 1)
    kl = sum(k3) / N_VALID
    assert stats["kl"] == pytest.approx(kl, abs=1e-6)
    assert stats["pg_loss"] == pytest.approx(0.66, abs=1e-6)
    assert loss.item() == pytest.approx(0.66 + 0.1 * kl, abs=1e-6)
    # the KL gradient also reaches clipped tokens: d k3/d logp = 1 − exp(ref − logp)
    g = grad_of(loss, logp)
    assert g[0, 0].item() == pytest.approx(0.1 * (1 - math.exp(-1.0 + 0.5)) / N_VALID, abs=1e-9)
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, old, adv, mask, kl_coef=0.1)


def test_grpo_on_policy_is_reinforce():
    torch.manual_seed(0)
    logp = (-torch.rand(4, 5, dtype=torch.float64) * 3).requires_grad_()
    adv_seq = torch.randn(4, dtype=torch.float64)
    mask = torch.ones(4, 5, dtype=torch.float64)
    mask[0, 3:] = 0
    mask[2, 1:] = 0
    loss, stats = grpo_loss(logp, logp.detach(), adv_seq, mask)
    n = mask.sum().item()
    lengths = mask.sum(1).tolist()
    mean_adv = sum(a * length for a, length in zip(adv_seq.tolist(), lengths, strict=True)) / n
    assert loss.item() == pytest.approx(-mean_adv, abs=1e-9)
    assert stats["clipfrac"] == 0.0
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-9)
    reinforce = -(adv_seq[:, None] * logp * mask).sum() / n
    assert torch.allclose(grad_of(loss, logp), grad_of(reinforce, logp), atol=1e-12)


def test_sequence_advantages_broadcast():
    logp, old, _, mask = hand_batch()
    a = torch.tensor([1.0, -0.5], dtype=torch.float64)
    l1, s1 = grpo_loss(logp, old, a, mask)
    l2, s2 = grpo_loss(logp, old, a[:, None].expand(2, 3), mask)
    assert l1.item() == pytest.approx(l2.item(), abs=1e-12)
    assert s1 == s2
    # by hand: row 0 A=+1 on r = 1.5, 0.5, 5 → −1.2, −0.5, −1.2 ; row 1 A=−0.5 on r = 1.1, 0.9
    per_token = [-1.2, -0.5, -1.2, 0.5 * 1.1, 0.5 * 0.9]
    assert l1.item() == pytest.approx(sum(per_token) / N_VALID, abs=1e-6)
    with pytest.raises(ValueError, match="advantages"):
        grpo_loss(logp, old, torch.zeros(3, dtype=torch.float64), mask)


def test_padding_garbage_does_not_leak():
    logp, old, adv, mask = hand_batch(requires_grad=False)
    logp = logp.clone()
    logp[1, 2] = float("nan")
    old[1, 2] = float("inf")
    logp.requires_grad_()
    loss, stats = grpo_loss(logp, old, adv, mask)
    assert loss.item() == pytest.approx(0.66, abs=1e-6)
    assert all(math.isfinite(v) for v in stats.values())
    g = grad_of(loss, logp)
    assert g[1, 0].item() == pytest.approx(-0.5 * 1.1 / N_VALID, abs=1e-9)


def test_log_ratio_clamped_at_20():
    # verl clamps log(π/π_old) to ±20 before exp: with the dual clip off, a negative-advantage
    # token with log-ratio 30 costs |A|·e^20, not |A|·e^30, and gets no gradient
    logp = torch.tensor([[-1.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[-31.0]], dtype=torch.float64)
    adv = torch.tensor([[-0.5]], dtype=torch.float64)
    mask = torch.ones(1, 1)
    loss, stats = grpo_loss(logp, old, adv, mask, clip_ratio_c=None)
    assert loss.item() == pytest.approx(0.5 * math.exp(20), rel=1e-9)
    assert stats["ratio_mean"] == pytest.approx(math.exp(20), rel=1e-6)  # masked_mean has +1e-8
    assert grad_of(loss, logp).item() == 0.0
    loss, stats = cispo_loss(logp, old, adv, mask)
    assert stats["ppo_kl"] == pytest.approx(-20.0, abs=1e-6)


def test_grpo_bad_args():
    logp, old, adv, mask = hand_batch()
    with pytest.raises(ValueError, match="clip_ratio_c"):
        grpo_loss(logp, old, adv, mask, clip_ratio_c=1.0)
    with pytest.raises(ValueError, match="low_var_kl"):
        grpo_loss(logp, old, adv, mask, kl_kind="nope")
    with pytest.raises(ValueError, match="token-mean"):
        grpo_loss(logp, old, adv, mask, agg="sum")


# ------------------------------------------------------------------ CISPO


def test_cispo_hand_value_and_gradients():
    logp, old, adv, mask = hand_batch()
    loss, stats = cispo_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2)
    w = {(0, 0): 1.2, (0, 1): 0.8, (0, 2): 1.2, (1, 0): 1.1, (1, 1): 0.9}  # clip(r, 0.8, 1.2)
    per_token = [-w[i, j] * ADV[i][j] * LOGP[i][j] for i, j in VALID]
    assert loss.item() == pytest.approx(sum(per_token) / N_VALID, abs=1e-6)
    assert loss.item() == pytest.approx((0.6 - 2.4 - 0.24 + 0.385 - 0.54) / 5, abs=1e-6)
    assert stats["clipfrac"] == pytest.approx(3 / 5, abs=1e-6)
    g = grad_of(loss, logp)
    # every valid token keeps a gradient −sg(clip(r))·A/N, the clipped ones included
    for i, j in VALID:
        assert g[i, j].item() == pytest.approx(-w[i, j] * ADV[i][j] / N_VALID, abs=1e-9), (i, j)
    assert g[1, 2].item() == 0.0
    assert g[0, 0].item() != 0.0  # PPO gives this clipped token zero gradient


def test_cispo_default_has_no_lower_clip():
    logp, old, adv, mask = hand_batch()
    loss, stats = cispo_loss(logp, old, adv, mask)
    w = {(0, 0): 1.2, (0, 1): 0.5, (0, 2): 1.2, (1, 0): 1.1, (1, 1): 0.9}  # r = 0.5 kept
    per_token = [-w[i, j] * ADV[i][j] * LOGP[i][j] for i, j in VALID]
    assert loss.item() == pytest.approx(sum(per_token) / N_VALID, abs=1e-6)
    assert stats["clipfrac"] == pytest.approx(2 / 5, abs=1e-6)


def test_cispo_on_policy_gradient_is_reinforce():
    torch.manual_seed(1)
    logp = (-torch.rand(3, 4, dtype=torch.float64) * 2).requires_grad_()
    adv = torch.randn(3, 4, dtype=torch.float64)
    mask = torch.ones(3, 4, dtype=torch.float64)
    mask[1, 2:] = 0
    loss, _ = cispo_loss(logp, logp.detach(), adv, mask)
    grpo, _ = grpo_loss(logp, logp.detach(), adv, mask)
    assert torch.allclose(grad_of(loss, logp), grad_of(grpo, logp), atol=1e-12)


# ------------------------------------------------------------------ KL


def test_kl_kinds_hand_values():
    logp = torch.tensor([-1.0, -2.0, -0.3], dtype=torch.float64)
    ref = torch.tensor([-1.5, -1.0, -0.3], dtype=torch.float64)
    expected = {
        "kl": [0.5, -1.0, 0.0],
        "abs": [0.5, 1.0, 0.0],
        "mse": [0.125, 0.5, 0.0],
        "low_var_kl": [math.exp(-0.5) + 0.5 - 1, math.e - 2, 0.0],
    }
    for kind, vals in expected.items():
        assert kl_penalty(logp, ref, kind).tolist() == pytest.approx(vals, abs=1e-9), kind
    for alias, kind in (("k1", "kl"), ("k2", "mse"), ("k3", "low_var_kl")):
        assert torch.equal(kl_penalty(logp, ref, alias), kl_penalty(logp, ref, kind))
    assert kl_penalty(logp, ref).tolist() == pytest.approx(expected["low_var_kl"], abs=1e-9)


def test_k3_nonnegative_zero_at_ref_and_clamped():
    torch.manual_seed(2)
    logp = torch.randn(1000, dtype=torch.float64) * 3
    ref = torch.randn(1000, dtype=torch.float64) * 3
    assert (kl_penalty(logp, ref) >= 0).all()
    assert torch.equal(kl_penalty(ref, ref), torch.zeros_like(ref))
    # ref − logp = 30: exp(20) − 20 − 1 after the ±20 log-ratio clamp, then capped at 10
    far = kl_penalty(torch.tensor([-31.0]), torch.tensor([-1.0]))
    assert far.item() == 10.0


def test_kl_bad_kind():
    x = torch.zeros(2)
    with pytest.raises(ValueError) as e:
        kl_penalty(x, x, "full")
    for kind in KL_KINDS:
        assert kind in str(e.value)


# ------------------------------------------------------------------ aggregation


def test_aggregation_modes_hand_values():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)  # last row fully masked
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx((1 + 2 + 4) / 3, abs=1e-9)
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx((3 + 4) / 2, abs=1e-9)
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 4) / 2, abs=1e-6)
    # float masks behave the same as bool ones
    assert aggregate(loss, mask.double(), "token-mean").item() == pytest.approx(7 / 3, abs=1e-9)
    # an all-masked batch is 0, not NaN
    for mode in AGG_MODES:
        assert aggregate(loss, torch.zeros_like(mask), mode).item() == 0.0


def test_masked_mean():
    x = torch.tensor([[1.0, 2.0, 30.0], [4.0, float("nan"), 6.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 1]])
    assert masked_mean(x, m).item() == pytest.approx((1 + 2 + 4 + 6) / 4, abs=1e-6)
    assert masked_mean(x, m, dim=1).tolist() == pytest.approx([1.5, 5.0], abs=1e-6)
    assert masked_mean(x, m, dim=0).tolist() == pytest.approx([2.5, 2.0, 6.0], abs=1e-6)
    assert masked_mean(x, torch.zeros_like(m)).item() == 0.0


def test_aggregate_bad_mode():
    with pytest.raises(ValueError) as e:
        aggregate(torch.zeros(2, 2), torch.ones(2, 2), "seq-mean")
    for mode in AGG_MODES:
        assert mode in str(e.value)


# ------------------------------------------------------------------ registry


def test_policy_loss_registry():
    assert get_policy_loss("grpo") is grpo_loss
    assert get_policy_loss("cispo") is cispo_loss
    assert set(POLICY_LOSSES) == {"grpo", "cispo"}
    with pytest.raises(ValueError) as e:
        get_policy_loss("ppo")
    assert "grpo" in str(e.value) and "cispo" in str(e.value)


# ------------------------------------------------------------------ parity with verl


def _verl_batch():
    g = torch.Generator().manual_seed(0)
    B, T = 6, 9
    old = -torch.rand(B, T, generator=g) * 3
    logp = old + 0.6 * torch.randn(B, T, generator=g)
    logp[0, 0] = old[0, 0] + 2.0  # r ≈ 7.4: dual clip for A < 0
    adv_tok = torch.randn(B, T, generator=g)
    adv_tok[0, 0] = -1.0
    adv_seq = torch.randn(B, generator=g)
    adv_seq[0] = -1.0
    adv_seq = adv_seq[:, None].expand(B, T).contiguous()
    ref = old + 0.3 * torch.randn(B, T, generator=g)
    mask = torch.rand(B, T, generator=g) > 0.3
    mask[:, 0] = True
    mask[-1] = False  # one fully masked sequence
    return logp, old, adv_tok, adv_seq, ref, mask


def _actor_config(**clip):
    from verl.workers.config import ActorConfig

    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, **clip)


def assert_matches_verl(ours_fn, verl_fn, logp0, old, adv, mask, mode, config, **kw):
    """Our loss and verl's on one batch (each on its own leaf log-probs): value, gradient, stats."""
    lp_ours = logp0.clone().requires_grad_()
    lp_verl = logp0.clone().requires_grad_()
    ours, stats = ours_fn(lp_ours, old, adv, mask, agg=mode, **kw)
    theirs, metrics = verl_fn(
        old_log_prob=old,
        log_prob=lp_verl,
        advantages=adv,
        response_mask=mask,
        loss_agg_mode=mode,
        config=config,
    )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6, abs=1e-7), mode
    assert torch.allclose(grad_of(ours, lp_ours), grad_of(theirs, lp_verl), atol=1e-7)
    assert stats["clipfrac"] == pytest.approx(metrics["actor/pg_clipfrac"], abs=1e-6)
    assert stats["ppo_kl"] == pytest.approx(metrics["actor/ppo_kl"], abs=1e-6)
    return stats, metrics


def test_matches_verl():
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    logp0, old, adv_tok, adv_seq, ref, mask = _verl_batch()

    for mode in AGG_MODES:
        x = torch.randn(*mask.shape)
        assert aggregate(x, mask, mode).item() == pytest.approx(
            core_algos.agg_loss(loss_mat=x, loss_mask=mask, loss_agg_mode=mode).item(), rel=1e-6, abs=1e-7
        )
    for kind in KL_KINDS:
        assert torch.allclose(
            kl_penalty(logp0, ref, kind), core_algos.kl_penalty(logp0, ref, kind), atol=1e-6
        )

    config = _actor_config(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    for mode in AGG_MODES:
        for adv in (adv_tok, adv_seq):
            stats, metrics = assert_matches_verl(
                grpo_loss, core_algos.compute_policy_loss_vanilla, logp0, old, adv, mask, mode, config,
                clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0,
            )  # fmt: skip
            assert stats["clipfrac_lower"] == pytest.approx(metrics["actor/pg_clipfrac_lower"], abs=1e-6)

    cispo = core_algos.POLICY_LOSS_REGISTRY.get("cispo")
    if cispo is None:
        pytest.skip("this verl has no CISPO policy loss")
    for clip_low, clip_high in ((10.0, 0.2), (0.2, 0.28)):
        config = _actor_config(clip_ratio_low=clip_low, clip_ratio_high=clip_high)
        for mode in AGG_MODES:
            assert_matches_verl(
                cispo_loss, cispo, logp0, old, adv_tok, mask, mode, config,
                clip_low=clip_low, clip_high=clip_high,
            )  # fmt: skip
