"""The engine: drives every group's constructor in lockstep, one judge batch per wave.

A constructor's ``play`` is a generator that yields a list of asks (:class:`Match`,
:class:`Score`, :class:`Rank`) and receives their results, so a topology reads like its paper's
algorithm. The engine collects the asks of *all* groups of a step into one wave,
expands each into judge requests (a match into both orders × votes, or into the one order the
constructor's order policy shows: ``arenabench/order.py``; a score or a ranking into its
votes), drops
duplicate requests, sends one batch per judge and question kind, retries failures (extra
batches, not extra waves), and hands results back. What differs between kinds (the request,
the judge method, the validation, the fold into a result) is the kind's record
(``arenabench/kinds.py``); the code here loops over ``kinds.KINDS``.
Each reply is validated and normalized once, as it arrives (the kind's ``reply``:
``types.pair_reply`` / ``point_reply`` / ``rank_reply``): a score of any real number type (numpy's
scalars included) becomes a ``float``; NaN, ±inf, a bool, a string or None is a failure with
its reason, retried like any other.
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
  at a time (the kind's coroutine, e.g. ``ajudge_pairs([req])``, when the judge has it, else
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, check_failed_share
from arenabench.asyncrun import run_coroutine
from arenabench.diagnostics import ComparisonHealth, comparison_health
from arenabench.kinds import BY_ASK, KINDS, QuestionKind
from arenabench.order import Orienter
from arenabench.types import (
    OUTAGE,
    Accounting,
    ConstructorResult,
    Group,
    JudgeFailure,
    JudgeTraits,
    MatchResult,
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
# the order a lockstep wave's requests of a kind with a ``lead`` (pairwise, listwise) are handed
# to the judge (``prefix_order``)
REQUEST_ORDERS = ("asked", "prefix")
DEFAULT_MAX_INFLIGHT = 64  # pipelined: requests in flight when neither the engine nor the judge says


class Engine:
    """Runs a constructor over a step's groups against its judges: ``judge`` answers pairwise
    questions, ``pointwise_judge`` pointwise and ``listwise_judge`` listwise ones (each of the two
    defaults to ``judge``; ``arenabench.kinds``: a kind's ``judge`` names its attribute here).

    ``schedule``: ``"lockstep"``, ``"pipelined"`` or ``"auto"`` (see the module doc);
    ``max_inflight``: the pipelined schedule's limit on requests in flight across all groups
    (default: the judge's ``max_concurrency`` if it has one, else 64); ``request_order``: the
    order of a lockstep batch's pairwise and listwise requests, ``"prefix"`` (default,
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
        listwise_judge=None,
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
        self.listwise_judge = listwise_judge if listwise_judge is not None else judge
        self.max_retries = max_retries
        self.seed = seed
        self.schedule = schedule
        self.max_inflight = max_inflight

    @property
    def resolved_schedule(self) -> str:
        """``"lockstep"`` or ``"pipelined"``: ``auto`` resolved against the judges."""
        if self.schedule != "auto":
            return self.schedule
        held = [j for j in self.judges() if j is not None]
        return (
            "pipelined" if held and all(getattr(j, "prefers_pipelined", False) for j in held) else "lockstep"
        )

    def judges(self) -> list:
        """The judge of each question kind (``kinds.KINDS``'s order; None where there is none)."""
        return [getattr(self, kind.judge) for kind in KINDS]

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
    wave in flight (in the order policy's slot orders) grouped by question kind (``parts``: each
    kind with the positions of its asks, None for all of them), what the group has cost so far,
    and its match results so far (for the step's judge diagnostics)."""

    group: Group
    play: Play
    orienter: Orienter
    asks: Asks = field(default_factory=list)
    parts: list[tuple[QuestionKind, list[int] | None]] = field(default_factory=list)
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
        run.parts = _parts(asks)
        run.cost.comparisons += sum(
            len(asks) if pos is None else len(pos) for kind, pos in run.parts if kind.comparisons
        )

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
        """Every playing group's replies to its asks, from one deduplicated batch per judge and
        question kind (``kinds.KINDS``'s order)."""
        stats = self.stats
        batches = {kind: _Batch() for kind in KINDS}
        # refs[g][k]: the batch indices of group g's k-th ask's requests (in its kind's batch)
        refs = {g: _expand_wave(run, g, batches) for g, run in self.playing.items()}
        outs, losts = {}, {}
        for kind, batch in batches.items():
            outs[kind], retried, losts[kind] = self._send(kind, batch.reqs)
            stats.requests += batch.asked
            stats.dedup_hits += batch.asked - len(batch.reqs)
            stats.judge_calls += len(batch.reqs)
            for g in batch.owner:  # a shared request (and its retries) is paid by its first asker
                self.playing[g].cost.judge_calls += 1
            for idx, n in retried.items():
                cost = self.playing[batch.owner[idx]].cost
                cost.retries += n
                cost.judge_calls += n
        lost = losts if any(losts.values()) else None
        return {g: _group_replies(run, refs[g], outs, lost) for g, run in self.playing.items()}

    def _send(self, kind: QuestionKind, reqs: list) -> tuple[list, dict[int, int], set]:
        """One batch of ``kind``'s requests to its judge, then retry batches for failures; returns
        (outputs or None, retries per index, the indices lost to an outage: failed and not
        re-asked). Each reply is validated and normalized by the kind's ``reply``
        (:func:`~arenabench.types.pair_reply`, ``point_reply``, ``rank_reply``): what a
        constructor receives is made of floats."""
        max_retries, stats = self.engine.max_retries, self.stats
        out: list = [None] * len(reqs)
        retried: dict[int, int] = {}
        lost: set[int] = set()
        if not reqs:
            return out, retried, lost
        method = _judge_method(self.engine, kind)
        normalize = kind.reply
        todo = list(range(len(reqs)))
        if self.engine.request_order == "prefix" and kind.lead is not None:
            todo = prefix_order(reqs, kind.lead)  # replies still land at their own index: only the order sent
        for attempt in range(max_retries + 1):
            batch = [reqs[i] if attempt == 0 else _with_attempt(reqs[i], attempt) for i in todo]
            stats.judge_batches += 1
            try:
                replies = list(method(batch))
                if len(replies) != len(batch):
                    raise RuntimeError(f"judge returned {len(replies)} replies for {len(batch)} requests")
            except Exception as exc:  # a whole-batch error fails every request in it
                replies = [JudgeFailure(f"{type(exc).__name__}: {exc}")] * len(batch)
            failed = []
            for i, req, rep in zip(todo, batch, replies, strict=True):
                rep, why = normalize(rep, req)
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
            for judge in {id(j): j for j in self.engine.judges()}.values():
                aclose = getattr(judge, "aclose", None)
                if aclose is not None:
                    await aclose()
        self.stats.waves = max(self._waves.values(), default=0)
        return self.finish()

    async def _drive(self, g: int) -> None:
        """Group ``g``'s waves, each sent as soon as the previous one is answered."""
        while g in self.playing:
            run = self.playing[g]
            batches = {kind: _Batch() for kind in KINDS}
            refs = _expand_wave(run, g, batches)
            for batch in batches.values():
                self.stats.requests += batch.asked
                self.stats.dedup_hits += batch.asked - len(batch.reqs)
            answered = await asyncio.gather(
                *(
                    asyncio.gather(
                        # keys in index order
                        *(
                            self._request(kind, k, r, run)
                            for k, r in zip(batch.index, batch.reqs, strict=True)
                        )
                    )
                    for kind, batch in batches.items()
                )
            )
            outs = dict(zip(batches, answered, strict=True))
            lost = None
            if any(o is _LOST for out in answered for o in out):
                lost = {kind: {i for i, o in enumerate(out) if o is _LOST} for kind, out in outs.items()}
                outs = {kind: [None if o is _LOST else o for o in out] for kind, out in outs.items()}
            run.cost.waves += 1
            self._waves[g] = run.cost.waves
            self.advance(g, _group_replies(run, refs, outs, lost))

    async def _request(self, kind: QuestionKind, key: tuple, req, run: GroupRun):
        """The reply to one unique request (None if it failed every attempt); shared with an
        identical request in flight, else sent (and paid) by ``run``'s group."""
        full = (kind.name, key)
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

    async def _attempts(self, kind: QuestionKind, req, cost: Accounting):
        stats, max_retries = self.stats, self.engine.max_retries
        stats.judge_calls += 1
        cost.judge_calls += 1
        for attempt in range(max_retries + 1):
            sent = req if attempt == 0 else _with_attempt(req, attempt)
            rep, why = kind.reply(await self._call(kind, sent, cost), sent)
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

    async def _call(self, kind: QuestionKind, req, cost: Accounting):
        """One request to the judge, under the shared in-flight limit; an exception is a failure."""
        judge = getattr(self.engine, kind.judge)
        method = _judge_method(self.engine, kind)
        async with self._slots.slot(cost.waves):
            self.stats.judge_batches += 1
            try:
                amethod = getattr(judge, kind.amethod, None)
                if amethod is not None:
                    replies = list(await amethod([req]))
                else:  # a sync judge: one worker thread, so the loop keeps serving other groups
                    if self._executor is None:
                        self._executor = concurrent.futures.ThreadPoolExecutor(1, "arenabench-judge")
                    loop = asyncio.get_running_loop()
                    replies = list(await loop.run_in_executor(self._executor, method, [req]))
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


def _group_replies(run: GroupRun, refs: list, outs: dict, lost: dict | None = None) -> Replies:
    """Group ``run``'s replies to its asks from the wave's outputs per kind (``outs[kind]``: its
    validated replies, None = failed; each kind's ``fold``), counting its failed requests (those
    a result has no sample of) and, when the wave ``lost`` some (per kind, the batch indices),
    those of its requests."""
    asks = run.asks
    if len(run.parts) == 1:  # one kind, the common case
        kind = run.parts[0][0]
        replies = kind.fold(asks, refs, outs[kind])
        if kind.comparisons:
            run.matches.extend(replies)
    else:
        replies = [None] * len(asks)
        for kind, pos in run.parts:
            results = kind.fold([asks[p] for p in pos], [refs[p] for p in pos], outs[kind])
            for p, res in zip(pos, results, strict=True):
                replies[p] = res
            if kind.comparisons:
                run.matches.extend(results)
    run.cost.failures += sum(map(len, refs)) - sum(len(res.samples) for res in replies)
    if lost is not None:
        for kind, pos in run.parts:
            for p in range(len(asks)) if pos is None else pos:
                run.cost.lost += sum(idx in lost[kind] for idx in refs[p])
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


def _expand_wave(run: GroupRun, g: int, batches: dict) -> list[list[int]]:
    """Add group ``run``'s asks' judge requests to the wave's batches (one per kind), in order:
    per ask, the indices of its requests in its kind's batch, in the kind's layout
    (``kinds.QuestionKind.expand``, one call per kind)."""
    group, asks = run.group, run.asks
    arena, pk, prompt = group.arena, group.key, group.prompt
    if len(run.parts) == 1:  # one kind, the common case
        kind = run.parts[0][0]
        return kind.expand(asks, arena, prompt, pk, batches[kind], g)
    refs: list = [None] * len(asks)
    for kind, pos in run.parts:
        for p, r in zip(
            pos, kind.expand([asks[p] for p in pos], arena, prompt, pk, batches[kind], g), strict=True
        ):
            refs[p] = r
    return refs


def _parts(asks) -> list[tuple[QuestionKind, list[int] | None]]:
    """A wave's asks by question kind: ``[(kind, None)]`` when they are all of one kind, else each
    kind with the positions of its asks; TypeError for anything that is no ask."""
    try:
        kinds = [BY_ASK[type(a)] for a in asks]
    except KeyError:
        bad = next(a for a in asks if type(a) not in BY_ASK)
        names = " or ".join(k.ask.__name__ for k in KINDS)
        raise TypeError(f"constructors yield {names}, got {type(bad).__name__}") from None
    if kinds.count(kinds[0]) == len(kinds):
        return [(kinds[0], None)]
    parts: dict[QuestionKind, list[int]] = {}
    for p, kind in enumerate(kinds):
        parts.setdefault(kind, []).append(p)
    return list(parts.items())


def _judge_method(engine: Engine, kind: QuestionKind):
    """The engine's judge's batch method for ``kind``; ValueError when there is no such judge or
    it cannot answer the kind (a loud error, not a wave of counted failures)."""
    judge = getattr(engine, kind.judge)
    if judge is None:
        raise ValueError(f"this constructor needs a {kind.what} judge, but the engine has none")
    method = getattr(judge, kind.method, None)
    if method is None:
        raise ValueError(
            f"this constructor asks {kind.what} questions, but the engine's {kind.judge} "
            f"{type(judge).__name__} has no {kind.method}"
        )
    return method


def prefix_order(reqs: Sequence, lead=lambda r: r.a) -> list[int]:
    """Indices of ``reqs`` with requests sharing a prompt prefix adjacent: by query, then by the
    trajectory shown first (``lead``; a pairwise prompt puts system + query + A first:
    ``judges/prompts.py``), each in order of first appearance; stable, so the asked order holds
    within a run of equal prefixes."""
    queries: dict[str, int] = {}
    firsts: dict[tuple[str, int], int] = {}
    keys = []
    for r in reqs:
        q = queries.setdefault(r.prompt, len(queries))
        keys.append((q, firsts.setdefault((r.prompt, lead(r).key), len(firsts))))
    return sorted(range(len(reqs)), key=keys.__getitem__)


def _with_attempt(req, attempt: int):
    return dataclasses.replace(req, attempt=attempt)
