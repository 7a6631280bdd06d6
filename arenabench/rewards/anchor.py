"""ArenaRL anchor-based ranking: each exploratory rollout vs the greedy anchor (N−1 comparisons)."""

from __future__ import annotations

from dataclasses import dataclass

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.brackets import anchor_phase
from arenabench.rewards.failures import failure_flags


@register("anchor")
@dataclass
class Anchor(Constructor):
    """Rank by score against the greedy anchor (the anchor by its mean score). Cheapest
    topology; cannot resolve two explorers that beat the anchor by similar margins.
    A failed comparison leaves that explorer unranked (advantage 0, flagged).

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Equal scores against the anchor share their rank (nothing
    breaks them by index); a judge that ties every call gives every explorer the anchor's own
    score, and one that fails every call leaves everyone unranked: advantage 0.
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        score, _, failed = yield from anchor_phase(self, group)
        flags = failure_flags(failed)
        return Outcome(rank=ranks_from_keys(score), flags=flags, extra={"anchor_score": score})
