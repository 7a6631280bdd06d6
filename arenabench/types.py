"""Plain data types shared by judges, the engine and constructors."""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

import numpy as np


def content_hash(text: str) -> int:
    """A stable 64-bit hash of text (Python's ``hash`` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class Trajectory:
    """One rollout. ``meta`` is free-form (simulated judges read ``meta["quality"]``)."""

    id: str
    text: str
    length: int = 0
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @cached_property
    def key(self) -> int:
        """Content key: two trajectories with the same text get the same judgments."""
        return content_hash(self.text)


@dataclass(frozen=True)
class Group:
    """The N rollouts of one prompt; ``anchor`` indexes the greedy (temperature 0) one, if any."""

    prompt: str
    trajectories: tuple[Trajectory, ...]
    anchor: int | None = None
    # Judged but never rewarded: rollouts of a fixed reference policy (RRC's AGR anchors).
    # A Match index ``N + k`` names ``references[k]``.
    references: tuple[Trajectory, ...] = ()
    # Free-form per-prompt data: a verifier's reference ``answer``, a simulator's hidden
    # ``prompt_quality``. Not part of equality.
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "trajectories", tuple(self.trajectories))
        object.__setattr__(self, "references", tuple(self.references))
        n = len(self.trajectories)
        if n < 1:
            raise ValueError("a group needs at least one trajectory (N >= 1), got N=0")
        if self.anchor is not None and not 0 <= self.anchor < n:
            raise ValueError(f"anchor index {self.anchor} is outside the group (N={n})")

    def __len__(self) -> int:
        return len(self.trajectories)

    @cached_property
    def key(self) -> int:
        return content_hash(self.prompt)

    @property
    def arena(self) -> tuple[Trajectory, ...]:
        """Everything a Match may index: the N rollouts, then the references."""
        return self.trajectories + self.references


# --- what constructors ask the engine for -------------------------------------------------


@dataclass(frozen=True)
class Match:
    """A pairwise comparison of trajectories ``i`` and ``j`` of one group.

    The engine expands it into both orders (A=i,B=j and A=j,B=i) times ``votes`` samples, or,
    when ``first`` is ``i`` or ``j``, into that one order (``first`` in slot A) times ``votes``.
    Constructors ask with ``first=None``; the engine sets it from the constructor's order policy
    (``arenabench/order.py``).
    """

    i: int
    j: int
    votes: int = 1
    first: int | None = None
    # the judge sample index of the first vote (votes use sample, sample + 1, …): a rematch of a
    # pair already judged asks the next samples, so that it is a new judgment — a judge whose
    # reply is a function of the request (every judge here, and the judgment cache) would
    # otherwise replay the earlier verdict (``brackets.play_games``)
    sample: int = 0

    def __post_init__(self) -> None:
        if self.first is not None and self.first not in (self.i, self.j):
            raise ValueError(f"Match.first must be None, i or j; got {self.first} for ({self.i}, {self.j})")


@dataclass(frozen=True)
class Score:
    """A pointwise scoring of trajectory ``i`` with ``votes`` samples."""

    i: int
    votes: int = 1


@dataclass(frozen=True)
class Rank:
    """A listwise ranking of trajectories ``items`` (k ≥ 2 indices of one group) in one judge call,
    shown in the listed order (numbered 1…k), ``votes`` samples (``sample``, ``sample`` + 1, …; a
    re-ask of the same list asks the next samples, as :class:`Match` does). RULER's listwise call
    and Tournament-GRPO's k-wise match are both a ``Rank``."""

    items: tuple[int, ...]
    votes: int = 1
    sample: int = 0

    def __post_init__(self) -> None:
        if len(self.items) < 2 or len(set(self.items)) != len(self.items):
            raise ValueError(f"Rank.items must be k >= 2 distinct indices; got {self.items}")


@dataclass
class MatchResult:
    """Outcome of a :class:`Match`.

    ``score_i``/``score_j`` are the two orders' scores *summed* (ArenaRL's bidirectional
    protocol), each order averaged over its successful votes. If one order failed entirely
    the other is doubled so the scale stays comparable (``partial``); a match shown in one
    order only (an order policy other than ``both``) is doubled the same way, without the
    flag (``one_order`` says so). If every request failed the scores are NaN and ``failed`` is
    set. ``samples`` holds every successful per-request (score_i, score_j) for voting
    constructors, and ``orders`` the order each came from (0: i shown first, 1: j shown first).
    """

    i: int
    j: int
    score_i: float
    score_j: float
    failed: bool = False
    partial: bool = False
    samples: list[tuple[float, float]] = field(default_factory=list)
    # P(i is better), per successful sample (order 1's P(A) mapped to 1 − P(A)) and its
    # mean over orders; NaN when the judge reports no probabilities.
    probs: list[float] = field(default_factory=list)
    prob_i: float = math.nan
    orders: list[int] = field(default_factory=list)
    one_order: bool = False  # shown in one slot order only (Match.first set by an order policy)

    @property
    def winner(self) -> int | None:
        """Index of the winner, or None for a tie or a failed match."""
        if self.failed or self.score_i == self.score_j:
            return None
        return self.i if self.score_i > self.score_j else self.j


@dataclass
class ScoreResult:
    i: int
    score: float  # mean over successful votes; NaN if all failed
    failed: bool = False
    samples: list[float] = field(default_factory=list)


@dataclass
class RankResult:
    """Outcome of a :class:`Rank`: ``scores[m]`` belongs to ``items[m]`` (higher = better), the mean
    over the successful votes of each vote's :class:`RankJudgment` scores; NaN scores and
    ``failed`` when every vote failed. ``samples`` holds every successful vote's scores."""

    items: tuple[int, ...]
    scores: tuple[float, ...]
    failed: bool = False
    samples: list[tuple[float, ...]] = field(default_factory=list)


# --- what judges see -----------------------------------------------------------------------


@dataclass(frozen=True)
class PairRequest:
    """One pairwise judge call: is ``a`` (shown first) or ``b`` better for ``prompt``?"""

    prompt: str
    a: Trajectory
    b: Trajectory
    sample: int = 0
    attempt: int = 0  # retry number; a deterministic judge may ignore it


@dataclass(frozen=True)
class PointRequest:
    prompt: str
    traj: Trajectory
    sample: int = 0
    attempt: int = 0


@dataclass(frozen=True)
class RankRequest:
    """One listwise judge call: rank ``trajs`` (shown in this order, numbered 1…k) for ``prompt``."""

    prompt: str
    trajs: tuple[Trajectory, ...]
    sample: int = 0
    attempt: int = 0


@dataclass(frozen=True)
class RankJudgment:
    """A listwise judge's reply: one score per shown item, in the shown order, higher = better.
    A judge that answers with an order gives each item the number of items ranked below it
    (k − 1 for the first; items the judge ties share the mean of their positions' points, e.g.
    two tied at the top of 3: 1.5 each); a judge that answers with per-item scores gives those."""

    scores: tuple[float, ...]

    @classmethod
    def from_order(cls, tiers: Any, k: int) -> RankJudgment:
        """The judgment of an order: ``tiers`` lists the shown positions (0-based) best tier first,
        each tier a sequence of positions the judge tied (a strict order: one position a tier),
        covering each of the ``k`` positions exactly once. Each item gets the number of items
        ranked below it, tied items the mean of their positions' points: ``[[2], [0, 1], [3]]``
        → ``(1.5, 1.5, 3.0, 0.0)``. The LLM parser calls it; the simulated judges compute the same
        convention vectorized from their draws (``judges.simulated.ranked_below``; a test holds
        the two equal); a bad cover is a ``ValueError``."""
        scores = [math.nan] * k
        below = k  # the items ranked at or below the next tier's first position
        for tier in tiers:
            below -= len(tier)
            points = below + (len(tier) - 1) / 2.0  # mean of (below + len − 1), …, below
            for p in tier:
                if not 0 <= p < k or scores[p] == scores[p]:  # out of range, or already placed
                    raise ValueError(f"tiers {tiers!r} do not cover positions 0..{k - 1} once each")
                scores[p] = points
        if below != 0 or any(s != s for s in scores):
            raise ValueError(f"tiers {tiers!r} do not cover positions 0..{k - 1} once each")
        return cls(tuple(scores))


@dataclass(frozen=True)
class PairJudgment:
    """Both sides' scores; ``prob_a`` = the judge's P(A is better) when it exposes one
    (a logprob-reading LLM judge or a simulated judge) — what RRC's PRC rewards with."""

    score_a: float
    score_b: float
    prob_a: float | None = None


@dataclass(frozen=True)
class JudgeFailure:
    """A judge call that produced no usable verdict (timeout, error, malformed, NaN)."""

    reason: str


@dataclass(frozen=True)
class JudgeTraits:
    """What a constructor's rules may know about the judge it runs against, as plain values: the
    engine reads them from its judge once per step (:meth:`of`) and hands them to the
    constructor (``Constructor.bind_judge``), so constructors never hold or import a judge.

    ``rejudge_share``: the share of a reply's noise a judge draws afresh when the same request is
    asked again under a new ``sample`` index (1: an independent judgment, the simulated presets;
    0: the same reply, a temperature-0 LLM judge or a fitted judge without re-scores), or None
    when the judge does not declare it. A judge declares it as the attribute ``rejudge_share``;
    wrappers (cache, faults, latency, the stack) forward their inner judge's. Why it matters: a
    bracket's rematch of a pair already judged is new evidence only to the extent the judge
    re-judges (``seeded_single_elim:anchor_seed=auto``, docs/constructors-notes.md §3).
    ``judge``: the judge's class name, for log lines."""

    rejudge_share: float | None = None
    judge: str = ""

    @classmethod
    def of(cls, judge: Any) -> JudgeTraits | None:
        """``judge``'s traits (None for no judge); a declared ``rejudge_share`` outside [0, 1] is
        an error."""
        if judge is None:
            return None
        share = getattr(judge, "rejudge_share", None)
        if share is not None:
            share = float(share)
            if not 0.0 <= share <= 1.0:
                raise ValueError(
                    f"{type(judge).__name__}.rejudge_share must be in [0, 1] or None; got {share!r}"
                )
        return cls(rejudge_share=share, judge=type(judge).__name__)


# The reason prefix of a request a served judge gave up on after its outage deadline
# (``"outage: <last transport error>"``): the engine does not re-ask it and counts it as lost.
OUTAGE = "outage"


# --- what the engine accepts from a judge ---------------------------------------------------


def real_value(x: Any) -> tuple[float | None, str | None]:
    """``(float(x), None)`` for a finite real number of any type — ``float``, ``int``, numpy's
    floating and integer scalars, ``Fraction``, ``Decimal`` — else ``(None, reason)``. A bool
    (Python's or numpy's) is a verdict's type error, not a score of 0 or 1; a string is never
    parsed (``"7"`` is a malformed reply, not 7); NaN and ±inf carry no verdict."""
    if type(x) is float:  # the common case first
        return (x, None) if math.isfinite(x) else (None, "non-finite score")
    if isinstance(x, bool | np.bool_):
        return None, "bool score"
    if not isinstance(x, numbers.Real | Decimal):
        if x is None or isinstance(x, str):
            return None, "non-numeric score"
        return None, f"bad reply type {type(x).__name__}"
    try:
        v = float(x)
    except (OverflowError, ValueError):  # an int or Fraction past the float range
        return None, "non-finite score"
    return (v, None) if math.isfinite(v) else (None, "non-finite score")


def pair_reply(x: Any) -> tuple[PairJudgment | None, str | None]:
    """A pairwise judge's reply validated and normalized once, where it enters the engine (and
    the judgment cache): ``(PairJudgment with float fields, None)`` or ``(None, reason)`` for a
    reply the engine retries and then counts as a failure (:class:`JudgeFailure`'s own reason, a
    reply that is no ``PairJudgment``, a score that is no finite real number, a probability
    outside [0, 1]). Downstream code (tie tests, signs, sums) can then rely on Python floats."""
    if isinstance(x, JudgeFailure):
        return None, x.reason or "failure"
    if not isinstance(x, PairJudgment):
        return None, f"bad reply type {type(x).__name__}"
    a, b, p = x.score_a, x.score_b, x.prob_a
    if type(a) is float and type(b) is float and (p is None or type(p) is float):
        if not (math.isfinite(a) and math.isfinite(b)):
            return None, "non-finite score"
        if p is not None and not 0.0 <= p <= 1.0:  # NaN fails the comparison too
            return None, "probability outside [0, 1]"
        return x, None
    a, why_a = real_value(a)
    b, why_b = real_value(b)
    if a is None or b is None:
        return None, why_a or why_b
    if p is not None:
        p, why_p = real_value(p)
        if p is None or not 0.0 <= p <= 1.0:
            return None, "probability outside [0, 1]" if why_p in (None, "non-finite score") else why_p
    return PairJudgment(a, b, p), None


def point_reply(x: Any) -> tuple[float | None, str | None]:
    """A pointwise judge's reply validated and normalized once: ``(float, None)`` or
    ``(None, reason)`` (as :func:`pair_reply`)."""
    if isinstance(x, JudgeFailure):
        return None, x.reason or "failure"
    return real_value(x)


def rank_reply(x: Any, k: int) -> tuple[RankJudgment | None, str | None]:
    """A listwise judge's reply for a list of ``k`` validated and normalized once (as
    :func:`pair_reply`): ``(RankJudgment with k float scores, None)`` or ``(None, reason)`` — a
    failure, a reply that is no ``RankJudgment``, a wrong number of scores, a score that is no
    finite real number."""
    if isinstance(x, JudgeFailure):
        return None, x.reason or "failure"
    if not isinstance(x, RankJudgment):
        return None, f"bad reply type {type(x).__name__}"
    if not isinstance(x.scores, tuple) or len(x.scores) != k:
        n = len(x.scores) if isinstance(x.scores, tuple | list) else type(x.scores).__name__
        return None, f"ranking of {n} items for a list of {k}"
    if all(type(v) is float and math.isfinite(v) for v in x.scores):
        return x, None
    out = []
    for v in x.scores:
        f, why = real_value(v)
        if f is None:
            return None, why
        out.append(f)
    return RankJudgment(tuple(out)), None


# --- what constructors return ---------------------------------------------------------------


@dataclass
class Accounting:
    """What one group's rewards cost: the engine counts it while the group's constructor plays."""

    comparisons: int = 0  # matches the constructor asked for
    judge_calls: int = 0  # requests this group paid for (first asker of a shared one), retries included
    waves: int = 0
    failures: int = 0  # judge requests that still failed after all retries
    retries: int = 0
    lost: int = 0  # of those failures, requests the judge gave up on after its outage deadline


@dataclass
class ConstructorResult:
    """Per-trajectory reward/advantage/rank plus the cost and health of producing them.

    ``rank`` is 0 for the best; tied trajectories share their average rank; NaN marks a
    trajectory that could not be ranked (its advantage is 0 and a flag says why).
    """

    reward: np.ndarray
    advantage: np.ndarray
    rank: np.ndarray
    comparisons: int = 0
    judge_calls: int = 0
    waves: int = 0
    failures: int = 0  # judge requests that still failed after all retries
    retries: int = 0
    lost: int = 0  # of those failures, lost to a judge outage (the group is masked: advantages.is_masked)
    flags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
