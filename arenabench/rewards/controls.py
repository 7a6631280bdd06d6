"""Control arms for reward-constructor comparisons (not methods: baselines that bracket them).

- ``oracle`` and ``rank_oracle`` read the *hidden* true quality (``Trajectory.meta["quality"]``)
  that real constructors never see and spend no judge call: the ceiling a noiseless judge would
  reach with a pointwise (``oracle``) or a tournament-shaped rank (``rank_oracle``) reward.
- ``pointwise_rank`` asks the judge exactly what ``pointwise`` asks (one score per trajectory,
  ``votes`` samples each) and turns the scores into the tournaments' rank reward: the same
  information as pointwise in the tournaments' shape, which separates "pairwise judging" from
  "rank-shaped advantages".

The budget-matched pointwise control needs no code: ``conf/reward/pointwise_budget.yaml`` is
``pointwise`` with ``votes`` chosen so its judge calls match a tournament's.

Non-finite rewards (a NaN or ±inf quality, a score mean that overflowed) leave the trajectory
unranked and flagged (``non_finite_reward:k``) in every control, as :meth:`Constructor.finalize`
does for ``pointwise``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register
from arenabench.rewards.pointwise import Pointwise


def true_quality(group, who: str) -> np.ndarray:
    """The group's hidden qualities; one clear ValueError when a trajectory has none."""
    missing = [t.id for t in group.trajectories if "quality" not in t.meta]
    if missing:
        raise ValueError(
            f"{who} is an oracle control: it needs every trajectory's hidden true quality "
            f"(Trajectory.meta['quality']); missing for {len(missing)} of {len(group)} "
            f"(first: {missing[0]!r})"
        )
    out = []
    for t in group.trajectories:
        try:
            out.append(float(t.meta["quality"]))
        except (TypeError, ValueError):
            bad = t.meta["quality"]
            raise ValueError(f"{who}: meta['quality'] of {t.id!r} is not a number: {bad!r}") from None
    return np.array(out)


def _finite_ranks(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """0-based ranks of ``values`` (best = highest, ties share the mean rank); non-finite
    entries are unranked (NaN) and flagged, as ``finalize`` treats a non-finite reward."""
    bad = ~np.isfinite(values)
    flags = [f"non_finite_reward:{int(np.isinf(values).sum())}"] if np.isinf(values).any() else []
    return ranks_from_keys(np.where(bad, math.nan, values)), flags


@register("oracle")
@dataclass
class Oracle(Constructor):
    """Control: reward = hidden true quality (no judge call), GRPO standardization — a noiseless
    pointwise judge. Needs ``meta["quality"]`` on every trajectory; ``votes`` is unused.

    No information, no advantage: it asks no judge, so judge ties and failures do not reach it;
    equal qualities get equal rewards (advantage 0)."""

    unused_params = ("votes", "order")  # no judge asked

    def validate_group(self, group) -> None:
        super().validate_group(group)
        true_quality(group, self.name)

    def play(self, group, rng):
        q = true_quality(group, self.name)
        flags = ["singleton_group"] if len(group) == 1 else []
        return Outcome(reward=q, flags=flags, extra={"quality": q})
        yield  # a generator that asks the judge nothing


@register("rank_oracle")
@dataclass
class RankOracle(Constructor):
    """Control: rank by hidden true quality → ArenaRL rank reward 1 − rank/(N−1) → GRPO
    standardization (no judge call) — a perfect tournament. Needs ``meta["quality"]``; ``votes``
    is unused.

    No information, no advantage: it asks no judge; equal qualities share their rank."""

    unused_params = ("votes", "order")  # no judge asked

    def validate_group(self, group) -> None:
        super().validate_group(group)
        true_quality(group, self.name)

    def play(self, group, rng):
        q = true_quality(group, self.name)
        rank, flags = _finite_ranks(q)
        if len(group) == 1:
            flags.append("singleton_group")
        return Outcome(rank=rank, flags=flags, extra={"quality": q})
        yield  # a generator that asks the judge nothing


@register("pointwise_rank")
@dataclass
class PointwiseRank(Pointwise):
    """Control: pointwise judge scores (the same requests as ``pointwise``) → their ranks →
    ArenaRL rank reward 1 − rank/(N−1) → standardization: pointwise's information in a
    tournament's shape. Its ranks equal the pointwise arm's ranks on the same replies.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Equal scores share their rank; a failed trajectory is
    unranked; all equal or all failed: advantage 0."""

    def play(self, group, rng):
        outcome = yield from super().play(group, rng)
        score = np.asarray(outcome.reward, dtype=float)
        rank, flags = _finite_ranks(score)
        return Outcome(rank=rank, flags=outcome.flags + flags, extra=outcome.extra)
