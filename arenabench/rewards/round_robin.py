"""ArenaRL round-robin: every pair once (N(N−1)/2 comparisons) — the fidelity gold standard."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, mean_scores, register, trivial_outcome
from arenabench.rewards.failures import failure_flags, split_failures


@register("round_robin")
@dataclass
class RoundRobin(Constructor):
    """Score = normalized win rate ``(1/(N−1)) Σ_j (1[s_i > s_j] + ½·1[s_i = s_j])``: a tie is
    half a win for each side. The paper counts a tie as no win; on a continuous judge ties
    essentially never occur and the two rules agree, but on an integer-grid rubric judge (0–10
    per side: over half of all matches tie at N = 8) the paper's rule throws that information
    away — a player that ties is scored like one that loses. Rank by the win rate, ties broken
    by mean bidirectional score. A failed match is left out of both players' denominators
    (flagged); a player with no decided match is unranked.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Every pair is played, so nothing here rests on a coin, seed or index:
    all ties give every player rate ½ and all failures leave everyone unranked (advantage 0).
    """

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        results = yield [self.match(i, j) for i, j in combinations(range(n), 2)]
        wins = np.zeros(n)
        decided = np.zeros(n)
        ok, failed = split_failures(results)
        for m in ok:
            decided[[m.i, m.j]] += 1
            if (w := m.winner) is not None:
                wins[w] += 1
            else:  # a tie: half a win each
                wins[[m.i, m.j]] += 0.5
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(decided > 0, wins / np.maximum(decided, 1), np.nan)
        rank = ranks_from_keys(rate, mean_scores(n, results))
        flags = failure_flags(failed)
        return Outcome(rank=rank, flags=flags, extra={"win_rate": rate})
