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
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

from arenabench.judges.accounting import WrapperStats


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

    def judge_pairs(self, requests):
        return self._call("judge_pairs", requests)

    def score_points(self, requests):
        return self._call("score_points", requests)


class Unbatched(WrapperStats):
    """Sends each request of a batch as its own call, one after another: the per-match
    sequential driver's judge (with a :class:`LatencyJudge` inside, every request pays L)."""

    def __init__(self, inner):
        self.inner = inner

    def judge_pairs(self, requests):
        return [self.inner.judge_pairs([r])[0] for r in requests]

    def score_points(self, requests):
        return [self.inner.score_points([r])[0] for r in requests]
