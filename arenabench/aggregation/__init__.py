"""Rank aggregation from pairwise judge evidence: Kemeny orders and Bradley-Terry strengths."""

from arenabench.aggregation.bradley_terry import bradley_terry, bradley_terry_choix, minmax, soft_outcome
from arenabench.aggregation.kemeny import (
    disagreement,
    is_swap_optimal,
    kemeny_exact,
    kemeny_greedy,
    order_wins,
)

__all__ = [
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
