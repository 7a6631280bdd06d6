"""A judge wrapper that injects the latency of a served judge, to measure the engine's critical path.

The simulated judges answer in microseconds, so a benchmark on them measures our own Python,
not how well the engine keeps a real judge busy. :class:`LatencyJudge` makes every batch take
as long as a served judge would:

* ``per_batch_s`` — one vLLM ``generate`` over the batch (or one fully concurrent fan-out):
  a batch costs L whatever its size, so a step's judge time is waves × L;
* ``per_request_s`` with ``concurrency`` c — an API with c requests in flight: a batch of n
  costs ⌈n / c⌉ × L (``concurrency=None``: unlimited, one round per non-empty batch).

The two add up if both are set. The inner judge's own compute runs inside the modelled
latency (a server's work happens within its latency too), so a call takes
max(modelled, inner compute). Accounting (``calls``, ``requests``, ``modelled_s``,
``inner_s``, ``log``) lets a benchmark compare the measured wall time with the sum of the
modelled latencies, the critical-path bound when calls are sequential.

:class:`ServedJudge` models a served judge with continuous batching instead: each request's
latency is drawn from a heavy-tailed distribution (log-normal output length × per-token time,
plus a prefill), seeded by the request's content and attempt so it is deterministic, and the
server runs at most ``slots`` requests at once (first come, first served). It answers the sync
batch protocol (lockstep: a batch takes as long as its slowest request) and the async one
(``ajudge_pairs`` / ``ascore_points``: the pipelined engine schedule), and records its busy
time and the largest number of requests it ran at once. Time is the event loop's: with
:func:`run_virtual` (a :class:`VirtualClockLoop`) nothing sleeps, the clock jumps to the next
event, and a step's duration is exact, fast and independent of the machine.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import math
import selectors
import threading
import time
from collections.abc import Sequence

from arenabench.judges.accounting import WrapperStats
from arenabench.judges.faults import _content, _uniform
from arenabench.kinds import QuestionKind


class LatencyJudge(WrapperStats):
    """Wraps any batch judge (``judge_pairs`` / ``score_points``) and sleeps to model a served one.

    ``stats`` is the inner judge's (it adds time, not counts); its own accounting is below."""

    def __init__(
        self,
        inner,
        per_batch_s: float = 0.0,
        per_request_s: float = 0.0,
        concurrency: int | None = None,
    ):
        for name, v in (("per_batch_s", per_batch_s), ("per_request_s", per_request_s)):
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number of seconds >= 0; got {v!r}")
        if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
            raise ValueError(f"concurrency must be None (unlimited) or an integer >= 1; got {concurrency!r}")
        self.inner = inner
        self.per_batch_s = float(per_batch_s)
        self.per_request_s = float(per_request_s)
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self.reset()

    def __repr__(self) -> str:
        return (
            f"LatencyJudge({self.inner!r}, per_batch_s={self.per_batch_s}, "
            f"per_request_s={self.per_request_s}, concurrency={self.concurrency})"
        )

    def reset(self) -> None:
        """Zero the accounting (between benchmark repeats)."""
        with self._lock:
            self.calls = 0
            self.requests = 0
            self.modelled_s = 0.0
            self.inner_s = 0.0
            self.log: list[tuple[str, int, float]] = []  # (method, batch size, modelled seconds)

    def latency(self, n: int) -> float:
        """Modelled seconds for a batch of ``n`` requests (0 for an empty batch)."""
        if n <= 0:
            return 0.0
        rounds = 1 if self.concurrency is None else math.ceil(n / self.concurrency)
        return self.per_batch_s + self.per_request_s * rounds

    def _call(self, method: str, requests: Sequence):
        t0 = time.perf_counter()
        out = getattr(self.inner, method)(requests)
        done = time.perf_counter()
        modelled = self.latency(len(requests))
        wait = t0 + modelled - done
        if wait > 0:
            time.sleep(wait)
        with self._lock:
            self.calls += 1
            self.requests += len(requests)
            self.modelled_s += modelled
            self.inner_s += done - t0
            self.log.append((method, len(requests), modelled))
        return out

    def _ask(self, kind: QuestionKind, requests) -> list:
        return self._call(kind.method, requests)


class Unbatched(WrapperStats):
    """Sends each request of a batch as its own call, one after another: the per-match
    sequential driver's judge (with a :class:`LatencyJudge` inside, every request pays L)."""

    def __init__(self, inner):
        self.inner = inner

    def _ask(self, kind: QuestionKind, requests) -> list:
        method = getattr(self.inner, kind.method)
        return [method([r])[0] for r in requests]


class ServedJudge(WrapperStats):
    """Wraps a judge (``judge_pairs`` / ``score_points``) as a served one: per-request latency
    ``prefill_s + tokens × per_token_s`` with ``tokens = exp(N(length_mu, length_sigma))`` drawn
    from the request's content and attempt, and ``slots`` requests served at once (``None``:
    unlimited). A request starts when it arrives or when a slot frees, whichever is later, and
    keeps its slot for its whole latency (a fixed per-token time: the model ignores how a
    server's step time grows with the batch).

    Sync calls (a lockstep batch) run on the judge's own clock ``clock``, which a batch
    advances to its last reply; async calls use the running loop's clock and sleep until
    their reply is due. Records ``busy_s`` (slot-seconds of work), ``max_running`` (largest
    number of requests served at once), ``max_outstanding`` (received, not yet answered),
    ``requests``, ``calls`` and ``work`` (every latency, in arrival order). ``reset()`` between
    runs. ``prefers_pipelined`` makes ``Engine(schedule="auto")`` pipeline it.
    """

    prefers_pipelined = True

    def __init__(
        self,
        inner,
        slots: int | None = 64,
        prefill_s: float = 0.05,
        per_token_s: float = 0.02,
        length_mu: float = math.log(200.0),
        length_sigma: float = 0.8,
        seed: int = 0,
    ):
        if slots is not None and (not isinstance(slots, int) or slots < 1):
            raise ValueError(f"slots must be None (unlimited) or an integer >= 1; got {slots!r}")
        for name, v in (
            ("prefill_s", prefill_s),
            ("per_token_s", per_token_s),
            ("length_sigma", length_sigma),
        ):
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
        self.inner = inner
        self.slots = slots
        self.prefill_s = float(prefill_s)
        self.per_token_s = float(per_token_s)
        self.length_mu = float(length_mu)
        self.length_sigma = float(length_sigma)
        self.seed = int(seed)
        self.reset()

    def __repr__(self) -> str:
        return (
            f"ServedJudge({self.inner!r}, slots={self.slots}, prefill_s={self.prefill_s}, "
            f"per_token_s={self.per_token_s}, length_mu={self.length_mu:.4g}, "
            f"length_sigma={self.length_sigma}, seed={self.seed})"
        )

    def reset(self) -> None:
        """Idle server, clock 0, zeroed records."""
        self.clock = 0.0
        self._free: list[float] = [-math.inf] * (self.slots or 0)  # when each slot frees
        self.busy_s = 0.0
        self.calls = 0
        self.requests = 0
        self.work: list[float] = []
        self._events: list[tuple[float, int]] = []  # (time, +1 start / -1 end) for max_running
        self._arrivals: list[tuple[float, int]] = []  # (time, +1 arrival / -1 reply) for max_outstanding

    def tokens(self, req) -> float:
        """Output tokens of ``req``: log-normal, a pure function of its content and attempt."""
        c = _content(req)
        u1 = _uniform(self.seed, "served-length-1", c, req.attempt)
        u2 = _uniform(self.seed, "served-length-2", c, req.attempt)
        z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
        return math.exp(self.length_mu + self.length_sigma * z)

    def latency(self, req) -> float:
        """Seconds ``req`` occupies a slot."""
        return self.prefill_s + self.tokens(req) * self.per_token_s

    def _admit(self, now: float, requests: Sequence) -> float:
        """Queue ``requests`` at ``now``; the time the last of them is answered."""
        last = now
        for r in requests:
            lat = self.latency(r)
            if self.slots is None:
                start = now
            else:
                start = max(now, heapq.heappop(self._free))
                heapq.heappush(self._free, start + lat)
            end = start + lat
            self.busy_s += lat
            self.work.append(lat)
            self._events += [(start, 1), (end, -1)]
            self._arrivals += [(now, 1), (end, -1)]
            last = max(last, end)
        self.calls += 1
        self.requests += len(requests)
        return last

    @staticmethod
    def _peak(events: list[tuple[float, int]]) -> int:
        peak = cur = 0
        # an end (−1) sorts before a start (+1) at the same instant; times to the nanosecond, since
        # a loop timer's ``now + (due − now)`` can land an ulp before ``due``
        for _, d in sorted((round(t, 9), d) for t, d in events):
            cur += d
            peak = max(peak, cur)
        return peak

    @property
    def max_running(self) -> int:
        return self._peak(self._events)

    @property
    def max_outstanding(self) -> int:
        return self._peak(self._arrivals)

    def utilization(self, makespan: float) -> float:
        """Busy slot-seconds over ``slots × makespan`` (NaN with unlimited slots or no time)."""
        if self.slots is None or makespan <= 0:
            return math.nan
        return self.busy_s / (self.slots * makespan)

    # -- sync: one lockstep batch on the judge's own clock ------------------------------------

    def _sync(self, method: str, requests):
        requests = list(requests)
        out = getattr(self.inner, method)(requests) if requests else []
        self.clock = self._admit(self.clock, requests)
        return out

    def _ask(self, kind: QuestionKind, requests) -> list:
        return self._sync(kind.method, requests)

    # -- async: the pipelined schedule, on the running loop's clock -----------------------------

    async def _async(self, method: str, requests):
        requests = list(requests)
        loop = asyncio.get_running_loop()
        now = loop.time()
        out = getattr(self.inner, method)(requests) if requests else []
        due = self._admit(now, requests)
        await asyncio.sleep(due - now)
        return out

    def _amethod(self, kind: QuestionKind):
        """Every kind the inner judge answers, as a coroutine too: the server's own clock, whether
        the inner judge is asynchronous or not."""
        self._method(kind)  # AttributeError when the inner judge does not answer the kind
        return functools.partial(self._aask, kind)

    async def _aask(self, kind: QuestionKind, requests) -> list:
        return await self._async(kind.method, requests)


class _VirtualSelector:
    """A selector that, instead of blocking until a timer is due, moves the loop's virtual clock
    there; real I/O (a worker thread's wake-up) is still polled, and waited for when no timer is
    pending."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualClockLoop):
        self._real = real
        self._loop = loop

    def select(self, timeout=None):
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # nothing scheduled: only a thread can wake us
            return self._real.select(None)
        loop = self._loop
        target = loop.virtual_now + timeout
        if loop._scheduled:  # land exactly on the timer (now + (when − now) can fall 1 ulp short)
            when = loop._scheduled[0]._when
            if abs(when - target) < 1e-6:
                target = max(target, when)
        loop.virtual_now = target
        return []

    def __getattr__(self, name):
        return getattr(self._real, name)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock: ``time()`` starts at 0 and jumps to the next timer
    whenever nothing is ready, so ``asyncio.sleep`` costs no wall time. Exact for coroutines
    that only sleep and compute (compute takes no virtual time); a worker thread's job (a sync
    judge in the pipelined engine) also takes none, but may finish after the clock has moved."""

    def __init__(self):
        super().__init__()
        self.virtual_now = 0.0
        self._selector = _VirtualSelector(self._selector, self)

    def time(self) -> float:
        return self.virtual_now


def run_virtual(coro):
    """``(result, virtual seconds)`` of running ``coro`` to completion on a fresh
    :class:`VirtualClockLoop`."""
    loop = VirtualClockLoop()
    try:
        out = loop.run_until_complete(coro)
        return out, loop.time()
    finally:
        loop.close()
