"""Constructor base class: a topology's ``play`` generator plus the shared rank → advantage path."""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from arenabench.advantages import rank_rewards, ranks_from_keys, standardize
from arenabench.order import check_order
from arenabench.registry import Registry
from arenabench.rewards.failures import failure_flags, split_failures  # noqa: F401 (failure_flags: re-exported)
from arenabench.types import (
    Accounting,
    ConstructorResult,
    Group,
    JudgeTraits,
    Match,
    MatchResult,
    Rank,
    RankResult,
    Score,
    ScoreResult,
)

Asks = list[Match | Score | Rank]  # one wave of requests from one group (``arenabench.kinds``)
Replies = list[MatchResult | ScoreResult | RankResult]  # their results, in the order asked


@dataclass
class Outcome:
    """What ``play`` returns: ranks (0 = best, NaN = unranked) or raw rewards, plus flags."""

    rank: np.ndarray | None = None
    reward: np.ndarray | None = None
    flags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


# ``play``'s protocol: yield a wave of asks, receive its replies, ..., return the outcome.
Play = Generator[Asks, Replies, Outcome]


@dataclass
class Constructor:
    """Base of every reward constructor.

    Subclasses are dataclasses whose fields are their parameters (so they pickle, and
    ``rewards.get(name, **params)`` can name the valid ones). ``votes`` is the number of
    judge samples per order of a comparison; ``ddof`` picks the std of the group
    standardization (0 = population, the project default); ``order`` is the order policy the
    engine shows each comparison in (``both``, ``random``, ``balanced``, ``fixed``:
    ``arenabench/order.py``; all but ``both`` cost half the judge calls).
    """

    name: ClassVar[str] = "?"
    needs_anchor: ClassVar[bool] = False
    # shared parameters that do nothing for this constructor (``arenabench list`` omits them):
    # ``order`` for judges asked for scores only, ``votes`` for those that ask no judge
    unused_params: ClassVar[tuple[str, ...]] = ()

    votes: int = 1
    ddof: int = 0
    # keyword-only, so it sits after each subclass's own parameters in their signatures
    order: str = field(default="both", kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.votes, int) or self.votes < 1:
            raise ValueError(f"{self.name}: votes must be an integer >= 1; got {self.votes!r}")
        if self.ddof not in (0, 1):
            raise ValueError(
                f"{self.name}: ddof must be 0 (population std) or 1 (sample std); got {self.ddof!r}"
            )
        check_order(self.order, self.name)

    # -- to implement ------------------------------------------------------------------------

    def play(self, group: Group, rng: np.random.Generator) -> Play:
        raise NotImplementedError

    def prepare(self, group: Group, step: int) -> Group:
        """The group the engine judges; AGR attaches its reference-policy anchors here."""
        return group

    def bind_reference(self, policy) -> None:
        """Use ``policy`` (``generate(group, n, generation)``) as this constructor's reference
        policy: a trainer hands over its frozen initial policy. Most constructors have none."""

    def bind_judge(self, traits: JudgeTraits | None) -> None:
        """Learn what this constructor's rules depend on from the traits of the judge the engine
        runs it against (``types.JudgeTraits``, e.g. its ``rejudge_share``; ``Engine.run`` hands
        them over before each step; None: no judge). Most constructors depend on none."""

    # -- shared --------------------------------------------------------------------------------

    def validate_group(self, group: Group) -> None:
        if self.needs_anchor and group.anchor is None and not self.trivial(group):
            raise ValueError(
                f"{self.name} needs a greedy anchor: build the Group with anchor=<index of the "
                "temperature-0 rollout>"
            )

    @staticmethod
    def trivial(group: Group) -> str | None:
        """Why a group cannot be ranked at all (size 1, all texts identical), or None."""
        if len(group) == 1:
            return "singleton_group"
        first = group.trajectories[0].key
        if all(t.key == first for t in group.trajectories):
            return "identical_trajectories"
        return None

    def match(self, i: int, j: int) -> Match:
        return Match(i, j, votes=self.votes)

    def finalize(
        self, group: Group, outcome: Outcome, accounting: Accounting | None = None
    ) -> ConstructorResult:
        """The group's result, built once from ``play``'s outcome and the engine's ``accounting``
        (so nothing edits a result after it is made)."""
        acc = accounting if accounting is not None else Accounting()
        n = len(group)
        flags = list(outcome.flags)
        if outcome.reward is not None:
            reward = np.asarray(outcome.reward, dtype=float)
            if np.isinf(reward).any():  # e.g. a vote mean past the float range: unranked, not ±inf
                flags.append(f"non_finite_reward:{int(np.isinf(reward).sum())}")
                reward = np.where(np.isinf(reward), np.nan, reward)
            rank = ranks_from_keys(reward) if outcome.rank is None else np.asarray(outcome.rank, float)
        else:
            rank = np.asarray(outcome.rank, dtype=float)
            reward = rank_rewards(rank)
        if rank.shape != (n,) or reward.shape != (n,):
            raise RuntimeError(f"{self.name} returned {rank.shape} ranks for a group of {n}")
        finite = bool(np.isfinite(reward).all())  # the common case: nothing to flag or zero below
        if not finite and (unranked := np.isnan(reward)).any():
            flags.append(f"unranked:{int(unranked.sum())}")
        adv = standardize(reward, ddof=self.ddof)
        if not adv.any() and "zero_advantage" not in flags:
            flags.append("zero_advantage")
        if acc.failures:
            flags.append(f"judge_failures:{acc.failures}")
        if acc.lost:
            flags.append(f"judge_outage:{acc.lost}")
        return ConstructorResult(
            # nan_to_num (a copy) only where needed: it costs as much as the rest of this method
            reward=reward.copy() if finite else np.nan_to_num(reward, nan=0.0),
            advantage=adv,
            rank=rank,
            comparisons=acc.comparisons,
            judge_calls=acc.judge_calls,
            waves=acc.waves,
            failures=acc.failures,
            retries=acc.retries,
            lost=acc.lost,
            flags=flags,
            extra=outcome.extra,
        )


def trivial_outcome(group: Group, why: str) -> Outcome:
    """All trajectories tied: equal rank, reward ½, zero advantage; no judge call spent."""
    n = len(group)
    return Outcome(rank=np.full(n, (n - 1) / 2.0), flags=[why])


REGISTRY: Registry[Constructor] = Registry("reward constructor")
register = REGISTRY.register


def match_verdicts(results: list[MatchResult]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The comparison graph of the matches that produced a verdict, in the order played: arrays
    (i, j, o) with o = 1 if i won, ½ a tie, 0 if j won (``aggregation.rankings``' input)."""
    ok = split_failures(results)[0]
    i = np.array([m.i for m in ok], dtype=int)
    j = np.array([m.j for m in ok], dtype=int)
    o = np.array([0.5 if m.winner is None else float(m.winner == m.i) for m in ok], dtype=float)
    return i, j, o


def mean_scores(n: int, results: list[MatchResult], prior: np.ndarray | None = None) -> np.ndarray:
    """Mean per-match (bidirectional, summed) score of each trajectory; NaN if it has none.
    ``prior``: one more score per trajectory counted as one more match where finite (the
    brackets' seeding score, ``brackets.tier_scores``), added before the match scores."""
    # Python lists, not numpy item by item (a tenth of the time): the same float64 sums, in order
    tot = [0.0] * n
    cnt = [0] * n
    if prior is not None:
        for p, s in enumerate(prior.tolist()):
            if math.isfinite(s):
                tot[p], cnt[p] = s, 1
    for m in split_failures(results)[0]:
        tot[m.i] += m.score_i
        tot[m.j] += m.score_j
        cnt[m.i] += 1
        cnt[m.j] += 1
    tot, cnt = np.array(tot, dtype=float), np.array(cnt, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
