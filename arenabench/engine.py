"""The engine: drives every group's constructor in lockstep, one judge batch per wave.

A constructor's ``play`` is a generator that yields a list of :class:`Match` /
:class:`Score` requests and receives their results, so a topology reads like its paper's
algorithm. The engine collects the requests of *all* groups of a step into one wave,
expands each match into both orders × votes (or into the one order the constructor's order
policy shows: ``arenabench/order.py``), drops duplicate requests, sends one batch
per judge, retries failures (extra batches, not extra waves), and hands results back.
Each reply is validated and normalized once, as it arrives (``types.pair_reply`` /
``types.point_reply``): a score of any real number type (numpy's scalars included) becomes a
``float``; NaN, ±inf, a bool, a string or None is a failure with its reason, retried like any other.
Failures that survive the retry budget are counted per group and flagged, never turned
silently into a tie; each constructor states how it treats a failed match. A request the judge
gave up on after its outage deadline (reason ``outage: ...``, a served judge that stayed away:
:mod:`arenabench.judges.openai_compat`) is not re-asked -- the judge already waited a whole
deadline, and a new ``attempt`` would make the answer depend on when the outage happened -- but
counted as *lost* for every group that asked it (``Accounting.lost``), and a trainer masks such
a group (:func:`arenabench.advantages.is_masked`): its ranking would rest on partial evidence.

One :meth:`Engine.run` is a :class:`StepRun`: its groups in play (:class:`GroupRun`: the
generator, the asks in flight, the group's :class:`~arenabench.types.Accounting`), a wave at a
time (``send_wave``), until each constructor's ``finalize`` has built its group's result.

Two schedules (``Engine(schedule=...)``):

* ``"lockstep"`` — the above: wave w + 1 of every group waits for wave w of all groups. The
  mode for batch engines (vLLM offline: one ``generate`` per wave is what keeps it busy) and
  for the simulated judges.
* ``"pipelined"`` — :class:`PipelinedStepRun`: every group advances on its own under asyncio;
  its next wave goes out as soon as its previous one is answered. Requests go to the judge one
  at a time (``ajudge_pairs([req])`` / ``ascore_points([req])`` when the judge has them, else
  its sync method in a worker thread), at most ``max_inflight`` in flight across all groups (a
  shared limit; a free slot goes to the group furthest behind, :class:`_Slots`). The mode for a
  served judge with continuous batching (:class:`OpenAIJudge`),
  where a lockstep wave waits for its slowest reply.
* ``"auto"`` (default) — pipelined when every judge the engine holds says
  ``prefers_pipelined = True``, lockstep otherwise (so the simulated and vLLM judges, and any
  wrapper that does not forward the attribute, run exactly as before).

What a group gets is the same in both schedules for a judge whose reply is a function of the
request (content, sample, attempt), as every judge here is: a group's generator, its rng, its
asks and each request's attempts are the same; only the time at which it gets them differs.
Accounting is the same except ``judge_batches`` (pipelined: one per request sent) and the
scope of deduplication: lockstep shares a duplicate request among all asks of one *wave* (all
groups); pipelined shares it within one group's wave and with any identical request *in flight*
(another group's, sent and not yet answered), so two groups asking the same request at
different times each pay for it. ``StepStats.waves`` is the largest number of waves any group
played (= lockstep's count). A judge whose answers depend on the batch they arrive in (the
``raise`` kind of :class:`~arenabench.judges.faults.FaultyJudge`, drawn per batch) answers
differently when the batches differ.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, check_failed_share
from arenabench.asyncrun import run_coroutine
from arenabench.diagnostics import ComparisonHealth, comparison_health
from arenabench.order import Orienter
from arenabench.types import (
    OUTAGE,
    Accounting,
    ConstructorResult,
    Group,
    JudgeFailure,
    JudgeTraits,
    Match,
    MatchResult,
    PairJudgment,
    PairRequest,
    PointRequest,
    Score,
    ScoreResult,
    pair_reply,
    point_reply,
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
    failures: int = 0  # requests that still failed after the retry budget (lost ones included)
    lost: int = 0  # of which given up by the judge after its outage deadline (not re-asked)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    # what the judge's answers to the step's comparisons look like: position consistency, ties,
    # cycles (counts over finished groups; ``arenabench.diagnostics``)
    health: ComparisonHealth = field(default_factory=ComparisonHealth)


@dataclass
class StepResult:
    results: list[ConstructorResult]
    stats: StepStats


SCHEDULES = ("lockstep", "pipelined", "auto")
# the order a lockstep wave's pairwise requests are handed to the judge (``prefix_order``)
REQUEST_ORDERS = ("asked", "prefix")
DEFAULT_MAX_INFLIGHT = 64  # pipelined: requests in flight when neither the engine nor the judge says


class Engine:
    """Runs a constructor over a step's groups against a pairwise and/or pointwise judge.

    ``schedule``: ``"lockstep"``, ``"pipelined"`` or ``"auto"`` (see the module doc);
    ``max_inflight``: the pipelined schedule's limit on requests in flight across all groups
    (default: the judge's ``max_concurrency`` if it has one, else 64); ``request_order``: the
    order of a lockstep batch's pairwise requests, ``"prefix"`` (default,
    :func:`prefix_order`) or ``"asked"`` (groups, then asks, as the constructors asked). Only
    what a prefix cache serves can depend on it, never a reply's meaning. Measured on vLLM
    (``results/bench/prefix_reuse.md``): the same cached tokens with an unbounded cache (vLLM
    shares a prefix even within one scheduler step), ~10% less round-robin prefill computed
    under a tight one, never more: hence the default.
    """

    def __init__(
        self,
        judge=None,
        pointwise_judge=None,
        *,
        max_retries: int = 2,
        seed: int = 0,
        schedule: str = "auto",
        max_inflight: int | None = None,
        request_order: str = "prefix",
    ):
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {max_retries}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
        if max_inflight is not None and (not isinstance(max_inflight, int) or max_inflight < 1):
            raise ValueError(f"max_inflight must be None or an integer >= 1; got {max_inflight!r}")
        if request_order not in REQUEST_ORDERS:
            raise ValueError(
                f"request_order must be one of {', '.join(REQUEST_ORDERS)}; got {request_order!r}"
            )
        self.request_order = request_order
        self.judge = judge
        self.pointwise_judge = pointwise_judge if pointwise_judge is not None else judge
        self.max_retries = max_retries
        self.seed = seed
        self.schedule = schedule
        self.max_inflight = max_inflight

    @property
    def resolved_schedule(self) -> str:
        """``"lockstep"`` or ``"pipelined"``: ``auto`` resolved against the judges."""
        if self.schedule != "auto":
            return self.schedule
        held = [j for j in (self.judge, self.pointwise_judge) if j is not None]
        return (
            "pipelined" if held and all(getattr(j, "prefers_pipelined", False) for j in held) else "lockstep"
        )

    @property
    def inflight_limit(self) -> int:
        if self.max_inflight is not None:
            return self.max_inflight
        limit = getattr(self.judge, "max_concurrency", None)
        return limit if isinstance(limit, int) and limit >= 1 else DEFAULT_MAX_INFLIGHT

    def run(self, constructor: Constructor, groups: Sequence[Group], *, step: int = 0) -> StepResult:
        if self.resolved_schedule == "pipelined":
            return run_coroutine(self.arun(constructor, groups, step=step), name="arenabench-engine")
        # a rule may follow the judge's traits (anchor_seed=auto): plain values, read once a step
        constructor.bind_judge(JudgeTraits.of(self.judge))
        run = StepRun(self, constructor, groups, step)
        while run.playing:
            run.send_wave()
        return run.finish()

    async def arun(self, constructor: Constructor, groups: Sequence[Group], *, step: int = 0) -> StepResult:
        """One step on the pipelined schedule, in the running event loop (whatever ``schedule``)."""
        constructor.bind_judge(JudgeTraits.of(self.judge))
        return await PipelinedStepRun(self, constructor, groups, step).play()


def build_engine(
    stack,
    *,
    seed: int = 0,
    max_retries: int = 2,
    schedule: str = "auto",
    max_inflight: int | None = None,
    max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE,
) -> Engine:
    """The :class:`Engine` over ``stack`` from the options every trainer adapter passes (local,
    verl, TRL): one place that casts and validates them, so the adapters cannot drift apart.

    ``max_failed_share`` is not the engine's (the adapter masks with it:
    :func:`arenabench.advantages.mask_unreliable`) but is checked here too, so a bad value fails
    when the adapter is built, not at its first step. Raises ``ValueError`` as :class:`Engine` and
    :func:`~arenabench.advantages.check_failed_share` do (the engine's options first)."""
    engine = Engine(
        stack,
        seed=int(seed),
        max_retries=int(max_retries),
        schedule=schedule,
        max_inflight=max_inflight,
    )
    check_failed_share(max_failed_share)
    return engine


@dataclass
class GroupRun:
    """One group whose constructor is still playing: its ``play`` generator, the asks of the
    wave in flight (in the order policy's slot orders), what the group has cost so far, and its
    match results so far (for the step's judge diagnostics)."""

    group: Group
    play: Play
    orienter: Orienter
    asks: Asks = field(default_factory=list)
    cost: Accounting = field(default_factory=Accounting)
    matches: list[MatchResult] = field(default_factory=list)


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
            orienter = Orienter(getattr(constructor, "order", "both"), group, engine.seed)
            self.playing[g] = GroupRun(group, constructor.play(group, rng), orienter)
            self.advance(g, None)

    def advance(self, g: int, replies: Replies | None) -> None:
        """Hand group ``g`` its replies; keep its next asks, or build its result if it is done."""
        run = self.playing[g]
        try:
            asks = list(run.play.send(replies))
        except StopIteration as stop:
            self.results[g] = self.constructor.finalize(run.group, stop.value, run.cost)
            self.stats.health += comparison_health(len(run.group.arena), run.matches)
            del self.playing[g]
            return
        if not asks:
            raise RuntimeError(f"{self.constructor.name} yielded an empty wave; return instead")
        run.asks = run.orienter.orient(asks, run.cost.waves)
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
        refs = {g: _expand_wave(run.asks, run.group, g, pairs, points) for g, run in self.playing.items()}
        pair_out, pair_retried, pair_lost = self._send(
            self.engine.judge, "judge_pairs", pairs.reqs, pair_reply, "pairwise"
        )
        point_out, point_retried, point_lost = self._send(
            self.engine.pointwise_judge, "score_points", points.reqs, point_reply, "pointwise"
        )
        lost = (pair_lost, point_lost) if pair_lost or point_lost else None
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

        return {g: _group_replies(run, refs[g], pair_out, point_out, lost) for g, run in self.playing.items()}

    def _send(self, judge, method: str, reqs: list, normalize, kind: str) -> tuple[list, dict[int, int], set]:
        """One batch, then retry batches for failures; returns (outputs or None, retries per
        index, the indices lost to an outage: failed and not re-asked). Each reply is validated
        and normalized by ``normalize`` (:func:`~arenabench.types.pair_reply` or
        :func:`~arenabench.types.point_reply`): what a constructor receives is made of floats."""
        max_retries, stats = self.engine.max_retries, self.stats
        out: list = [None] * len(reqs)
        retried: dict[int, int] = {}
        lost: set[int] = set()
        if not reqs:
            return out, retried, lost
        if judge is None:
            raise ValueError(f"this constructor needs a {kind} judge, but the engine has none")
        todo = list(range(len(reqs)))
        if self.engine.request_order == "prefix" and kind == "pairwise":
            todo = prefix_order(reqs)  # replies still land at their own index: only the order sent
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
                rep, why = normalize(rep)
                if why is None:
                    out[i] = rep
                elif why.startswith(OUTAGE):  # the judge waited out its deadline: final
                    lost.add(i)
                    stats.lost += 1
                    stats.failures += 1
                    stats.failure_reasons[why] = stats.failure_reasons.get(why, 0) + 1
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
        return out, retried, lost


class PipelinedStepRun(StepRun):
    """One step on the pipelined schedule: a task per group plays its waves back to back; each
    unique request is its own judge call (retried at once on failure), under a shared limit of
    ``engine.inflight_limit`` requests in flight; an identical request already in flight is
    awaited, not sent again (see the module doc for what differs from lockstep)."""

    def __init__(self, engine: Engine, constructor: Constructor, groups: Sequence[Group], step: int):
        super().__init__(engine, constructor, groups, step)
        self._inflight: dict[tuple, asyncio.Future] = {}
        self._waves: dict[int, int] = {}

    async def play(self) -> StepResult:
        self._slots = _Slots(self.engine.inflight_limit)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        try:
            await asyncio.gather(*(self._drive(g) for g in list(self.playing)))
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
            for judge in {id(j): j for j in (self.engine.judge, self.engine.pointwise_judge)}.values():
                aclose = getattr(judge, "aclose", None)
                if aclose is not None:
                    await aclose()
        self.stats.waves = max(self._waves.values(), default=0)
        return self.finish()

    async def _drive(self, g: int) -> None:
        """Group ``g``'s waves, each sent as soon as the previous one is answered."""
        while g in self.playing:
            run = self.playing[g]
            pairs, points = _Batch(), _Batch()
            refs = _expand_wave(run.asks, run.group, g, pairs, points)
            self.stats.requests += pairs.asked + points.asked
            self.stats.dedup_hits += pairs.asked - len(pairs.reqs) + points.asked - len(points.reqs)
            pair_keys, point_keys = list(pairs.index), list(points.index)  # in index order
            pair_out, point_out = await asyncio.gather(
                asyncio.gather(
                    *(self._request("pair", k, r, run) for k, r in zip(pair_keys, pairs.reqs, strict=True))
                ),
                asyncio.gather(
                    *(self._request("point", k, r, run) for k, r in zip(point_keys, points.reqs, strict=True))
                ),
            )
            lost = None
            if any(o is _LOST for o in pair_out) or any(o is _LOST for o in point_out):
                lost = (
                    {i for i, o in enumerate(pair_out) if o is _LOST},
                    {i for i, o in enumerate(point_out) if o is _LOST},
                )
                pair_out = [None if o is _LOST else o for o in pair_out]
                point_out = [None if o is _LOST else o for o in point_out]
            run.cost.waves += 1
            self._waves[g] = run.cost.waves
            self.advance(g, _group_replies(run, refs, pair_out, point_out, lost))

    async def _request(self, kind: str, key: tuple, req, run: GroupRun):
        """The reply to one unique request (None if it failed every attempt); shared with an
        identical request in flight, else sent (and paid) by ``run``'s group."""
        full = (kind, key)
        shared = self._inflight.get(full)
        if shared is not None:
            self.stats.dedup_hits += 1
            return await asyncio.shield(shared)
        fut = asyncio.get_running_loop().create_future()
        self._inflight[full] = fut
        try:
            out = await self._attempts(kind, req, run.cost)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: the sharer re-raises it, nobody else needs to
            raise
        finally:
            del self._inflight[full]
        fut.set_result(out)
        return out

    async def _attempts(self, kind: str, req, cost: Accounting):
        stats, max_retries = self.stats, self.engine.max_retries
        normalize = pair_reply if kind == "pair" else point_reply
        stats.judge_calls += 1
        cost.judge_calls += 1
        for attempt in range(max_retries + 1):
            sent = req if attempt == 0 else _with_attempt(req, attempt)
            rep, why = normalize(await self._call(kind, sent, cost))
            if why is None:
                return rep
            if why.startswith(OUTAGE):  # the judge waited out its deadline: final, lost
                stats.lost += 1
                stats.failures += 1
                stats.failure_reasons[why] = stats.failure_reasons.get(why, 0) + 1
                return _LOST
            if attempt == max_retries:
                stats.failures += 1
                stats.failure_reasons[why] = stats.failure_reasons.get(why, 0) + 1
                return None
            stats.retries += 1
            stats.judge_calls += 1
            cost.retries += 1
            cost.judge_calls += 1
        return None  # unreachable

    async def _call(self, kind: str, req, cost: Accounting):
        """One request to the judge, under the shared in-flight limit; an exception is a failure."""
        if kind == "pair":
            judge, method, what = self.engine.judge, "judge_pairs", "pairwise"
        else:
            judge, method, what = self.engine.pointwise_judge, "score_points", "pointwise"
        if judge is None:
            raise ValueError(f"this constructor needs a {what} judge, but the engine has none")
        async with self._slots.slot(cost.waves):
            self.stats.judge_batches += 1
            try:
                amethod = getattr(judge, "a" + method, None)
                if amethod is not None:
                    replies = list(await amethod([req]))
                else:  # a sync judge: one worker thread, so the loop keeps serving other groups
                    if self._executor is None:
                        self._executor = concurrent.futures.ThreadPoolExecutor(1, "arenabench-judge")
                    loop = asyncio.get_running_loop()
                    replies = list(await loop.run_in_executor(self._executor, getattr(judge, method), [req]))
                if len(replies) != 1:
                    raise RuntimeError(f"judge returned {len(replies)} replies for 1 request")
            except Exception as exc:  # as in lockstep: an error fails the request, the engine retries
                return JudgeFailure(f"{type(exc).__name__}: {exc}")
        return replies[0]


class _Slots:
    """The shared in-flight limit. A free slot goes to the waiting request whose group has played
    the fewest waves (then first come): the group furthest behind has the longest chain of
    waves still to play, so it goes first — highest-level-first list scheduling (Hu, 1961),
    which shortens the step's tail (``results/bench/pipeline.md``). Only timing depends on it."""

    def __init__(self, limit: int) -> None:
        self.free = limit
        self.waiting: list[tuple[int, int, asyncio.Future]] = []  # a heap: (waves, arrival, waker)
        self._arrival = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, waves: int):
        await self._acquire(waves)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, waves: int) -> None:
        if self.free > 0 and not self.waiting:
            self.free -= 1
            return
        waker = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiting, (waves, next(self._arrival), waker))
        try:
            await waker
        except asyncio.CancelledError:
            if waker.done() and not waker.cancelled():  # handed a slot while being cancelled
                self._release()
            raise

    def _release(self) -> None:
        while self.waiting:
            waker = heapq.heappop(self.waiting)[2]
            if not waker.done():  # a cancelled waiter is skipped
                waker.set_result(None)
                return
        self.free += 1


_LOST = object()  # the pipelined schedule's reply to a request lost to an outage (then None)


def _group_replies(
    run: GroupRun, refs: list, pair_out: Sequence, point_out: Sequence, lost: tuple[set, set] | None = None
) -> Replies:
    """Group ``run``'s replies to its asks from the wave's outputs (None = failed), counting
    its failed requests (those a result has no sample of) and, when the wave ``lost`` some
    (pair and point indices), those of its requests."""
    replies: Replies = []
    failures = 0
    for ask, r in zip(run.asks, refs, strict=True):
        if isinstance(ask, Match):
            if len(r) == 2 and ask.votes == 1 and ask.first is None:  # both orders, one vote each
                fwd, rev = pair_out[r[0][1]], pair_out[r[1][1]]  # (i, j) then (j, i): _expand_wave
                if fwd is not None and rev is not None:  # the common case: no list of replies
                    res = _both_orders_one_vote(ask, fwd, rev)
                    run.matches.append(res)
                    replies.append(res)
                    continue
            got = [(order, pair_out[idx]) for order, idx in r]
            res = _match_result(ask, got)
            run.matches.append(res)
        else:
            got = [point_out[idx] for idx in r]
            res = _score_result(ask, got)
        replies.append(res)
        failures += len(got) - len(res.samples)
    run.cost.failures += failures
    if lost is not None:
        pair_lost, point_lost = lost
        for ask, r in zip(run.asks, refs, strict=True):
            if isinstance(ask, Match):
                run.cost.lost += sum(idx in pair_lost for _, idx in r)
            else:
                run.cost.lost += sum(idx in point_lost for idx in r)
    return replies


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


def _expand_wave(asks: Asks, group: Group, g: int, pairs: _Batch, points: _Batch) -> list[list]:
    """Add a group's asks' judge requests to the wave's batches, in order: per ask, a match is its
    shown orders × votes (``(order, index)`` per request; samples from ``Match.sample`` on), a
    score is its votes (an index each)."""
    trajs, pk, prompt = group.arena, group.key, group.prompt
    out = []
    for ask in asks:
        if isinstance(ask, Match):
            ti, tj = trajs[ask.i], trajs[ask.j]
            ki, kj = ti.key, tj.key
            s0 = ask.sample
            if ask.first is None and ask.votes == 1:  # the common case, unrolled: (i, j) then (j, i)
                out.append(
                    [
                        (0, pairs.add((pk, ki, kj, s0), PairRequest(prompt, ti, tj, s0), g)),
                        (1, pairs.add((pk, kj, ki, s0), PairRequest(prompt, tj, ti, s0), g)),
                    ]
                )
                continue
            refs = []
            for o in _shown(ask):
                a, b, ka, kb = (ti, tj, ki, kj) if o == 0 else (tj, ti, kj, ki)
                for v in range(s0, s0 + ask.votes):
                    refs.append((o, pairs.add((pk, ka, kb, v), PairRequest(prompt, a, b, v), g)))
            out.append(refs)
        elif isinstance(ask, Score):
            t = trajs[ask.i]
            out.append([points.add((pk, t.key, v), PointRequest(prompt, t, v), g) for v in range(ask.votes)])
        else:
            raise TypeError(f"constructors yield Match or Score, got {type(ask).__name__}")
    return out


def prefix_order(reqs: Sequence[PairRequest]) -> list[int]:
    """Indices of ``reqs`` with requests sharing a prompt prefix adjacent: by query, then by
    trajectory A (the prompt puts system + query + A first: ``judges/prompts.py``), each in
    order of first appearance; stable, so the asked order holds within a run of equal prefixes."""
    queries: dict[str, int] = {}
    firsts: dict[tuple[str, int], int] = {}
    keys = []
    for r in reqs:
        q = queries.setdefault(r.prompt, len(queries))
        keys.append((q, firsts.setdefault((r.prompt, r.a.key), len(firsts))))
    return sorted(range(len(reqs)), key=keys.__getitem__)


def _shown(ask: Match) -> tuple[int, ...]:
    """The orders a match is judged in: 0 shows (i, j), 1 shows (j, i)."""
    return (0, 1) if ask.first is None else (0,) if ask.first == ask.i else (1,)


def _match_result(ask: Match, got: list[tuple[int, PairJudgment | None]]) -> MatchResult:
    """A match's result from its (order, reply) pairs; a failed request (None) is left out."""
    if len(got) == 2 and ask.votes == 1 and ask.first is None:
        (first, fwd), (_, rev) = got
        if first == 0 and fwd is not None and rev is not None:
            return _both_orders_one_vote(ask, fwd, rev)
    return _any_match_result(ask, got)


def _any_match_result(ask: Match, got: list[tuple[int, PairJudgment | None]]) -> MatchResult:
    """:func:`_match_result` for any shown orders, votes and failures."""
    per_order: list[list[tuple[float, float]]] = [[], []]
    probs: list[list[float | None]] = [[], []]
    for o, rep in got:
        if rep is None:
            continue
        # order 0 shows (i, j); order 1 shows (j, i): map back to (score_i, score_j)
        per_order[o].append((rep.score_a, rep.score_b) if o == 0 else (rep.score_b, rep.score_a))
        p = rep.prob_a
        probs[o].append(None if p is None else (p if o == 0 else 1.0 - p))
    shown = _shown(ask)
    done = [per_order[o] for o in shown if per_order[o]]
    samples = per_order[0] + per_order[1]
    orders = [0] * len(per_order[0]) + [1] * len(per_order[1])
    if not done:
        return MatchResult(
            ask.i,
            ask.j,
            math.nan,
            math.nan,
            failed=True,
            samples=samples,
            orders=orders,
            one_order=len(shown) == 1,
        )
    # sum over both orders of each order's vote mean; a missing (failed or not shown) order is
    # made up by doubling
    scale = 2 / len(done)
    si = scale * sum(sum(a for a, _ in p) / len(p) for p in done)
    sj = scale * sum(sum(b for _, b in p) / len(p) for p in done)
    partial = len(samples) < len(shown) * ask.votes
    flat = probs[0] + probs[1]
    prob_i = math.nan
    if flat and None not in flat:  # mean over orders of each order's mean P(i better)
        prob_i = _mean([_mean(probs[o]) for o in shown if probs[o]])
    return MatchResult(
        ask.i,
        ask.j,
        si,
        sj,
        partial=partial,
        samples=samples,
        probs=[p for p in flat if p is not None],
        prob_i=prob_i,
        orders=orders,
        one_order=len(shown) == 1,
    )


def _both_orders_one_vote(ask: Match, fwd: PairJudgment, rev: PairJudgment) -> MatchResult:
    """:func:`_match_result` of the common case, a match shown in both orders with one vote each
    and both answered, without its per-order lists (it ran for every match). The same arithmetic:
    an order's vote mean is ``sum`` of one score, ``0 + score``, and the two orders need no scale."""
    pf, pr = fwd.prob_a, rev.prob_a
    pr = None if pr is None else 1.0 - pr  # order 1 shows (j, i): P(i better) = 1 − P(A)
    flat = [p for p in (pf, pr) if p is not None]
    return MatchResult(
        ask.i,
        ask.j,
        (0.0 + fwd.score_a) + (0.0 + rev.score_b),
        (0.0 + fwd.score_b) + (0.0 + rev.score_a),
        samples=[(fwd.score_a, fwd.score_b), (rev.score_b, rev.score_a)],
        probs=flat,
        # _mean([_mean([pf]), _mean([pr])]), a one-value mean being float(p) + 0.0
        prob_i=((float(pf) + 0.0) + (float(pr) + 0.0)) / 2.0 if len(flat) == 2 else math.nan,
        orders=[0, 1],
    )


def _score_result(ask: Score, got: list) -> ScoreResult:
    """A score's result: the mean of its successful votes (NaN and ``failed`` if none)."""
    ok = [float(x) for x in got if x is not None]
    return ScoreResult(ask.i, _mean(ok) if ok else math.nan, failed=not ok, samples=ok)


def _mean(xs: Sequence[float]) -> float:
    """``float(np.mean(xs))``, bit for bit, without numpy's per-call cost for the short lists it
    runs on (a match's orders, a score's votes). numpy's float64 add-reduce of fewer than 8
    values is a left fold from ``0.0`` (the ``0.0 +`` matters for signed zeros), then divided by
    the count (``tests/test_engine_mean.py`` checks 1-8 values, specials included). Longer lists
    go to numpy. (numpy's overflow RuntimeWarning is not raised on the short path.)"""
    n = len(xs)
    if 0 < n < 8:
        total = 0.0
        for x in xs:
            total += float(x)
        return total / n
    return float(np.mean(xs))


def _with_attempt(req, attempt: int):
    return dataclasses.replace(req, attempt=attempt)
