"""Reasoning Arena's trace tournaments: soft mirrored outcomes, Bradley-Terry, min-max reward.

Every judge sample of a comparison is one observation: its verdict (the side with the
higher score) becomes the outcome γ for a win, ½ for a tie, 1−γ for a loss, and each is
mirrored (o_ij + o_ji = 1). A Bradley-Terry fit with L2 regularization on the (incomplete)
comparison graph gives strengths; the reward is their min-max to [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from arenabench.aggregation.rankings import snap
from arenabench.rewards.base import Outcome, register, trivial_outcome
from arenabench.rewards.bradley_terry import BradleyTerryBase, Observation, evidence, unit_reward
from arenabench.rewards.failures import failure_flags


@dataclass
class _ArenaBase(BradleyTerryBase):
    gamma: float = 0.9
    l2: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_fit_params()

    def outcome(self, n: int, obs: list[Observation], failed: int, init=None) -> Outcome:
        theta = self.fit(n, obs, init)
        reward = unit_reward(theta, evidence(n, obs))
        return Outcome(reward=reward, flags=failure_flags(failed), extra={"strength": theta})


@register("reasoning_arena_live")
@dataclass
class ReasoningArenaLive(_ArenaBase):
    """Reasoning Arena's live tournament: each new trace plays the current best, worst and median
    (3N − 6 comparisons in N − 1 waves); Bradley-Terry over all, min-max to [0, 1].

    Traces arrive in index order; each new one plays the current best, worst and median
    of those already placed (fewer while fewer exist): 0 + 1 + 2 + 3(N−3) = 3N − 6
    comparisons (18 at N = 8) in N − 1 waves. "Current" = the BT fit so far, ties by
    arrival (strengths within the fit's round-off, 1e-7, are ties: ``snap``; each wave's fit
    starts from the last). Then BT over everything, min-max to [0, 1] (γ = ``gamma``, L2 = ``l2``; our
    defaults — a trace with no successful comparison is unranked, flagged).

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. A tie is ½ to each side (the paper's soft outcome) and a
    failed comparison is no observation, so all ties give equal strengths and all failures no
    evidence: advantage 0. Arrival order and "ties by arrival" only choose which pairs are asked;
    the reward is the BT fit of the judge's verdicts alone.
    """

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        obs: list[Observation] = []
        failed = 0
        theta = np.zeros(n)
        for t in range(1, n):
            theta = self.fit(n, obs, theta)
            standing = by_strength(theta, t)
            picks = [standing[0], standing[-1], standing[len(standing) // 2]]
            opponents = list(dict.fromkeys(picks))
            results = yield [self.match(t, o) for o in opponents]
            new, f, _ = self.observations(results)
            obs += new
            failed += f
        return self.outcome(n, obs, failed, theta)


def by_strength(theta: np.ndarray, t: int) -> list[int]:
    """The first ``t`` traces, strongest first; strengths within the fit's round-off (``snap``)
    tie, and ties go by arrival."""
    level = snap(theta[:t])
    return sorted(range(t), key=lambda k: (-level[k], k))


@register("reasoning_arena_full")
@dataclass
class ReasoningArenaFull(_ArenaBase):
    """The O(N²) reference of :class:`ReasoningArenaLive`: every pair once, same outcomes,
    BT fit and min-max.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. As for ``reasoning_arena_live``: a tie is ½ each, a failure
    no observation; all ties or all failures give advantage 0.
    """

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        results = yield [self.match(i, j) for i, j in combinations(range(n), 2)]
        obs, failed, _ = self.observations(results)
        return self.outcome(n, obs, failed)
