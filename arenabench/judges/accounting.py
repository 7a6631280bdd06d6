"""Judge accounting: one counters shape for every judge and wrapper, percentiles, request seeds.

Every judge that :func:`arenabench.judges.build` makes, and every wrapper around one
(:class:`~arenabench.judges.cache.CachedJudge`, :class:`~arenabench.judges.faults.FaultyJudge`,
:class:`~arenabench.judges.latency.LatencyJudge`), has a ``stats`` mapping with exactly the keys
of :data:`STAT_KEYS`, so :class:`~arenabench.judges.stack.JudgeStack` reads the outermost judge's
``stats`` and never guesses which layer keeps what:

* ``requests`` / ``calls`` / ``retries`` / ``failures`` / ``prompt_tokens`` /
  ``cached_prompt_tokens`` / ``completion_tokens``: the *backend's* (what was paid for).
  ``requests``: requests received; ``calls``: backend calls (HTTP posts, ``generate`` calls,
  simulated batches); ``retries``: transport retries; ``failures``: final failures by reason
  prefix (the text before the first ``:``); tokens as the backend reports them: prefill
  (``prompt_tokens``), the part of it served from the engine's prefix cache
  (``cached_prompt_tokens``: vLLM's ``RequestOutput.num_cached_tokens``, a server's
  ``usage.prompt_tokens_details.cached_tokens``) and decode (``completion_tokens``); the
  simulator counts what a real judge would be sent (:mod:`arenabench.judges.tokens`).
* ``cache_hits`` / ``cache_misses`` (a :class:`CachedJudge` fills them) and ``faults``
  (injected faults, a :class:`FaultyJudge` fills it): 0 on a bare judge.
* ``answered`` / ``lost`` / ``outage_s``: a served backend's outage accounting (posts that got a
  final reply, requests given up after the outage deadline, seconds with a request in an outage;
  :mod:`arenabench.judges.openai_compat`), so ``calls == answered + retries + lost`` there; 0 on
  backends without a transport.

A wrapper's ``stats`` is its inner judge's with its own keys set, so counters flow outward.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from arenabench.kinds import KINDS, QuestionKind
from arenabench.types import JudgeFailure, content_hash

STAT_KEYS = (
    "requests",
    "calls",
    "retries",
    "failures",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "cache_hits",
    "cache_misses",
    "faults",
    "answered",
    "lost",
    "outage_s",
)


def request_seed(sample: int, attempt: int) -> int:
    """The sampling seed sent for a request: stable, and different per (sample, attempt)."""
    return content_hash(f"openai-judge:{int(sample)}:{int(attempt)}") % (2**31 - 1)


def percentiles(
    xs: Sequence[float], qs: Sequence[float] = (50, 90, 99), empty: float = math.nan
) -> dict[str, float]:
    """``{"p50": ..., "p90": ..., "p99": ...}`` with linear interpolation between closest ranks
    (numpy's default).

    No sample gives ``empty`` for every key: NaN by default (a latency nobody measured is not 0);
    a per-step log that must stay plottable passes ``empty=0.0``.
    """
    xs = sorted(xs)
    out = {}
    for q in qs:
        name = f"p{q:g}"
        if not xs:
            out[name] = float(empty)
            continue
        pos = (len(xs) - 1) * q / 100.0
        lo = int(math.floor(pos))
        hi = min(lo + 1, len(xs) - 1)
        out[name] = xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return out


def empty_stats() -> dict[str, Any]:
    """A zeroed ``stats`` mapping (``failures`` is a reason-prefix → count dict)."""
    return {k: {} if k == "failures" else 0.0 if k == "outage_s" else 0 for k in STAT_KEYS}


class JudgeAccounting:
    """``stats`` and per-call latency samples of a backend judge (see the module doc)."""

    def reset_stats(self) -> None:
        """Zero ``stats`` and the latency record."""
        self.stats: dict[str, Any] = empty_stats()
        self._latencies: list[float] = []

    def latency_percentiles(self) -> dict[str, float]:
        """p50/p90/p99 of per-call latency in seconds (NaN before any call)."""
        return percentiles(self._latencies)

    def _count_failure(self, failure: JudgeFailure) -> None:
        prefix = failure.reason.split(":", 1)[0].strip() or "failure"
        fails = self.stats["failures"]
        fails[prefix] = fails.get(prefix, 0) + 1

    def _timed_call(self, fn, *args, **kwargs):
        """One backend call ``fn(*args, **kwargs)``: counted in ``calls`` and timed."""
        self.stats["calls"] += 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._latencies.append(time.perf_counter() - t0)


class KindMethods:
    """Every question kind's batch methods, written once: for each kind of
    :data:`arenabench.kinds.KINDS`, the judge's batch method (``judge_pairs``, ``score_points``)
    exactly when ``inner`` has it, as ``self._ask(kind, requests)`` (a wrapper implements
    :meth:`_ask` once for all kinds); and the kind's coroutine (``ajudge_pairs``,
    ``ascore_points``: the engine's pipelined schedule), ``self._aask(kind, requests)``, only
    when the class says ``forwards_async`` (and implements :meth:`_aask`) *and* ``inner`` has
    that coroutine."""

    inner: Any
    forwards_async: ClassVar[bool] = False

    def _ask(self, kind: QuestionKind, requests: Sequence) -> list:
        """The replies to a batch of ``kind``'s requests (each wrapper's one implementation)."""
        raise NotImplementedError

    async def _aask(self, kind: QuestionKind, requests: Sequence) -> list:
        """:meth:`_ask` in the running event loop, through the inner judge's coroutine method."""
        raise NotImplementedError

    def _method(self, kind: QuestionKind):
        if not hasattr(self.inner, kind.method):
            raise AttributeError(kind.method)  # hasattr(wrapper, ...) is False: the inner cannot answer it
        return functools.partial(self._ask, kind)

    def _amethod(self, kind: QuestionKind):
        if not self.forwards_async or not hasattr(self.inner, kind.amethod):
            raise AttributeError(kind.amethod)  # getattr(judge, name, None) is None: a sync judge
        return functools.partial(self._aask, kind)


def _kind_methods(kind: QuestionKind) -> tuple[property, property]:
    sync = property(
        lambda self: self._method(kind),
        doc=f"The {kind.what} batch method ``{kind.method}``, through this wrapper (``_ask``).",
    )
    coro = property(
        lambda self: self._amethod(kind),
        doc=f"The coroutine ``{kind.amethod}``, through this wrapper (``_aask``).",
    )
    return sync, coro


for _kind in KINDS:
    _sync, _coro = _kind_methods(_kind)
    setattr(KindMethods, _kind.method, _sync)
    setattr(KindMethods, _kind.amethod, _coro)


class WrapperStats(KindMethods):
    """The base of every judge wrapper: ``stats`` of the inner judge, with the keys this wrapper
    owns set from :meth:`own_stats`; the inner judge's traits; every question kind's batch
    methods (:class:`KindMethods`).

    A wrapper is as asynchronous as what it wraps: with ``forwards_async`` it has a kind's
    coroutine only when the inner judge has it, and ``prefers_pipelined`` only then -- so a cache
    or fault layer around a served judge keeps it pipelined, while a sync judge stays on the
    engine's single worker thread (never called concurrently).
    """

    def own_stats(self) -> dict[str, Any]:
        return {}

    @property
    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats, **self.own_stats()}

    async def aclose(self) -> None:
        """Close the inner judge's per-loop session, if it keeps one (the engine calls this at the
        end of a pipelined step; a wrapper that did not forward it left a served judge's HTTP
        session and connections open after every step)."""
        inner = getattr(self.inner, "aclose", None)
        if inner is not None:
            await inner()

    @property
    def prefers_pipelined(self) -> bool:
        inner_wants = bool(getattr(self.inner, "prefers_pipelined", False))
        return inner_wants and any(hasattr(self, kind.amethod) for kind in KINDS)

    @property
    def max_concurrency(self) -> int | None:
        """The inner judge's limit on requests in flight (the engine's default ``max_inflight``)."""
        return getattr(self.inner, "max_concurrency", None)

    @property
    def rejudge_share(self) -> float | None:
        """The inner judge's (``types.JudgeTraits``): a wrapper changes no reply's noise."""
        return getattr(self.inner, "rejudge_share", None)


__all__ = [
    "STAT_KEYS",
    "JudgeAccounting",
    "KindMethods",
    "WrapperStats",
    "empty_stats",
    "percentiles",
    "request_seed",
]
