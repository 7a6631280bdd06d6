"""Extra per-step and eval metrics of the local trainer (small functions; the trainer calls them).

- ``entropy``: mean token entropy (nats) of the sampling policy π_T (logits / T, the training
  temperature) at every response position of the step's K·N rollouts — greedy anchors included,
  the same tokens the loss averages over — computed before the update.
- ``distinct_share``: mean over groups of (#distinct response texts) / N.
- ``adv_oracle_pearson`` / ``adv_oracle_kendall``: per group, Pearson r and Kendall τ-b between
  the arm's advantages and the *oracle* advantages ``standardize(true quality)`` (GRPO
  standardization within the group), averaged over the groups where both vectors are
  non-constant; ``adv_oracle_groups`` is how many groups that was. Groups left out carry no
  measurable alignment (a zero-advantage group, or all qualities equal). With no usable group
  both correlations are logged as 0.0 (the tracker drops NaN, and a metric must be logged every
  step); ``adv_oracle_groups == 0`` tells such steps apart.
- ``eval_sampled_quality``: mean true quality of ``EVAL_SAMPLES`` samples at temperature 1 per
  task prompt (all prompts), drawn with a generator seeded by ``EVAL_SEED`` afresh at every
  eval: independent of training's random streams, so every arm (and every eval of one run) uses
  the same draws, and two equal policies get exactly the same score.

Tasks with a **surface feature** (a ``surface(prompt_ids, responses)`` method and
``meta["surface"]`` on every trajectory: ``task=hackable``, issue 39) log, besides true quality:

- ``surface_mean`` (every step): the mean surface feature of the step's K·N rollouts;
- ``judge_view_mean`` (every step): their mean *judge's view* ``quality + w · surface``, where ``w``
  (:func:`surface_weight`) is what one unit of the feature adds to the judge's latent view,
  expressed on the true-quality scale: the judge's noise-free, bias-free view of a response, the
  quantity its verdicts and scores are noisy, monotone readings of;
- at every eval, for the greedy answers and for the ``EVAL_SAMPLES`` samples of
  ``eval_sampled_quality`` (the same responses): ``eval_surface`` / ``eval_sampled_surface``
  (mean feature) and ``eval_judge_view`` / ``eval_sampled_judge_view`` (``eval_quality + w ·
  eval_surface`` and the sampled counterpart).

Hacking shows as the judge's view rising while true quality stalls or falls and the surface
feature drifting. The judge-view metrics are left out for a judge with no surface term (an LLM
judge: its view of a response is not a function of ``meta``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from arenabench.advantages import standardize
from arenabench.metrics import kendall_tau_b, kendall_tau_b_rows, pearson, pearson_rows
from arenabench.trainers.local.policy import TinyLM, response_logits
from arenabench.types import Group

EXTRA_STEP_METRICS = (
    "entropy",
    "distinct_share",
    "adv_oracle_pearson",
    "adv_oracle_kendall",
    "adv_oracle_groups",
)
# a surface task's (task=hackable) per-step and eval metrics (module docstring)
SURFACE_STEP_METRICS = ("surface_mean", "judge_view_mean")
SURFACE_EVAL_METRICS = ("eval_surface", "eval_judge_view", "eval_sampled_surface", "eval_sampled_judge_view")
EVAL_SAMPLES = 16  # temperature-1 samples per prompt for eval_sampled_quality
EVAL_TEMPERATURE = 1.0
EVAL_SEED = 20_251_203  # fixed: not the run's seed, so every arm and seed is evaluated on the same draws


@torch.no_grad()
def token_entropy(model: TinyLM, prompts: torch.Tensor, responses: torch.Tensor, temperature: float) -> float:
    """Mean entropy of π(· | prompt, y_<t) at ``temperature`` over every response position."""
    return logits_entropy(response_logits(model, prompts, responses, temperature))


def logits_entropy(logp: torch.Tensor) -> float:
    """Mean entropy of the [B, L, vocab] log-probs out of ``policy.response_logits``."""
    return float(-(logp.exp() * logp).sum(-1).mean())


def distinct_share(groups: Sequence[Group]) -> float:
    """Mean over groups of the share of distinct response texts (1 = all different)."""
    return float(np.mean([len({t.text for t in g.trajectories}) / len(g) for g in groups]))


def _constant(x: np.ndarray) -> bool:
    return bool(np.all(x == x[0]))


def oracle_alignment(groups: Sequence[Group], advantages: Sequence[np.ndarray]) -> dict[str, float]:
    """Pearson and Kendall τ-b of each group's advantages against the oracle advantages
    ``standardize(true quality)``, averaged over groups where neither side is constant (see the
    module docstring for the convention), and that group count. The groups are computed together
    (``metrics.pearson_rows`` / ``kendall_tau_b_rows``: per group the same numbers as
    ``pearson`` / ``kendall_tau_b``)."""
    xs, ys = [], []
    for g, adv in zip(groups, advantages, strict=True):
        adv = np.asarray(adv, dtype=float)
        oracle = standardize(np.array([t.meta["quality"] for t in g.trajectories], dtype=float))
        if len(adv) < 2 or _constant(adv) or _constant(oracle):
            continue
        xs.append(adv)
        ys.append(oracle)
    if not xs:
        return {"adv_oracle_pearson": 0.0, "adv_oracle_kendall": 0.0, "adv_oracle_groups": 0.0}
    if len({len(x) for x in xs}) == 1:
        x, y = np.stack(xs), np.stack(ys)
        rs, taus = pearson_rows(x, y), kendall_tau_b_rows(x, y)
    else:  # groups of different sizes (not the trainer's): one at a time
        rs = [pearson(x, y) for x, y in zip(xs, ys, strict=True)]
        taus = [kendall_tau_b(x, y) for x, y in zip(xs, ys, strict=True)]
    return {
        "adv_oracle_pearson": float(np.mean(rs)),
        "adv_oracle_kendall": float(np.mean(taus)),
        "adv_oracle_groups": float(len(xs)),
    }


def step_extras(
    groups: Sequence[Group], advantages: Sequence[np.ndarray], entropy: float
) -> dict[str, float]:
    """The extra metrics every step logs (:data:`EXTRA_STEP_METRICS`)."""
    return {
        "entropy": entropy,
        "distinct_share": distinct_share(groups),
        **oracle_alignment(groups, advantages),
    }


def has_surface(task) -> bool:
    """The task defines a surface feature (``task=hackable``)."""
    return callable(getattr(task, "surface", None))


def surface_weight(judge) -> float | None:
    """What one unit of ``meta["surface"]`` adds to ``judge``'s latent view, on the true-quality
    scale: the judge's ``surface_weight`` if it defines one (the simulated judge: its
    ``surface_beta``); else, for a fitted judge with a ``surface_beta`` on its latent scale ``z =
    (q − quality_loc) / quality_scale``, ``surface_beta · quality_scale``; else None (the judge has
    no surface term)."""
    w = getattr(judge, "surface_weight", None)
    if w is not None:
        return float(w)
    beta = getattr(judge, "surface_beta", None)
    if beta is None:
        return None
    return float(beta) * float(getattr(judge, "quality_scale", 1.0))


def surface_step(groups: Sequence[Group], weight: float | None) -> dict[str, float]:
    """``surface_mean`` and ``judge_view_mean`` of the step's rollouts (module docstring; the
    latter only when the judge has a surface term, ``weight`` not None)."""
    s = np.array([t.meta["surface"] for g in groups for t in g.trajectories], dtype=float)
    out = {"surface_mean": float(s.mean())}
    if weight is not None:
        q = np.array([t.meta["quality"] for g in groups for t in g.trajectories], dtype=float)
        out["judge_view_mean"] = float(np.mean(q + weight * s))
    return out


def judge_view_eval(evals: dict[str, float], weight: float | None) -> dict[str, float]:
    """``eval_judge_view`` and ``eval_sampled_judge_view`` from an eval's quality and surface
    means (nothing without a surface term or without the surface means)."""
    if weight is None or "eval_surface" not in evals:
        return {}
    return {
        "eval_judge_view": evals["eval_quality"] + weight * evals["eval_surface"],
        "eval_sampled_judge_view": evals["eval_sampled_quality"] + weight * evals["eval_sampled_surface"],
    }


def sampled_eval(
    policy,
    task,
    n: int = EVAL_SAMPLES,
    seed: int = EVAL_SEED,
    temperature: float = EVAL_TEMPERATURE,
) -> dict[str, float] | list[dict[str, float]]:
    """``eval_sampled_quality``: mean true quality of ``n`` samples per prompt at ``temperature``
    on every task prompt, from a fresh generator seeded with ``seed`` (training's generators are
    untouched). A :class:`~.stacked.StackedLM` gives one dict per seed, every seed sampled with
    the same draws (as its own fresh generator would give)."""
    from arenabench.trainers.local import stacked

    single = isinstance(policy, TinyLM)
    model = stacked.StackedLM.from_models([policy]) if single else policy
    ids = np.repeat(np.arange(task.n_prompts), n)
    prompts = torch.as_tensor(task.prompts[ids])
    gen = torch.Generator().manual_seed(seed)
    temp = torch.full((len(ids),), temperature)
    out = []
    for resp in stacked.sample(model, prompts, task.response_len, temp, gen).numpy():
        res = {"eval_sampled_quality": float(task.quality(ids, resp).mean())}
        if getattr(task, "verifiable", False):
            res["eval_pass_rate"] = float(task.correct(ids, resp).mean())
            res["eval_answer_elsewhere"] = float(task.answer_elsewhere(ids, resp).mean())
        if has_surface(task):
            res["eval_sampled_surface"] = float(task.surface(ids, resp).mean())
        out.append(res)
    return out[0] if single else out
