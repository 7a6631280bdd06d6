"""Degenerate judges for tests and the fuzz: one that ties every comparison, one that always fails.

They are the two extreme cases of "the judge's evidence does not support a ranking decision":
every constructor, given either, should hand out no advantage (all zeros, or unranked members
with advantage 0) — see ``tests/rewards/test_ties.py``.

* :class:`ConstantJudge` scores both sides of every comparison ``score`` (default 7 – 7, a tie
  in either order and in the two orders' sum) with ``P(A better) = 0.5``, every pointwise
  request ``point`` (default 0.7), and ties every item of a listwise request (each item gets
  the mean of the k positions' points, (k − 1)/2: ``types.RankJudgment``).
* :class:`FailingJudge` answers every request with a :class:`~arenabench.types.JudgeFailure`
  (a retry fails again), so the engine counts every request as a failure.

Both count what reached them (``pair_requests``, ``point_requests``, ``rank_requests``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest, RankJudgment, RankRequest


class ConstantJudge:
    """Every comparison a tie ``score`` – ``score`` (P(A) = ``prob``), every pointwise score
    ``point``, every listwise ranking a tie of all its items."""

    rejudge_share = 0.0  # a re-asked request gets the same reply

    def __init__(self, score: float = 7.0, point: float = 0.7, prob: float | None = 0.5):
        for name, v in (("score", score), ("point", point)):
            if not (isinstance(v, int | float) and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number; got {v!r}")
        if prob is not None and not (math.isfinite(prob) and 0.0 <= prob <= 1.0):
            raise ValueError(f"prob must be None or in [0, 1]; got {prob!r}")
        self.score, self.point, self.prob = float(score), float(point), prob
        self.pair_requests = self.point_requests = self.rank_requests = 0

    def __repr__(self) -> str:
        return f"ConstantJudge(score={self.score:g}, point={self.point:g}, prob={self.prob})"

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        self.pair_requests += len(requests)
        return [PairJudgment(self.score, self.score, self.prob) for _ in requests]

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        self.point_requests += len(requests)
        return [self.point for _ in requests]

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        self.rank_requests += len(requests)
        return [RankJudgment(((len(r.trajs) - 1) / 2,) * len(r.trajs)) for r in requests]


class FailingJudge:
    """Every request, pairwise, pointwise or listwise, on every attempt: ``JudgeFailure(reason)``."""

    rejudge_share = 0.0  # a re-asked request fails again

    def __init__(self, reason: str = "failing judge: no verdict"):
        self.reason = reason
        self.pair_requests = self.point_requests = self.rank_requests = 0

    def __repr__(self) -> str:
        return f"FailingJudge({self.reason!r})"

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        self.pair_requests += len(requests)
        return [JudgeFailure(self.reason) for _ in requests]

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        self.point_requests += len(requests)
        return [JudgeFailure(self.reason) for _ in requests]

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        self.rank_requests += len(requests)
        return [JudgeFailure(self.reason) for _ in requests]


__all__ = ["ConstantJudge", "FailingJudge"]
