"""The group-scoring kit the trainer adapters share (TRL's ``ArenaReward``, verl's ``ArenaScorer``).

An adapter receives decoded responses from its trainer, groups them and needs a constructor's
advantages back; what is the same for every adapter lives here, once:

* :class:`GroupScoring`: the constructor, the judge stack and the engine, built once from the
  options every adapter takes (:func:`arenabench.engine.build_engine`), the masking threshold
  (:func:`arenabench.advantages.is_masked` / ``mask_unreliable``), and :meth:`GroupScoring.meta`,
  the hidden quality a simulated judge needs on a real response;
* :func:`judge_stack` / :func:`resolve_judge`: a ``judge`` config (any ``kind``, ``cache``,
  ``faults``, and the simulated judge's ``quality``) or a ready judge, as a stack;
* :func:`hidden_quality` (:data:`QUALITIES`): how a real response gets that hidden quality;
* :func:`routed`: whether a judge ranked a group (``adaptive`` routes some to a verifier).

No trainer import (TRL, verl) and no heavy dependency: the adapters import it, never each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arenabench import rewards
from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, is_masked, mask_unreliable
from arenabench.engine import Engine, build_engine
from arenabench.judges.accounting import KindMethods
from arenabench.judges.stack import JudgeStack
from arenabench.kinds import QuestionKind
from arenabench.registry import unknown_message
from arenabench.types import content_hash

QUALITIES = ("overlap", "hash", "constant")


def _tokens(text: str) -> list[str]:
    return str(text).lower().split()


def overlap_quality(text: str, ground_truth: Any) -> float:
    """Token F1 of ``text`` against ``ground_truth`` mapped to the simulated judge's logit scale
    (``4·F1 − 2``, so F1 0 → −2, 1 → +2): a stand-in for "how good is this answer" that real
    rollouts have, so a simulated judge can rank them. No ground truth: :func:`hash_quality`."""
    if ground_truth is None or str(ground_truth).strip() == "":
        return hash_quality(text)
    a, b = _tokens(text), _tokens(str(ground_truth))
    if not a or not b:
        return -2.0
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    f1 = 0.0 if common == 0 else 2 * common / (len(a) + len(b))
    return 4.0 * f1 - 2.0


def hash_quality(text: str) -> float:
    """A deterministic pseudo-quality in [−2, 2) from the text's content hash (plumbing tests)."""
    return 4.0 * (content_hash(text) % 1_000_003) / 1_000_003 - 2.0


def hidden_quality(kind: str, text: str, ground_truth: Any) -> float:
    """The simulated judge's hidden quality of a rollout, by ``kind`` (:data:`QUALITIES`):
    ``overlap`` (:func:`overlap_quality`, the task), ``hash`` (:func:`hash_quality`, plumbing) or
    ``constant`` (0 for every text: the judge cannot tell rollouts apart and ranks only its own
    noise — the control for "does training on this judge learn the task?")."""
    if kind == "overlap":
        return overlap_quality(text, ground_truth)
    if kind == "hash":
        return hash_quality(text)
    if kind == "constant":
        return 0.0
    raise ValueError(unknown_message("simulated-judge quality", kind, list(QUALITIES)))


def judge_stack(cfg: Mapping[str, Any]) -> tuple[JudgeStack, str | None]:
    """An adapter's judge, built like the local trainer's (:meth:`JudgeStack.from_config`: any
    ``kind`` of :func:`arenabench.judges.build`, optional ``cache`` and ``faults``), plus
    ``quality``, the one adapter-only key: how a real response gets the hidden quality a simulated
    judge needs (:data:`QUALITIES`, default ``overlap``; None for real judges, which read the
    text). A comma-separated ``base_urls`` string (from an env var) is split into a list."""
    cfg = dict(cfg)
    quality = cfg.pop("quality", "overlap")
    kind = cfg.get("kind", "simulated")
    if kind == "simulated":
        if quality not in QUALITIES:
            raise ValueError(unknown_message("simulated-judge quality", quality, list(QUALITIES)))
    else:
        quality = None
    urls = cfg.get("base_urls")
    if kind == "openai" and isinstance(urls, str):  # "http://a:8001,http://b:8001" from an env var
        cfg["base_urls"] = [u.strip() for u in urls.split(",") if u.strip()]
    # the simulator's verdicts depend on how quality was derived, not on the text alone
    key_extra = {"quality": quality} if quality else None
    return JudgeStack.from_config(cfg, key_extra=key_extra), quality


class _Bare(KindMethods):
    """A judge without accounting (``stats``), e.g. :class:`~arenabench.judges.FailingJudge`,
    in the place of a :class:`JudgeStack`: every question kind it answers, no per-step stack
    metrics."""

    def __init__(self, base):
        self.base = self.inner = base

    def _ask(self, kind: QuestionKind, requests) -> list:
        return getattr(self.base, kind.method)(requests)

    def step_metrics(self) -> dict[str, float]:
        return {}


def resolve_judge(judge: Mapping[str, Any] | JudgeStack | Any) -> tuple[Any, str | None]:
    """``(stack, quality)`` for a ``judge`` config mapping (:func:`judge_stack`; None: the default
    simulated judge), a ready :class:`JudgeStack`, or a bare judge object (wrapped in a stack when
    it keeps ``stats``); ``quality`` only from a config."""
    if isinstance(judge, JudgeStack):
        return judge, None
    if judge is not None and not isinstance(judge, Mapping):
        return (JudgeStack(judge) if hasattr(judge, "stats") else _Bare(judge)), None
    return judge_stack(judge if judge is not None else {"kind": "simulated"})


def routed(result) -> float:
    """1.0 when a judge ranked the group (``adaptive``'s ``summary["routed"]``; else: it made judge
    calls), 0.0 when not."""
    summary = result.extra.get("summary", {}) if isinstance(result.extra, dict) else {}
    return float(summary.get("routed", 1.0 if result.judge_calls > 0 else 0.0))


@dataclass
class GroupScoring:
    """A constructor, its judge stack and engine, built once (:meth:`build`), and the threshold a
    group's advantages are masked at (``max_failed_share``)."""

    constructor: rewards.Constructor
    stack: Any  # a JudgeStack, or a bare judge behind :class:`_Bare`
    quality: str | None  # the simulated judge's hidden quality (:data:`QUALITIES`); None: none
    engine: Engine
    max_failed_share: float | None

    @classmethod
    def build(
        cls,
        reward: Mapping[str, Any],
        judge: Mapping[str, Any] | JudgeStack | Any,
        *,
        seed: int = 0,
        max_retries: int = 2,
        max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE,
        schedule: str = "auto",
        max_inflight: int | None = None,
    ) -> GroupScoring:
        """``reward``: a ``reward`` config (:func:`arenabench.rewards.build`); ``judge``: as
        :func:`resolve_judge`. The engine's options and ``max_failed_share`` are checked here
        (:func:`build_engine`), so a bad one fails when the adapter is built."""
        constructor = rewards.build(reward)
        stack, quality = resolve_judge(judge)
        engine = build_engine(
            stack,
            seed=seed,
            max_retries=max_retries,
            schedule=schedule,
            max_inflight=max_inflight,
            max_failed_share=max_failed_share,
        )
        return cls(constructor, stack, quality, engine, max_failed_share)

    def meta(self, text: str, ground_truth: Any, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A response's trajectory meta: ``meta`` plus, for a simulated judge, its hidden
        ``quality`` (:func:`hidden_quality`)."""
        out = dict(meta or {})
        if self.quality is not None:
            out["quality"] = hidden_quality(self.quality, text, ground_truth)
        return out

    def masked(self, result) -> bool:
        """Whether the group's advantages are zeroed (:func:`arenabench.advantages.is_masked`)."""
        return is_masked(result, self.max_failed_share)

    def advantages(self, results):
        """The advantages to train on and the count of masked groups (``mask_unreliable``)."""
        return mask_unreliable(results, self.max_failed_share)


__all__ = [
    "QUALITIES",
    "GroupScoring",
    "hash_quality",
    "hidden_quality",
    "judge_stack",
    "overlap_quality",
    "resolve_judge",
    "routed",
]
