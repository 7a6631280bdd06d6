"""Simulated groups with a known hidden quality, for the fidelity study and tests."""

from __future__ import annotations

import numpy as np

from arenabench import numerics as nx
from arenabench.types import Group, Trajectory

# The fidelity study's default group distribution (logit scale): pointwise scores ≈ 0.85,
# the "0.8–0.9 band" of ArenaRL's discriminative-collapse example. The judge preset
# ``calibrated`` is tuned against these numbers.
QUALITY_MEAN = 1.7
PROMPT_SPREAD = 0.3
GROUP_SPREAD = 0.2
# RLVR view of the same groups: a rollout's final answer is right iff its quality clears the
# prompt's difficulty τ_g = μ_g + N(0, THRESHOLD_SPREAD). At N = 8 about 60% of groups are
# then all-right or all-wrong: the zero-advantage groups Reasoning Arena routes to a judge.
THRESHOLD_SPREAD = 0.5


def simulate_groups(
    n_groups: int,
    group_size: int,
    seed: int = 0,
    *,
    quality_mean: float = QUALITY_MEAN,
    prompt_spread: float = PROMPT_SPREAD,
    spread: float = GROUP_SPREAD,
    threshold_spread: float = THRESHOLD_SPREAD,
    anchor: bool = True,
    length_mean: float = 512.0,
    length_spread: float = 0.3,
) -> list[Group]:
    """Groups of ``group_size`` rollouts: prompt mean μ_g ~ N(quality_mean, prompt_spread),
    quality μ_g + N(0, spread). Index 0 is the greedy anchor when ``anchor``: it sits nearer
    the mode, μ_g + N(0, spread/2). Lengths are log-normal and independent of quality.
    Each text ends in ``Answer: <a>``, right (``Group.meta["answer"]``) iff quality > τ_g;
    ``Group.meta["prompt_quality"]`` = μ_g feeds AGR's default reference policy
    (``rewards.reference.SimulatedReference``).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1 (N >= 1); got {group_size}")
    if n_groups < 0:
        raise ValueError(f"n_groups must be >= 0; got {n_groups}")
    if min(prompt_spread, spread, length_spread, threshold_spread) < 0:
        raise ValueError("spreads must be >= 0")
    rng = np.random.default_rng(seed)
    groups = []
    for g in range(n_groups):
        mu = quality_mean + prompt_spread * rng.standard_normal()
        q = mu + spread * rng.standard_normal(group_size)
        if anchor:
            q[0] = mu + 0.5 * spread * rng.standard_normal()
        lengths = np.maximum(
            1, np.round(length_mean * nx.exp(length_spread * rng.standard_normal(group_size)))
        )
        tau = mu + threshold_spread * rng.standard_normal()
        answer = int(rng.integers(10, 1000))
        wrong = answer + 1 + rng.integers(0, 50, size=group_size)  # never the right answer
        trajs = tuple(
            Trajectory(
                id=f"s{seed}-g{g}-t{i}",
                text=f"[seed {seed} group {g} rollout {i}] Answer: {answer if q[i] > tau else wrong[i]}",
                length=int(lengths[i]),
                meta={"quality": float(q[i]), "greedy": anchor and i == 0, "correct": bool(q[i] > tau)},
            )
            for i in range(group_size)
        )
        groups.append(
            Group(
                prompt=f"[seed {seed} prompt {g}]",
                trajectories=trajs,
                anchor=0 if anchor else None,
                meta={"prompt_quality": float(mu), "answer": str(answer)},
            )
        )
    return groups


def equal_quality_groups(k: int, n: int, seed: int = 11) -> list[Group]:
    """``k`` groups of ``n`` distinct rollouts of one true quality each (μ_g ~ N(QUALITY_MEAN,
    PROMPT_SPREAD) across groups), all of length 500, the greedy anchor at index 0: nothing but
    judge noise — and, on an integer grid, ties — separates them. The fixture of the
    no-information tests and of the anchor-bias study (``experiments/anchor_bias.py``), one
    builder so the study measures on the tests' groups."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(k):
        q = np.full(n, QUALITY_MEAN + PROMPT_SPREAD * rng.standard_normal())
        prompt = f"eq{g}"
        trajs = tuple(
            Trajectory(f"{prompt}-{i}", f"{prompt} rollout {i}", 500, {"quality": float(q[i])})
            for i in range(n)
        )
        out.append(Group(prompt, trajs, anchor=0, meta={"prompt_quality": float(q.mean()), "answer": "42"}))
    return out


def qualities(group: Group) -> np.ndarray:
    return np.array([t.meta["quality"] for t in group.trajectories], dtype=float)
