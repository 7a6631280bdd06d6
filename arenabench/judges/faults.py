"""Fault injection: a judge wrapper that times out, raises, answers malformed or NaN, by seed.

The framework claims that judge faults are retried and counted, never silently turned into
rewards. :class:`FaultyJudge` makes that testable (and lets a sweep rehearse a flaky judge
with ``judge.faults: {rate: 0.2, seed: 0}``). Every decision is a pure function of
``(seed, request content, sample, attempt)``, so

* a run is reproducible: the same seed injects the same faults at the same requests;
* a retry (the engine raises ``attempt``) is a fresh draw: it can succeed, and the inner
  judge — deterministic in content — then answers exactly what it would have without faults.

Kinds, each drawn with an equal share of ``rate``:

* ``timeout``  — ``JudgeFailure("timeout: ...")`` (the batch sleeps ``timeout_s`` once first);
* ``malformed`` — ``JudgeFailure("malformed verdict: ...")``, what the verdict parser returns;
* ``nan``      — a reply of the request's kind with NaN scores (a :class:`PairJudgment` of
  NaNs, a NaN pointwise score: the kind's ``nan_reply``, ``arenabench.kinds``): the engine's
  validation, not the judge, must catch it;
* ``raise``    — the whole batch call raises :class:`InjectedJudgeError` (a dropped connection):
  one request cannot raise alone, so this kind is drawn once per batch, from the batch's
  content and attempt; the engine turns it into a failure of every request in the batch.

The per-request and per-batch probabilities are set so that on any one attempt a request is
faulted with probability exactly ``rate``. ``faulted`` counts every (request, attempt) that got
a fault — a raised batch counts each request in it — so ``faulted == engine retries +
engine failures`` when the inner judge itself never fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import Counter
from collections.abc import Sequence

from arenabench.judges.accounting import WrapperStats
from arenabench.kinds import QuestionKind, kind_of_request
from arenabench.types import JudgeFailure

KINDS = ("timeout", "raise", "malformed", "nan")
_U64 = float(1 << 64)


class InjectedJudgeError(RuntimeError):
    """What a ``raise`` fault raises: a whole judge batch lost, as a dropped connection would."""


def _uniform(*parts) -> float:
    """A uniform in [0, 1) that is a pure function of ``parts`` (not Python's salted hash)."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "little") / _U64


def _content(r) -> str:
    """The request's content key, without the attempt (that is mixed in separately): its kind's
    ``content``; TypeError for anything that is no judge request."""
    return kind_of_request(r).content(r)


class FaultyJudge(WrapperStats):
    """Wraps ``inner`` (any question kinds it answers) and injects faults at ``rate`` (see module doc).

    Attributes (cumulative): ``faulted`` — (request, attempt) pairs faulted; ``by_kind`` and
    ``by_attempt`` — the same split by kind and by attempt number; ``raised_batches`` — batch
    calls that raised; ``batches`` / ``requests`` — what reached this wrapper. ``stats`` is the
    inner judge's with ``faults`` = ``faulted`` (:mod:`arenabench.judges.accounting`);
    :meth:`report` has the split.
    """

    def __init__(
        self,
        inner,
        rate: float = 0.2,
        seed: int = 0,
        kinds: Sequence[str] = KINDS,
        timeout_s: float = 0.0,
    ):
        # hydra's override grammar reads a bare ``nan`` as the float NaN: take it as the kind
        kinds = tuple("nan" if isinstance(k, float) and math.isnan(k) else k for k in kinds)
        bad = sorted(map(str, set(kinds) - set(KINDS)))
        if bad or not kinds:
            raise ValueError(f"fault kinds must be a non-empty subset of {', '.join(KINDS)}; got {kinds!r}")
        if not (isinstance(rate, int | float) and math.isfinite(rate) and 0.0 <= rate <= 1.0):
            raise ValueError(f"fault rate must be a number in [0, 1]; got {rate!r}")
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s >= 0):
            raise ValueError(f"timeout_s must be a finite number >= 0; got {timeout_s!r}")
        self.inner = inner
        self.rate = float(rate)
        self.seed = int(seed)
        self.kinds = tuple(dict.fromkeys(kinds))
        self.timeout_s = float(timeout_s)
        self.request_kinds = tuple(k for k in self.kinds if k != "raise")
        # P(batch raises) = rate/k; per-request rate q solves p + (1 − p)·q = rate
        self.p_raise = self.rate / len(self.kinds) if "raise" in self.kinds else 0.0
        if self.request_kinds and self.p_raise < 1.0:
            self.p_request = (self.rate - self.p_raise) / (1.0 - self.p_raise)
        else:
            self.p_request = 0.0
        self.faulted = 0
        self.by_kind: Counter[str] = Counter()
        self.by_attempt: Counter[int] = Counter()
        self.raised_batches = 0
        self.batches = 0
        self.requests = 0

    def __repr__(self) -> str:
        return f"FaultyJudge({self.inner!r}, rate={self.rate}, seed={self.seed}, kinds={self.kinds})"

    def fault_for(self, r) -> str | None:
        """The request-level fault (``timeout``, ``malformed``, ``nan``) this request gets, or None."""
        if not self.request_kinds:
            return None
        c = _content(r)
        if _uniform(self.seed, "request", c, r.attempt) >= self.p_request:
            return None
        pick = _uniform(self.seed, "kind", c, r.attempt)
        return self.request_kinds[min(int(pick * len(self.request_kinds)), len(self.request_kinds) - 1)]

    def batch_raises(self, requests) -> bool:
        """Whether this batch call raises: a pure function of its contents and attempt."""
        if not self.p_raise or not requests:
            return False
        digest = hashlib.blake2b(digest_size=8)
        for c in sorted(_content(r) for r in requests):  # the batch's order does not matter
            digest.update(c.encode("utf-8") + b"\x1e")
        attempt = max(r.attempt for r in requests)
        return _uniform(self.seed, "batch", digest.hexdigest(), attempt) < self.p_raise

    def _count(self, kind: str, attempts) -> None:
        for a in attempts:
            self.faulted += 1
            self.by_kind[kind] += 1
            self.by_attempt[int(a)] += 1

    forwards_async = True

    def _ask(self, kind: QuestionKind, requests) -> list:
        requests, faults, clean = self._plan(requests)
        got = list(getattr(self.inner, kind.method)(clean)) if clean else []
        if "timeout" in faults and self.timeout_s > 0:
            time.sleep(self.timeout_s)  # concurrent calls: the slowest bounds the batch
        return self._merge(kind, requests, faults, got)

    async def _aask(self, kind: QuestionKind, requests) -> list:
        requests, faults, clean = self._plan(requests)
        got = list(await getattr(self.inner, kind.amethod)(clean)) if clean else []
        if "timeout" in faults and self.timeout_s > 0:
            await asyncio.sleep(self.timeout_s)
        return self._merge(kind, requests, faults, got)

    def _plan(self, requests) -> tuple[list, list, list]:
        """(requests, each one's fault or None, the clean ones to ask); raises for a lost batch."""
        requests = list(requests)
        self.batches += 1
        self.requests += len(requests)
        if self.batch_raises(requests):
            self.raised_batches += 1
            self._count("raise", (r.attempt for r in requests))
            raise InjectedJudgeError("injected fault: judge batch lost")  # one reason, whatever the size
        faults = [self.fault_for(r) for r in requests]
        return requests, faults, [r for r, f in zip(requests, faults, strict=True) if f is None]

    def _merge(self, kind: QuestionKind, requests, faults, got) -> list:
        if len(got) != faults.count(None):
            raise RuntimeError(f"inner judge answered {len(got)} of {faults.count(None)} requests")
        answers = iter(got)
        out = []
        for r, f in zip(requests, faults, strict=True):
            if f is None:
                out.append(next(answers))
                continue
            self._count(f, [r.attempt])
            if f == "timeout":
                out.append(JudgeFailure(f"timeout: injected after {self.timeout_s:g}s"))
            elif f == "malformed":
                out.append(JudgeFailure("malformed verdict: injected fault"))
            else:
                out.append(kind.nan_reply(r))
        return out

    def own_stats(self) -> dict:
        return {"faults": self.faulted}

    def report(self) -> dict:
        """Every fault counter, split by kind and attempt."""
        return {
            "faulted": self.faulted,
            "by_kind": dict(self.by_kind),
            "by_attempt": dict(self.by_attempt),
            "raised_batches": self.raised_batches,
            "batches": self.batches,
            "requests": self.requests,
        }


__all__ = ["KINDS", "FaultyJudge", "InjectedJudgeError"]
