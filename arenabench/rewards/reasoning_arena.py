"""Reasoning Arena's trace tournaments: soft mirrored outcomes, Bradley-Terry, min-max reward.

Every judge sample of a comparison is one observation: its verdict (the side with the
higher score) becomes the outcome γ for a win, ½ for a tie, 1−γ for a loss, and each is
mirrored (o_ij + o_ji = 1). A Bradley-Terry fit with L2 regularization on the (incomplete)
comparison graph gives strengths; the reward is their min-max to [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from arenabench.aggregation import bradley_terry, minmax, soft_outcome
from arenabench.rewards.base import Constructor, Outcome, failure_flags, register, trivial_outcome


def observations(results, gamma: float) -> tuple[list[tuple[int, int, float]], int]:
    """(i, j, soft outcome) for every successful sample, and the number of failed matches."""
    obs: list[tuple[int, int, float]] = []
    failed = 0
    for m in results:
        if m.failed:
            failed += 1
            continue
        for a, b in m.samples:
            obs.append((m.i, m.j, float(soft_outcome(np.sign(a - b), gamma))))
    return obs, failed


def fit(n: int, obs, l2: float) -> np.ndarray:
    if not obs:
        return np.zeros(n)
    i, j, o = (np.array(c) for c in zip(*obs, strict=True))
    return bradley_terry(n, i.astype(int), j.astype(int), o.astype(float), l2=l2)


@dataclass
class _ArenaBase(Constructor):
    gamma: float = 0.9
    l2: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.gamma, int | float) and 0.5 < self.gamma <= 1.0):
            raise ValueError(
                f"{self.name}: gamma (the outcome of a win) must be in (0.5, 1]; got {self.gamma!r}"
            )
        if not (isinstance(self.l2, int | float) and math.isfinite(self.l2) and self.l2 > 0):
            raise ValueError(f"{self.name}: l2 must be a finite number > 0; got {self.l2!r}")

    def outcome(self, n: int, obs, failed: int) -> Outcome:
        theta = fit(n, obs, self.l2)
        seen = np.zeros(n, dtype=bool)
        for i, j, _ in obs:
            seen[[i, j]] = True
        reward = np.full(n, np.nan)
        if seen.any():
            reward[seen] = minmax(theta[seen])
        flags = failure_flags(failed)
        return Outcome(reward=reward, flags=flags, extra={"strength": theta})


@register("reasoning_arena_live")
@dataclass
class ReasoningArenaLive(_ArenaBase):
    """Traces arrive in index order; each new one plays the current best, worst and median
    of those already placed (fewer while fewer exist): 0 + 1 + 2 + 3(N−3) = 3N − 6
    comparisons (18 at N = 8) in N − 1 waves. "Current" = the BT fit so far, ties by
    arrival. Then BT over everything, min-max to [0, 1] (γ = ``gamma``, L2 = ``l2``; our
    defaults — a trace with no successful comparison is unranked, flagged).
    """

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        obs: list[tuple[int, int, float]] = []
        failed = 0
        for t in range(1, n):
            placed = list(range(t))
            theta = fit(n, obs, self.l2)
            standing = sorted(placed, key=lambda k: (-theta[k], k))
            picks = [standing[0], standing[-1], standing[len(standing) // 2]]
            opponents = list(dict.fromkeys(picks))
            results = yield [self.match(t, o) for o in opponents]
            new, f = observations(results, self.gamma)
            obs += new
            failed += f
        return self.outcome(n, obs, failed)


@register("reasoning_arena_full")
@dataclass
class ReasoningArenaFull(_ArenaBase):
    """The O(N²) reference of :class:`ReasoningArenaLive`: every pair once, same outcomes,
    BT fit and min-max."""

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        results = yield [self.match(i, j) for i, j in combinations(range(n), 2)]
        return self.outcome(n, *observations(results, self.gamma))
