"""Policy-gradient losses for LLM RL: GRPO (PPO-clip) and CISPO, with KL estimators and aggregation.

All functions are pure torch on ``[B, T]`` token tensors (``mask`` is 0/1 or bool over response
tokens) and return losses to *minimize*. Semantics follow verl's ``verl/trainer/ppo/core_algos.py``
as read at commit ``b178a3cd56f58b2d502255daba591e92833930a7`` (2026-01-29, ``verl/version`` =
0.8.0.dev): ``agg_loss``, ``kl_penalty_forward``, ``compute_policy_loss_vanilla`` and
``compute_policy_loss_cispo``. Deliberate differences, all outside verl's normal operating range:

* an all-masked batch aggregates to 0 instead of verl's 0/0 = NaN;
* ``old_logp``, ``ref_logp`` and the advantages are detached (they are constants of the update;
  in verl they come from the batch and never carry a gradient anyway);
* verl's straight-through KL kinds (``"k3+"`` etc.) and rollout-IS weights are not implemented.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_KINDS = ("kl", "abs", "mse", "low_var_kl")
_KL_ALIASES = {"k1": "kl", "k2": "mse", "k3": "low_var_kl"}  # verl accepts these spellings too
LOG_RATIO_CLAMP = 20.0  # verl clamps log(π/π_old) and the k3 log-ratio to ±20 before exp
K3_CLAMP = 10.0  # verl clamps the k3 estimate to ±10
EPS = 1e-8  # verl's masked_mean / seq-mean-token-mean denominator guard

PolicyLoss = Callable[..., tuple[torch.Tensor, dict[str, float]]]


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``x`` where ``mask`` is set.

    Padding is removed with ``torch.where`` rather than multiplied by 0, so inf/NaN at padded
    positions (e.g. garbage logprobs) cannot turn the sum into NaN, and they get zero gradient.
    """
    x = torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` over set mask entries (all of them, or along ``dim``).

    Like verl's ``masked_mean`` the denominator gets +1e-8, so a fully masked row gives 0, not NaN.
    """
    count = mask.bool().to(x.dtype)
    count = count.sum() if dim is None else count.sum(dim)
    return masked_sum(x, mask, dim) / (count + EPS)


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar.

    * ``"token-mean"`` (verl's default): Σ valid tokens / #valid tokens, so every token weighs the
      same and long responses dominate (DAPO's argument for it).
    * ``"seq-mean-token-sum"``: mean over sequences of each sequence's token *sum* (Dr. GRPO-like;
      gradient scale grows with length).
    * ``"seq-mean-token-mean"``: mean over sequences of each sequence's token mean (original GRPO:
      every sequence weighs the same regardless of length).

    Sequence modes skip fully masked sequences, as verl does.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; valid modes: {', '.join(AGG_MODES)}")
    keep = mask.bool()
    if mode == "token-mean":
        return masked_sum(loss_mat, keep) / keep.sum().clamp_min(1)
    n_tok = keep.sum(-1).to(loss_mat.dtype)
    per_seq = masked_sum(loss_mat, keep, dim=-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / (n_tok + EPS)
    has_tokens = n_tok > 0
    return masked_sum(per_seq, has_tokens) / has_tokens.sum().clamp_min(1)


def _kl_kind(kind: str) -> str:
    canonical = _KL_ALIASES.get(kind, kind)
    if canonical not in KL_KINDS:
        raise ValueError(
            f"unknown KL kind {kind!r}; valid kinds: {', '.join(KL_KINDS)} (aliases: k1, k2, k3)"
        )
    return canonical


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token estimate of KL(π‖π_ref) from the sampled tokens' logprobs (Schulman's k1/k2/k3).

    * ``"kl"`` (k1): ``logp − ref``; unbiased but high variance and can be negative.
    * ``"abs"``: ``|logp − ref|``.
    * ``"mse"`` (k2): ``½ (logp − ref)²``; biased, but its gradient is the right KL gradient.
    * ``"low_var_kl"`` (k3): ``exp(ref − logp) − (ref − logp) − 1``; unbiased, ≥ 0, low variance.
      The log-ratio is clamped to ±20 and the result to ±10, as verl does, so one token whose
      policy drifted far cannot blow up the loss.
    """
    kind = _kl_kind(kind)
    diff = logp - ref_logp
    if kind == "kl":
        return diff
    if kind == "abs":
        return diff.abs()
    if kind == "mse":
        return 0.5 * diff.square()
    log_r = (-diff).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return (log_r.exp() - log_r - 1).clamp(-K3_CLAMP, K3_CLAMP)


def _token_advantages(advantages: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Per-sequence ``[B]`` advantages are broadcast to every token; ``[B, T]`` are used as is."""
    if advantages.shape == logp.shape:
        return advantages.detach()
    if advantages.dim() == 1 and logp.dim() == 2 and advantages.shape[0] == logp.shape[0]:
        return advantages.detach().unsqueeze(-1).expand_as(logp)
    raise ValueError(f"advantages must have shape [B] or {list(logp.shape)}, got {list(advantages.shape)}")


def _log_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """log(π/π_old), clamped to ±20 as verl does so exp() cannot overflow."""
    return (logp - old_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def _check_clip(clip_low: float, clip_high: float) -> None:
    if clip_low < 0 or clip_high < 0:
        raise ValueError(f"clip_low and clip_high must be >= 0, got {clip_low}, {clip_high}")


def _with_kl(
    pg_mat: torch.Tensor,
    logp: torch.Tensor,
    mask: torch.Tensor,
    ref_logp: torch.Tensor | None,
    kl_coef: float,
    kl_kind: str,
    agg: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Aggregate the policy term and add ``kl_coef · agg(KL)`` as verl's actor does (use_kl_loss)."""
    pg_loss = aggregate(pg_mat, mask, agg)
    if ref_logp is None:
        if kl_coef != 0:
            raise ValueError("kl_coef != 0 needs ref_logp")
        return pg_loss, pg_loss, torch.zeros((), dtype=pg_loss.dtype, device=pg_loss.device)
    kl = aggregate(kl_penalty(logp, ref_logp.detach(), kl_kind), mask, agg)
    return pg_loss + kl_coef * kl, pg_loss, kl


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_ratio_c: float | None = 3.0,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_kind: str = "low_var_kl",
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO's policy loss: the PPO clipped surrogate with a token-level ratio, plus dual-clip.

    Per token, with ``r = exp(logp − old_logp)``::

        pg = max(−A·r, −A·clip(r, 1 − clip_low, 1 + clip_high))
        pg = min(pg, −A·clip_ratio_c)   where A < 0  (dual-clip; clip_ratio_c=None disables it)

    The clip removes the incentive (and the gradient) to push r further outside the trust region;
    the dual clip bounds the loss of a negative-advantage token whose r exploded, which plain PPO
    leaves unbounded. This is verl's ``compute_policy_loss_vanilla`` value for value: the
    decoupled ``clip_low``/``clip_high`` are DAPO's clip-higher.

    The KL to the reference is a separate loss term, ``kl_coef · agg(KL(logp‖ref_logp))`` (verl's
    ``actor.use_kl_loss`` / ``kl_loss_coef`` / ``kl_loss_type``), as in GRPO — *not* a penalty
    folded into the reward (``algorithm.use_kl_in_reward``), which would leak into the advantages.

    ``advantages`` is ``[B]`` (one per sequence, broadcast to its tokens) or ``[B, T]``. ``stats``:
    ``pg_loss`` and ``kl`` (the aggregated terms), ``clipfrac`` (share of valid tokens where the
    clipped branch was strictly larger, verl's ``pg_clipfrac``; dual-clipped tokens are not in it),
    ``clipfrac_lower`` (share where the dual clip bound, verl's ``pg_clipfrac_lower``), ``ppo_kl``
    (mean of ``old_logp − logp``) and ``ratio_mean``.
    """
    _check_clip(clip_low, clip_high)
    if clip_ratio_c is not None and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (or None to disable dual-clip), got {clip_ratio_c}")
    kl_kind = _kl_kind(kl_kind)
    adv = _token_advantages(advantages, logp)
    log_ratio = _log_ratio(logp, old_logp)
    ratio = log_ratio.exp()

    pg_unclipped = -adv * ratio
    pg_clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    pg = torch.maximum(pg_unclipped, pg_clipped)
    clipped = pg_clipped > pg_unclipped
    if clip_ratio_c is None:
        dual = torch.zeros_like(clipped)
    else:
        pg_dual = -adv * clip_ratio_c
        negative = adv < 0
        dual = negative & (pg > pg_dual)
        pg = torch.where(negative, torch.minimum(pg, pg_dual), pg)

    loss, pg_loss, kl = _with_kl(pg, logp, mask, ref_logp, kl_coef, kl_kind, agg)
    with torch.no_grad():
        stats = {
            "pg_loss": float(pg_loss),
            "kl": float(kl),
            "clipfrac": float(masked_mean(clipped.to(ratio.dtype), mask)),
            "clipfrac_lower": float(masked_mean(dual.to(ratio.dtype), mask)),
            "ppo_kl": float(masked_mean(-log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
    return loss, stats


def cispo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 10.0,
    clip_high: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_kind: str = "low_var_kl",
    agg: str = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """CISPO (MiniMax-M1, arXiv:2506.13585): clip the importance weight, not the update.

    Per token: ``−sg(clip(r, 1 − clip_low, 1 + clip_high)) · A · logp``. The weight is clipped
    *and* detached, so its gradient is ``−clip(r)·A·∇logp`` for every token: a token outside the
    trust region is down-weighted instead of dropped, unlike PPO clipping which zeroes its gradient
    (MiniMax's point: rare "fork" tokens with large r are exactly the ones PPO stops learning from).
    Only the gradient is meaningful; the loss *value* contains ``logp`` itself, not a surrogate.

    Matches verl's ``compute_policy_loss_cispo`` (same clamps, no dual-clip, ``clipfrac`` = share of
    valid tokens where the weight was clipped). verl has no CISPO-specific defaults — the function
    reads the actor's generic ``clip_ratio_low/high`` (0.2/0.2) — so the defaults here follow verl's
    CISPO recipe (``examples/cispo_trainer``: ``clip_ratio_low=10``, ``clip_ratio_high=0.2``):
    ``clip_low=10`` puts the lower bound below 0, i.e. no lower clip, as MiniMax-M1 does (only
    ``ε_high`` is tuned). The KL term is added as in :func:`grpo_loss`.
    """
    _check_clip(clip_low, clip_high)
    kl_kind = _kl_kind(kl_kind)
    adv = _token_advantages(advantages, logp)
    log_ratio = _log_ratio(logp, old_logp)
    ratio = log_ratio.exp()
    weight = ratio.clamp(1 - clip_low, 1 + clip_high).detach()
    pg = -weight * adv * logp

    loss, pg_loss, kl = _with_kl(pg, logp, mask, ref_logp, kl_coef, kl_kind, agg)
    with torch.no_grad():
        stats = {
            "pg_loss": float(pg_loss),
            "kl": float(kl),
            "clipfrac": float(masked_mean((ratio != weight).to(ratio.dtype), mask)),
            "ppo_kl": float(masked_mean(-log_ratio, mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
    return loss, stats


POLICY_LOSSES: dict[str, PolicyLoss] = {"grpo": grpo_loss, "cispo": cispo_loss}


def get_policy_loss(name: str) -> PolicyLoss:
    """Look up a policy loss by name (``"grpo"`` or ``"cispo"``)."""
    try:
        return POLICY_LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown policy loss {name!r}; choices: {', '.join(sorted(POLICY_LOSSES))}"
        ) from None
