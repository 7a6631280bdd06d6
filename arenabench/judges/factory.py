"""Build any judge from a ``conf/judge`` entry: ``kind`` picks the backend, the rest are its parameters.

Backends are imported lazily so the core install (no vLLM, no aiohttp server) can build the
simulated judge; an unknown ``kind`` or parameter is one error naming the valid choices.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from arenabench.registry import unknown_message

JUDGE_KINDS = ("simulated", "vllm", "openai")


def _judge_class(kind: str):
    if kind == "vllm":
        from arenabench.judges.vllm_offline import VLLMJudge

        return VLLMJudge
    if kind == "openai":
        from arenabench.judges.openai_compat import OpenAIJudge

        return OpenAIJudge
    raise ValueError(unknown_message("judge kind", kind, list(JUDGE_KINDS)))


def build(cfg: Mapping[str, Any]):
    """A judge from a config mapping (``kind`` defaults to ``simulated``)."""
    cfg = dict(cfg)
    kind = cfg.pop("kind", "simulated")
    if kind == "simulated":
        from arenabench import judges

        return judges.get(cfg.pop("preset", "calibrated"), **cfg)
    cls = _judge_class(kind)
    valid = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "llm")]
    unknown = sorted(set(cfg) - set(valid))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for judge kind {kind!r}; valid: {valid}")
    return cls(**cfg)


__all__ = ["JUDGE_KINDS", "build"]
