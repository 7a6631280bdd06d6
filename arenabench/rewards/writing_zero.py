"""Writing-Zero's bootstrapped pairwise reward: each rollout vs one random peer, ±1."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.failures import failure_flags, split_failures


@register("writing_zero")
@dataclass
class WritingZero(Constructor):
    """Each rollout is compared with one reference drawn uniformly from the *other* rollouts
    of its group: +1 for a win, −1 for a loss, 0 for a tie; N comparisons in one wave (a
    pair drawn twice is judged once). A failed comparison leaves the rollout unranked.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. A tie scores 0, as the paper has it, so all ties give equal
    rewards and all failures leave everyone unranked (advantage 0). The peers are drawn from the
    group's seeded ``rng``, never by index.
    """

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        ref = (np.arange(n) + 1 + rng.integers(0, n - 1, size=n)) % n  # never itself
        results = yield [self.match(i, int(ref[i])) for i in range(n)]
        reward = np.full(n, np.nan)
        ok, failed = split_failures(results)
        for m in ok:
            w = m.winner
            reward[m.i] = 0.0 if w is None else (1.0 if w == m.i else -1.0)
        flags = failure_flags(failed)
        return Outcome(reward=reward, flags=flags, extra={"reference": ref})
