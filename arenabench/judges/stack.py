"""The judge a trainer's engine talks to: cache → faults → base, with per-step accounting.

Both trainers (local and verl) build their judge here, so ``judge.cache`` and ``judge.faults``
mean the same thing in either app.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from arenabench.judges.accounting import WrapperStats, percentiles
from arenabench.judges.cache import CachedJudge, JudgmentCache
from arenabench.judges.factory import STACK_KEYS, build
from arenabench.judges.faults import FaultyJudge
from arenabench.kinds import QuestionKind

# stats keys the stack logs per step, as their metric names
_STEP_COUNTERS = {
    "cache_hits": "cache_hits",
    "cache_misses": "cache_misses",
    "prompt_tokens": "judge_prompt_tokens",
    "cached_prompt_tokens": "judge_cached_prompt_tokens",
    "completion_tokens": "judge_completion_tokens",
    # a served judge's outages (docs/faults.md): requests resent, seconds with a request in an
    # outage, requests given up after the outage deadline (0 for a judge with no transport); with
    # the backend's calls and final replies: judge_backend_calls = answered + resent + lost
    "calls": "judge_backend_calls",
    "answered": "judge_answered",
    "retries": "judge_resent",
    "outage_s": "judge_outage_s",
    "lost": "judge_lost",
}
# token counters also logged as run totals (``<name>_total``): a run's last value is its bill,
# what ``compare`` and ``arenabench.compare.summarize`` read
TOKEN_METRICS = ("judge_prompt_tokens", "judge_cached_prompt_tokens", "judge_completion_tokens")


def cache_identity(base) -> tuple[str, str]:
    """``(model, rubric)`` for cache keys: the judge's full configuration, so one cache file can
    serve a whole sweep (a simulated judge: preset and every parameter; an LLM judge: every
    answer-determining constructor argument, the prompt's fingerprint and the parser's version,
    :meth:`arenabench.judges.llm.LLMJudge.cache_config`; any other judge: its repr)."""
    model = getattr(base, "preset", type(base).__name__)
    if hasattr(base, "cache_config"):
        config = base.cache_config()
    else:
        config = asdict(base.config) if hasattr(base, "config") else repr(base)
    return (
        f"{type(base).__name__}:{model}:{json.dumps(config, sort_keys=True, default=str)}",
        str(getattr(base, "rubric_name", "simulated")),
    )


class JudgeStack(WrapperStats):
    """``base`` behind optional fault injection (``faults``: a mapping of :class:`FaultyJudge`
    arguments, e.g. ``{rate: 0.2, seed: 0}``) and an optional sqlite judgment cache (``cache``: a
    path; several processes may share it), with per-step accounting.

    Order: cache → faults → base, so a cached answer costs no (possibly faulty) call and a fault
    is never cached. Cache keys name the judge's full configuration plus ``key_extra`` (for a
    simulated judge whatever fixes the hidden qualities the text alone does not, e.g. the task's
    configuration). Latency is the wall time of each batch the engine sends, cache lookup
    included. Counters come from the outermost layer's ``stats``
    (:mod:`arenabench.judges.accounting`). Around a served judge (``prefers_pipelined``, async
    methods) the stack is one too, cache and faults included, so ``Engine(schedule="auto")``
    pipelines it.
    """

    def __init__(
        self,
        base,
        cache: str | None = None,
        faults: Mapping[str, Any] | None = None,
        key_extra: Mapping[str, Any] | None = None,
    ):
        self.base = base
        judge = base
        self.faulty = FaultyJudge(base, **dict(faults)) if faults else None
        judge = self.faulty or judge
        self.cached = None
        if cache:
            path = Path(cache).expanduser()
            path = path if path.is_absolute() else Path.cwd() / path  # as the MLflow sqlite URI
            model, rubric = cache_identity(base)
            self.cached = CachedJudge(
                judge, JudgmentCache(path), model=model, rubric=rubric, key_extra=dict(key_extra or {})
            )
            judge = self.cached
        self.inner = judge  # the outermost layer: what the engine's calls go through
        self.latencies: list[float] = []
        self._unbilled = dict.fromkeys(_STEP_COUNTERS.values(), 0.0)  # moved by unbilled() requests
        self._last = self._counters()

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], key_extra: Mapping[str, Any] | None = None) -> JudgeStack:
        """The stack for a ``judge`` config entry: :func:`arenabench.judges.build` on everything
        but ``cache`` / ``faults``, which configure the wrappers."""
        cfg = dict(cfg)
        wrap = {k: cfg.pop(k, None) for k in STACK_KEYS}
        return cls(build(cfg), wrap["cache"], wrap["faults"], key_extra=key_extra)

    @contextlib.contextmanager
    def _timed(self):
        """Record one batch's latency, failed batches included (sync and async calls alike)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.latencies.append(time.perf_counter() - t0)

    forwards_async = True

    def _ask(self, kind: QuestionKind, requests) -> list:
        with self._timed():
            return getattr(self.inner, kind.method)(requests)

    async def _aask(self, kind: QuestionKind, requests) -> list:
        with self._timed():
            return await getattr(self.inner, kind.amethod)(requests)

    def _counters(self) -> dict[str, float]:
        stats = self.stats
        return {
            name: float(stats[key]) - self._unbilled.get(name, 0.0) for key, name in _STEP_COUNTERS.items()
        }

    @contextlib.contextmanager
    def unbilled(self):
        """Leave what the judge does inside out of this stack's step and total counters: a
        diagnostic's requests to the bare judge (the trainer's SNR probe re-scores a few responses
        every step) are no part of what a constructor's rewards cost."""
        before = self._counters()
        try:
            yield
        finally:
            after = self._counters()
            for k in after:
                self._unbilled[k] += after[k] - before[k]

    def step_metrics(self) -> dict[str, float]:
        """This step's cache hits/misses, tokens (prefill, prefix-cached prefill, decode; see
        :mod:`arenabench.judges.accounting`), outage counters and batch-latency p50/p90 (0 with no
        batch: a step that sent nothing spent no time), the run's token totals
        (``judge_*_tokens_total``), plus cumulative ``judge_faults`` with faults on."""
        now = self._counters()
        out = {k: now[k] - self._last[k] for k in now}
        out.update({f"{k}_total": now[k] for k in TOKEN_METRICS})
        self._last = now
        lat = percentiles(self.latencies, (50, 90), empty=0.0)
        out["judge_latency_p50"] = float(lat["p50"])
        out["judge_latency_p90"] = float(lat["p90"])
        self.latencies = []
        if self.faulty is not None:
            out["judge_faults"] = float(self.stats["faults"])
        return out


__all__ = ["TOKEN_METRICS", "JudgeStack", "cache_identity"]
