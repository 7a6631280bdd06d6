"""ArenaRL anchor-based ranking: each exploratory rollout vs the greedy anchor (N−1 comparisons)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, failure_flags, register, trivial_outcome


def anchor_phase(c: Constructor, group):
    """Yield one wave of (i vs anchor) matches; return (scores, results, n_failed).

    Exploratory score = its bidirectional summed score against the anchor; the anchor's
    score = the mean of its scores over those comparisons. A failed comparison leaves the
    explorer's score NaN (and out of the anchor's mean).
    """
    a = group.anchor
    others = [i for i in range(len(group)) if i != a]
    results = yield [c.match(i, a) for i in others]
    score = np.full(len(group), np.nan)
    anchor_side = []
    failed = 0
    for m in results:
        if m.failed:
            failed += 1
            continue
        score[m.i] = m.score_i
        anchor_side.append(m.score_j)
    if anchor_side:
        score[a] = float(np.mean(anchor_side))
    return score, list(results), failed


@register("anchor")
@dataclass
class Anchor(Constructor):
    """Rank by score against the greedy anchor (the anchor by its mean score). Cheapest
    topology; cannot resolve two explorers that beat the anchor by similar margins.
    A failed comparison leaves that explorer unranked (advantage 0, flagged).
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        score, _, failed = yield from anchor_phase(self, group)
        flags = failure_flags(failed)
        return Outcome(rank=ranks_from_keys(score), flags=flags, extra={"anchor_score": score})
