"""The judge protocol: judges answer *batches* so the engine can send one batch per wave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest, RankJudgment, RankRequest


@runtime_checkable
class PairwiseJudge(Protocol):
    """Scores both sides of each request (ArenaRL style, e.g. 0–10), or reports a failure."""

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]: ...


@runtime_checkable
class PointwiseJudge(Protocol):
    """One absolute score per request (the pointwise LLM-as-judge baseline)."""

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]: ...


@runtime_checkable
class ListwiseJudge(Protocol):
    """One ranking of a shown list per request (RULER's listwise call, a k-wise match), as one
    score per shown item (``types.RankJudgment``), or a failure."""

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]: ...
