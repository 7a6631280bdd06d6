"""The judge protocol: judges answer *batches* so the engine can send one batch per wave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest


@runtime_checkable
class PairwiseJudge(Protocol):
    """Scores both sides of each request (ArenaRL style, e.g. 0–10), or reports a failure."""

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]: ...


@runtime_checkable
class PointwiseJudge(Protocol):
    """One absolute score per request (the pointwise LLM-as-judge baseline)."""

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]: ...


def rejudge_share(judge) -> float | None:
    """The share of a reply's noise a judge draws afresh when the same request is asked again
    under a new ``sample`` index (1: an independent judgment, the simulated presets; 0: the same
    reply, a temperature-0 LLM judge or a fitted judge without re-scores), or None when the judge
    does not declare it. A judge declares it as the attribute ``rejudge_share``; wrappers (cache,
    faults, latency, the stack) forward their inner judge's. Why it matters: a bracket's rematch
    of a pair already judged is new evidence only to the extent the judge re-judges
    (``seeded_single_elim:anchor_seed=auto``, docs/constructors-notes.md §3)."""
    share = getattr(judge, "rejudge_share", None)
    if share is None:
        return None
    share = float(share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"{type(judge).__name__}.rejudge_share must be in [0, 1] or None; got {share!r}")
    return share
