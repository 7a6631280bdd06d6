"""A group barrier for verl's per-sample reward calls.

verl 0.9's reward loop scores one response at a time (``RewardManagerBase.run_single``) and has no
hook that hands a manager the N responses of one prompt. A tournament needs the whole group, so
each call parks here under its prompt's ``uid`` until the group is complete (``expected``
members) or its timeout fires; then a single flusher task hands **every group that is ready at
that moment** to the scorer in one call — one engine run, hence one judge batch per wave across
groups. Groups that become ready while the scorer runs go into the next flush.

Pure asyncio, no verl import: the barrier is tested on its own. It must live in *one* event loop
that sees every sibling, which is why the reward manager requires ``reward.num_workers=1``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReadyGroup:
    """A closed group as the scorer sees it: members sorted by ``order`` (verl's ``session_id``
    where it sends one, else arrival), so the result does not depend on arrival interleaving."""

    uid: str
    expected: int
    payloads: list[Any]
    timed_out: bool = False  # closed by the timeout with fewer than ``expected`` members
    late: bool = False  # a straggler whose group had already been scored: scored alone


# scorer(groups) -> per group, one result per member (same order as ReadyGroup.payloads)
Scorer = Callable[[Sequence[ReadyGroup]], Sequence[Sequence[Any]]]


@dataclass
class _Open:
    expected: int
    members: list[tuple[float, int, Any, asyncio.Future]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    opened: float = field(default_factory=time.monotonic)


@dataclass
class BarrierStats:
    flushes: int = 0  # scorer calls (engine runs)
    groups: int = 0
    timed_out: int = 0  # groups closed by the timeout
    missing: int = 0  # members those groups lacked
    late: int = 0  # samples that arrived after their group was scored
    max_groups_per_flush: int = 0


class GroupBarrier:
    """Collect samples by ``uid``; score complete groups together (see the module docstring).

    ``timeout_s`` is counted from a group's *first* arrival: it must exceed the spread between the
    fastest and the slowest sibling's generation. A timed-out group is scored with the members it
    has (a tournament of N−1 is still a valid ranking); a sibling that turns up later is scored
    alone (a singleton: zero advantage, no judge call) and counted as ``late``.
    """

    def __init__(
        self,
        scorer: Scorer,
        timeout_s: float = 600.0,
        *,
        executor: Executor | None = None,
        remember: int = 100_000,
    ):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0; got {timeout_s}")
        self.scorer = scorer
        self.timeout_s = float(timeout_s)
        self.executor = executor
        self.remember = int(remember)
        self.stats = BarrierStats()
        self._open: dict[str, _Open] = {}
        self._ready: list[tuple[ReadyGroup, list[asyncio.Future]]] = []
        self._closed: OrderedDict[str, None] = OrderedDict()  # uids already scored (late detection)
        self._flusher: asyncio.Task | None = None
        self._arrivals = 0

    @property
    def pending(self) -> dict[str, int]:
        """uid → members waiting, for groups not yet closed."""
        return {uid: len(g.members) for uid, g in self._open.items()}

    async def submit(self, uid: str, expected: int, payload: Any, order: float | None = None) -> Any:
        """Park ``payload`` in group ``uid`` (of ``expected`` members) and return its result."""
        if expected < 1:
            raise ValueError(f"a group needs expected >= 1 members; got {expected}")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._arrivals += 1
        key = float(self._arrivals if order is None else order)
        if uid in self._closed:
            self.stats.late += 1
            self._enqueue(ReadyGroup(uid, expected, [payload], late=True), [fut])
            return await fut
        group = self._open.get(uid)
        if group is None:
            group = self._open[uid] = _Open(expected)
            group.timer = loop.call_later(self.timeout_s, self._close, uid, True)
        group.members.append((key, self._arrivals, payload, fut))
        if len(group.members) >= group.expected:
            self._close(uid, False)
        return await fut

    # -- internals ---------------------------------------------------------------------------

    def _close(self, uid: str, timed_out: bool) -> None:
        group = self._open.pop(uid, None)
        if group is None:
            return
        if group.timer is not None:
            group.timer.cancel()
        self._closed[uid] = None
        while len(self._closed) > self.remember:
            self._closed.popitem(last=False)
        members = sorted(group.members, key=lambda m: (m[0], m[1]))
        if timed_out:
            self.stats.timed_out += 1
            self.stats.missing += group.expected - len(members)
        ready = ReadyGroup(uid, group.expected, [m[2] for m in members], timed_out=timed_out)
        self._enqueue(ready, [m[3] for m in members])

    def _enqueue(self, ready: ReadyGroup, futures: list[asyncio.Future]) -> None:
        self._ready.append((ready, futures))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._ready:
            batch, self._ready = self._ready, []
            groups = [g for g, _ in batch]
            self.stats.flushes += 1
            self.stats.groups += len(groups)
            self.stats.max_groups_per_flush = max(self.stats.max_groups_per_flush, len(groups))
            try:
                results = await loop.run_in_executor(self.executor, self.scorer, groups)
                if len(results) != len(groups):
                    raise RuntimeError(f"scorer returned {len(results)} results for {len(groups)} groups")
            except Exception as exc:  # loud: every waiting caller gets the error
                for _, futs in batch:
                    for fut in futs:
                        if not fut.done():
                            fut.set_exception(exc)
                continue
            for (group, futs), res in zip(batch, results, strict=True):
                if len(res) != len(futs):
                    err = RuntimeError(
                        f"scorer returned {len(res)} results for group {group.uid!r} of {len(futs)}"
                    )
                    for fut in futs:
                        if not fut.done():
                            fut.set_exception(err)
                    continue
                for fut, r in zip(futs, res, strict=True):
                    if not fut.done():  # a caller cancelled by Ray just drops its result
                        fut.set_result(r)
