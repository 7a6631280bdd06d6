"""The engine: drives every group's constructor in lockstep, one judge batch per wave.

A constructor's ``play`` is a generator that yields a list of :class:`Match` /
:class:`Score` requests and receives their results, so a topology reads like its paper's
algorithm. The engine collects the requests of *all* groups of a step into one wave,
expands each match into both orders × votes, drops duplicate requests, sends one batch
per judge, retries failures (extra batches, not extra waves), and hands results back.
Failures that survive the retry budget are counted per group and flagged, never turned
silently into a tie; each constructor states how it treats a failed match.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arenabench.types import (
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


@dataclass
class _GroupState:
    gen: object
    pending: list = field(default_factory=list)
    comparisons: int = 0
    judge_calls: int = 0
    waves: int = 0
    failures: int = 0
    retries: int = 0


class _Batch:
    """The unique requests of one wave for one judge, and which group asked first for each."""

    def __init__(self) -> None:
        self.reqs: list = []
        self.owner: list[int] = []
        self.index: dict[tuple, int] = {}

    def add(self, key: tuple, req, g: int, st: _GroupState, stats: StepStats) -> int:
        """Index of ``req`` in the batch; a duplicate key is sent once (and paid by its first asker)."""
        stats.requests += 1
        idx = self.index.get(key)
        if idx is None:
            idx = self.index[key] = len(self.reqs)
            self.reqs.append(req)
            self.owner.append(g)
            st.judge_calls += 1
        else:
            stats.dedup_hits += 1
        return idx


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


class Engine:
    """Runs a constructor over a step's groups against a pairwise and/or pointwise judge."""

    def __init__(self, judge=None, pointwise_judge=None, *, max_retries: int = 2, seed: int = 0):
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {max_retries}")
        self.judge = judge
        self.pointwise_judge = pointwise_judge if pointwise_judge is not None else judge
        self.max_retries = max_retries
        self.seed = seed

    # -- public --------------------------------------------------------------------------

    def run(self, constructor, groups: Sequence[Group], *, step: int = 0) -> StepResult:
        stats = StepStats(groups=len(groups))
        results: list[ConstructorResult | None] = [None] * len(groups)
        states: dict[int, _GroupState] = {}
        # a constructor may attach references (a reference policy's anchors) before play
        groups = [constructor.prepare(group, step) for group in groups]
        for g, group in enumerate(groups):
            constructor.validate_group(group)
            rng = np.random.default_rng([self.seed, step, g])
            st = _GroupState(gen=constructor.play(group, rng))
            states[g] = st
            self._advance(g, st, None, constructor, groups, results, states)

        while states:
            stats.waves += 1
            self._wave(states, groups, stats)
            replies = {g: st.pending for g, st in states.items()}
            for g in list(states):
                st = states[g]
                st.waves += 1
                self._advance(g, st, replies[g], constructor, groups, results, states)
        return StepResult(results=results, stats=stats)  # type: ignore[arg-type]

    # -- internals -----------------------------------------------------------------------

    def _advance(self, g, st, reply, constructor, groups, results, states) -> None:
        try:
            asks = st.gen.send(reply)
        except StopIteration as stop:
            res = constructor.finalize(groups[g], stop.value)
            res.comparisons, res.judge_calls, res.waves = st.comparisons, st.judge_calls, st.waves
            res.failures, res.retries = st.failures, st.retries
            if st.failures:
                res.flags.append(f"judge_failures:{st.failures}")
            results[g] = res
            states.pop(g, None)
            return
        asks = list(asks)
        if not asks:
            raise RuntimeError(f"{constructor.name} yielded an empty wave; return instead")
        st.pending = asks
        st.comparisons += sum(isinstance(a, Match) for a in asks)

    def _wave(self, states: dict[int, _GroupState], groups, stats: StepStats) -> None:
        """Send every pending request of every group: one batch per judge (+ retry batches)."""
        pairs, points = _Batch(), _Batch()
        # refs[g] = per ask: list of (order, unique index) for pairs, or unique indices for scores
        refs: dict[int, list] = {}
        for g, st in states.items():
            group = groups[g]
            trajs = group.arena
            pk = group.key
            grefs = []
            for ask in st.pending:
                if isinstance(ask, Match):
                    orders = [(ask.i, ask.j)] + ([(ask.j, ask.i)] if ask.bidirectional else [])
                    r = []
                    for o, (x, y) in enumerate(orders):
                        for v in range(ask.votes):
                            req = PairRequest(group.prompt, trajs[x], trajs[y], v)
                            r.append((o, pairs.add((pk, trajs[x].key, trajs[y].key, v), req, g, st, stats)))
                elif isinstance(ask, Score):
                    t = trajs[ask.i]
                    r = [
                        points.add((pk, t.key, v), PointRequest(group.prompt, t, v), g, st, stats)
                        for v in range(ask.votes)
                    ]
                else:
                    raise TypeError(f"constructors yield Match or Score, got {type(ask).__name__}")
                grefs.append(r)
            refs[g] = grefs

        pair_out, pair_retried = self._send(
            self.judge, "judge_pairs", pairs.reqs, _valid_pair, stats, "pairwise"
        )
        point_out, point_retried = self._send(
            self.pointwise_judge, "score_points", points.reqs, _valid_point, stats, "pointwise"
        )
        stats.judge_calls += len(pairs.reqs) + len(points.reqs)
        for batch, retried in ((pairs, pair_retried), (points, point_retried)):
            for idx, n in retried.items():  # retries are paid by the group that first asked
                st = states[batch.owner[idx]]
                st.retries += n
                st.judge_calls += n

        for g, st in states.items():
            replies = []
            for ask, r in zip(st.pending, refs[g], strict=True):
                if isinstance(ask, Match):
                    replies.append(self._match_result(ask, r, pair_out, st))
                else:
                    vals = [point_out[idx] for idx in r]
                    ok = [float(x) for x in vals if x is not None]
                    st.failures += len(vals) - len(ok)
                    replies.append(
                        ScoreResult(ask.i, float(np.mean(ok)) if ok else math.nan, failed=not ok, samples=ok)
                    )
            st.pending = replies

    def _send(self, judge, method, reqs, check, stats: StepStats, kind):
        """One batch, then retry batches for failures; returns (outputs or None, retries per index)."""
        out: list = [None] * len(reqs)
        retried: dict[int, int] = {}
        if not reqs:
            return out, retried
        if judge is None:
            raise ValueError(f"this constructor needs a {kind} judge, but the engine has none")
        todo = list(range(len(reqs)))
        for attempt in range(self.max_retries + 1):
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
                    if attempt == self.max_retries:
                        stats.failures += 1
                        stats.failure_reasons[why] = stats.failure_reasons.get(why, 0) + 1
            if not failed or attempt == self.max_retries:
                break
            stats.retries += len(failed)
            stats.judge_calls += len(failed)
            for i in failed:
                retried[i] = retried.get(i, 0) + 1
            todo = failed
        return out, retried

    @staticmethod
    def _match_result(ask: Match, r, pair_out, st: _GroupState) -> MatchResult:
        per_order: list[list[tuple[float, float]]] = [[], []]
        probs: list[list[float | None]] = [[], []]
        for o, idx in r:
            rep = pair_out[idx]
            if rep is None:
                st.failures += 1
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


def _with_attempt(req, attempt: int):
    return dataclasses.replace(req, attempt=attempt)
