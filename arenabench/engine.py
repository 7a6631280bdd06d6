"""The engine: drives every group's constructor in lockstep, one judge batch per wave.

A constructor's ``play`` is a generator that yields a list of :class:`Match` /
:class:`Score` requests and receives their results, so a topology reads like its paper's
algorithm. The engine collects the requests of *all* groups of a step into one wave,
expands each match into both orders × votes, drops duplicate requests, sends one batch
per judge, retries failures (extra batches, not extra waves), and hands results back.
Failures that survive the retry budget are counted per group and flagged, never turned
silently into a tie; each constructor states how it treats a failed match.

One :meth:`Engine.run` is a :class:`StepRun`: its groups in play (:class:`GroupRun`: the
generator, the asks in flight, the group's :class:`~arenabench.types.Accounting`), a wave at a
time (``send_wave``), until each constructor's ``finalize`` has built its group's result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from arenabench.types import (
    Accounting,
    ConstructorResult,
    Group,
    JudgeFailure,
    Match,
    MatchResult,
    PairJudgment,
    PairRequest,
    PointRequest,
    Score,
    ScoreResult,
)

if TYPE_CHECKING:
    from arenabench.rewards.base import Asks, Constructor, Play, Replies


@dataclass
class StepStats:
    """Accounting for one engine run (one training step's worth of groups)."""

    groups: int = 0
    waves: int = 0
    judge_batches: int = 0
    requests: int = 0  # requests constructors asked for (before dedup)
    judge_calls: int = 0  # requests actually sent, retries included
    dedup_hits: int = 0
    retries: int = 0
    failures: int = 0  # requests that still failed after the retry budget
    failure_reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class StepResult:
    results: list[ConstructorResult]
    stats: StepStats


class Engine:
    """Runs a constructor over a step's groups against a pairwise and/or pointwise judge."""

    def __init__(self, judge=None, pointwise_judge=None, *, max_retries: int = 2, seed: int = 0):
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {max_retries}")
        self.judge = judge
        self.pointwise_judge = pointwise_judge if pointwise_judge is not None else judge
        self.max_retries = max_retries
        self.seed = seed

    def run(self, constructor: Constructor, groups: Sequence[Group], *, step: int = 0) -> StepResult:
        run = StepRun(self, constructor, groups, step)
        while run.playing:
            run.send_wave()
        return run.finish()


@dataclass
class GroupRun:
    """One group whose constructor is still playing: its ``play`` generator, the asks of the
    wave in flight, and what the group has cost so far."""

    group: Group
    play: Play
    asks: Asks = field(default_factory=list)
    cost: Accounting = field(default_factory=Accounting)


class StepRun:
    """The state of one :meth:`Engine.run`: the groups still playing, the results of those
    done, and the step's stats. Each wave flows one way: asks → judge batches → replies →
    each group's next asks (or its finished result)."""

    def __init__(self, engine: Engine, constructor: Constructor, groups: Sequence[Group], step: int):
        self.engine = engine
        self.constructor = constructor
        self.stats = StepStats(groups=len(groups))
        self.results: list[ConstructorResult | None] = [None] * len(groups)
        self.playing: dict[int, GroupRun] = {}
        # a constructor may attach references (a reference policy's anchors) before play
        prepared = [constructor.prepare(group, step) for group in groups]
        for g, group in enumerate(prepared):
            constructor.validate_group(group)
            rng = np.random.default_rng([engine.seed, step, g])
            self.playing[g] = GroupRun(group, constructor.play(group, rng))
            self.advance(g, None)

    def advance(self, g: int, replies: Replies | None) -> None:
        """Hand group ``g`` its replies; keep its next asks, or build its result if it is done."""
        run = self.playing[g]
        try:
            asks = list(run.play.send(replies))
        except StopIteration as stop:
            self.results[g] = self.constructor.finalize(run.group, stop.value, run.cost)
            del self.playing[g]
            return
        if not asks:
            raise RuntimeError(f"{self.constructor.name} yielded an empty wave; return instead")
        run.asks = asks
        run.cost.comparisons += sum(isinstance(a, Match) for a in asks)

    def send_wave(self) -> None:
        """Send every playing group's asks (one batch per judge, plus retry batches) and hand
        each group its replies."""
        self.stats.waves += 1
        replies = self._judge()
        for g, group_replies in replies.items():
            self.playing[g].cost.waves += 1
            self.advance(g, group_replies)

    def finish(self) -> StepResult:
        if self.playing:
            raise RuntimeError(f"{len(self.playing)} groups are still playing")
        return StepResult(results=self.results, stats=self.stats)  # type: ignore[arg-type]

    # -- one wave ------------------------------------------------------------------------

    def _judge(self) -> dict[int, Replies]:
        """Every playing group's replies to its asks, from one deduplicated batch per judge."""
        stats = self.stats
        pairs, points = _Batch(), _Batch()
        # refs[g][k]: the unique requests behind group g's k-th ask
        refs = {
            g: [_expand(ask, run.group, g, pairs, points) for ask in run.asks]
            for g, run in self.playing.items()
        }
        pair_out, pair_retried = self._send(
            self.engine.judge, "judge_pairs", pairs.reqs, _valid_pair, "pairwise"
        )
        point_out, point_retried = self._send(
            self.engine.pointwise_judge, "score_points", points.reqs, _valid_point, "pointwise"
        )
        stats.requests += pairs.asked + points.asked
        stats.dedup_hits += pairs.asked - len(pairs.reqs) + points.asked - len(points.reqs)
        stats.judge_calls += len(pairs.reqs) + len(points.reqs)
        for batch, retried in ((pairs, pair_retried), (points, point_retried)):
            for g in batch.owner:  # a shared request (and its retries) is paid by its first asker
                self.playing[g].cost.judge_calls += 1
            for idx, n in retried.items():
                cost = self.playing[batch.owner[idx]].cost
                cost.retries += n
                cost.judge_calls += n

        replies: dict[int, Replies] = {}
        for g, run in self.playing.items():
            replies[g] = []
            for ask, r in zip(run.asks, refs[g], strict=True):
                if isinstance(ask, Match):
                    got = [(order, pair_out[idx]) for order, idx in r]
                    replies[g].append(_match_result(ask, got))
                    run.cost.failures += sum(rep is None for _, rep in got)
                else:
                    got = [point_out[idx] for idx in r]
                    replies[g].append(_score_result(ask, got))
                    run.cost.failures += sum(rep is None for rep in got)
        return replies

    def _send(self, judge, method: str, reqs: list, check, kind: str) -> tuple[list, dict[int, int]]:
        """One batch, then retry batches for failures; returns (outputs or None, retries per index)."""
        max_retries, stats = self.engine.max_retries, self.stats
        out: list = [None] * len(reqs)
        retried: dict[int, int] = {}
        if not reqs:
            return out, retried
        if judge is None:
            raise ValueError(f"this constructor needs a {kind} judge, but the engine has none")
        todo = list(range(len(reqs)))
        for attempt in range(max_retries + 1):
            batch = [reqs[i] if attempt == 0 else _with_attempt(reqs[i], attempt) for i in todo]
            stats.judge_batches += 1
            try:
                replies = list(getattr(judge, method)(batch))
                if len(replies) != len(batch):
                    raise RuntimeError(f"judge returned {len(replies)} replies for {len(batch)} requests")
            except Exception as exc:  # a whole-batch error fails every request in it
                replies = [JudgeFailure(f"{type(exc).__name__}: {exc}")] * len(batch)
            failed = []
            for i, rep in zip(todo, replies, strict=True):
                why = check(rep)
                if why is None:
                    out[i] = rep
                else:
                    failed.append(i)
                    if attempt == max_retries:
                        stats.failures += 1
                        stats.failure_reasons[why] = stats.failure_reasons.get(why, 0) + 1
            if not failed or attempt == max_retries:
                break
            stats.retries += len(failed)
            stats.judge_calls += len(failed)
            for i in failed:
                retried[i] = retried.get(i, 0) + 1
            todo = failed
        return out, retried


class _Batch:
    """The unique requests of one wave for one judge, and which group asked first for each."""

    def __init__(self) -> None:
        self.reqs: list = []
        self.owner: list[int] = []
        self.index: dict[tuple, int] = {}
        self.asked = 0  # requests before dedup

    def add(self, key: tuple, req, g: int) -> int:
        """Index of ``req`` in the batch; a duplicate key is sent once."""
        self.asked += 1
        idx = self.index.get(key)
        if idx is None:
            idx = self.index[key] = len(self.reqs)
            self.reqs.append(req)
            self.owner.append(g)
        return idx


def _expand(ask, group: Group, g: int, pairs: _Batch, points: _Batch) -> list:
    """Add an ask's judge requests to the wave's batches: a match is both orders × votes
    (``(order, index)`` per request), a score is its votes (an index per request)."""
    trajs, pk = group.arena, group.key
    if isinstance(ask, Match):
        orders = [(ask.i, ask.j)] + ([(ask.j, ask.i)] if ask.bidirectional else [])
        refs = []
        for o, (x, y) in enumerate(orders):
            for v in range(ask.votes):
                req = PairRequest(group.prompt, trajs[x], trajs[y], v)
                refs.append((o, pairs.add((pk, trajs[x].key, trajs[y].key, v), req, g)))
        return refs
    if isinstance(ask, Score):
        t = trajs[ask.i]
        return [points.add((pk, t.key, v), PointRequest(group.prompt, t, v), g) for v in range(ask.votes)]
    raise TypeError(f"constructors yield Match or Score, got {type(ask).__name__}")


def _valid_pair(x) -> str | None:
    """Reason a pairwise reply is unusable, or None."""
    if isinstance(x, JudgeFailure):
        return x.reason or "failure"
    if not isinstance(x, PairJudgment):
        return f"bad reply type {type(x).__name__}"
    try:  # a reply with a non-numeric score (None, a string) is unusable, not a crash
        if not (math.isfinite(x.score_a) and math.isfinite(x.score_b)):
            return "non-finite score"
        if x.prob_a is not None and not (math.isfinite(x.prob_a) and 0.0 <= x.prob_a <= 1.0):
            return "probability outside [0, 1]"
    except TypeError:
        return "non-numeric score"
    return None


def _valid_point(x) -> str | None:
    if isinstance(x, JudgeFailure):
        return x.reason or "failure"
    try:
        ok = math.isfinite(float(x))
    except (TypeError, ValueError):
        return f"bad reply type {type(x).__name__}"
    return None if ok else "non-finite score"


def _match_result(ask: Match, got: list[tuple[int, PairJudgment | None]]) -> MatchResult:
    """A match's result from its (order, reply) pairs; a failed request (None) is left out."""
    per_order: list[list[tuple[float, float]]] = [[], []]
    probs: list[list[float | None]] = [[], []]
    for o, rep in got:
        if rep is None:
            continue
        # order 0 shows (i, j); order 1 shows (j, i): map back to (score_i, score_j)
        per_order[o].append((rep.score_a, rep.score_b) if o == 0 else (rep.score_b, rep.score_a))
        p = rep.prob_a
        probs[o].append(None if p is None else (p if o == 0 else 1.0 - p))
    n_orders = 2 if ask.bidirectional else 1
    done = [p for p in per_order[:n_orders] if p]
    samples = per_order[0] + per_order[1]
    if not done:
        return MatchResult(ask.i, ask.j, math.nan, math.nan, failed=True, samples=samples)
    # sum over orders of each order's vote mean; a missing order is made up by doubling
    scale = n_orders / len(done)
    si = scale * sum(sum(a for a, _ in p) / len(p) for p in done)
    sj = scale * sum(sum(b for _, b in p) / len(p) for p in done)
    partial = len(samples) < n_orders * ask.votes
    flat = probs[0] + probs[1]
    prob_i = math.nan
    if flat and None not in flat:  # mean over orders of each order's mean P(i better)
        prob_i = float(np.mean([np.mean(p) for p in probs[:n_orders] if p]))
    return MatchResult(
        ask.i,
        ask.j,
        si,
        sj,
        partial=partial,
        samples=samples,
        probs=[p for p in flat if p is not None],
        prob_i=prob_i,
    )


def _score_result(ask: Score, got: list) -> ScoreResult:
    """A score's result: the mean of its successful votes (NaN and ``failed`` if none)."""
    ok = [float(x) for x in got if x is not None]
    return ScoreResult(ask.i, float(np.mean(ok)) if ok else math.nan, failed=not ok, samples=ok)


def _with_attempt(req, attempt: int):
    return dataclasses.replace(req, attempt=attempt)
