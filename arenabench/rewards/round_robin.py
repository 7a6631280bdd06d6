"""ArenaRL round-robin: every pair once (N(N−1)/2 comparisons) — the fidelity gold standard."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from arenabench.advantages import ranks_from_keys
from arenabench.aggregation import aggregate, check_aggregation
from arenabench.rewards.base import (
    Constructor,
    Outcome,
    match_verdicts,
    mean_scores,
    register,
    trivial_outcome,
)
from arenabench.rewards.failures import failure_flags, split_failures


@register("round_robin")
@dataclass
class RoundRobin(Constructor):
    """ArenaRL's round-robin: every pair once (N(N−1)/2 comparisons), rank by normalized win rate.

    Score = normalized win rate ``(1/(N−1)) Σ_j (1[s_i > s_j] + ½·1[s_i = s_j])``: a tie is
    half a win for each side. The paper counts a tie as no win; on a continuous judge ties
    essentially never occur and the two rules agree, but on an integer-grid rubric judge (0–10
    per side: over half of all matches tie at N = 8) the paper's rule throws that information
    away — a player that ties is scored like one that loses. Rank by the win rate, ties broken
    by mean bidirectional score. A failed match is left out of both players' denominators
    (flagged); a player with no decided match is unranked.

    ``aggregation`` replaces the win rate by another rule over the same match verdicts
    (``copeland``, ``elo``, ``bradley_terry``, ``kemeny``, ``kemeny_exact``:
    ``arenabench/aggregation/rankings.py``), ties still broken by mean bidirectional score.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Every pair is played, so nothing here rests on a coin, seed or index:
    all ties give every player rate ½ and all failures leave everyone unranked (advantage 0).
    Every aggregation gives all-tied players equal scores (Kemeny pools neighbours no evidence
    separates).
    """

    aggregation: str = "win_rate"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_aggregation(self.aggregation, self.name)

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        results = yield [self.match(i, j) for i, j in combinations(range(n), 2)]
        i, j, o = match_verdicts(results)
        rate = aggregate("win_rate", n, i, j, o)
        key = rate if self.aggregation == "win_rate" else aggregate(self.aggregation, n, i, j, o)
        rank = ranks_from_keys(key, mean_scores(n, results))
        flags = failure_flags(split_failures(results)[1])
        extra = {"win_rate": rate} if key is rate else {"win_rate": rate, self.aggregation: key}
        return Outcome(rank=rank, flags=flags, extra=extra)
