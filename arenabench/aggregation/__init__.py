"""Rank aggregation from pairwise judge evidence: Kemeny orders, Bradley-Terry strengths, and the
rules a constructor's ``aggregation`` option picks among (``rankings.py``)."""

from arenabench.aggregation.bradley_terry import bradley_terry, bradley_terry_choix, minmax, soft_outcome
from arenabench.aggregation.kemeny import (
    disagreement,
    is_swap_optimal,
    kemeny_exact,
    kemeny_greedy,
    order_wins,
    pool_unsupported,
)
from arenabench.aggregation.rankings import (
    AGGREGATIONS,
    aggregate,
    bradley_terry_scores,
    check_aggregation,
    copeland,
    elo,
    kemeny,
    win_rate,
)

__all__ = [
    "AGGREGATIONS",
    "aggregate",
    "bradley_terry_scores",
    "check_aggregation",
    "copeland",
    "elo",
    "kemeny",
    "pool_unsupported",
    "win_rate",
    "bradley_terry",
    "bradley_terry_choix",
    "disagreement",
    "is_swap_optimal",
    "kemeny_exact",
    "kemeny_greedy",
    "minmax",
    "order_wins",
    "soft_outcome",
]
