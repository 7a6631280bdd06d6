"""Build any judge from a ``judge`` config entry: ``kind`` picks the backend, the rest are its parameters.

:data:`JUDGES` maps each kind to a lazy ``"module:Class"`` (as lm-evaluation-harness registers
its models), so the core install (no vLLM, no aiohttp) builds the simulated judge and a backend's
module is imported only when that kind is built. An unknown ``kind`` or parameter is one error
naming the valid choices. ``cache`` / ``faults`` wrap the judge:
:meth:`arenabench.judges.stack.JudgeStack.from_config` applies them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from arenabench.registry import UnknownNameError, unknown_message

JUDGES: dict[str, str] = {
    "simulated": "arenabench.judges.simulated:SimulatedJudge",
    "ordinal": "arenabench.judges.ordinal:OrdinalJudge",
    "vllm": "arenabench.judges.vllm_offline:VLLMJudge",
    "openai": "arenabench.judges.openai_compat:OpenAIJudge",
}
JUDGE_KINDS = tuple(JUDGES)
STACK_KEYS = ("cache", "faults")  # config keys that wrap the judge rather than build it
# read by a trainer before the judge is built (trainers/local/judge_map.py), never by the judge
TRAINER_KEYS = ("quality_map",)
_INJECTED = ("self", "llm")  # constructor arguments that are not config values (a prebuilt engine)


def judge_class(kind: str) -> type:
    """The class registered for ``kind``, imported on first use."""
    try:
        target = JUDGES[kind]
    except (KeyError, TypeError):
        raise UnknownNameError(unknown_message("judge kind", kind, list(JUDGES))) from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def check(cfg: Mapping[str, Any]) -> None:
    """Validate a judge config without loading a model or opening a connection: the kind, the
    parameter names (and, for the simulated judge, the preset and every value, by building it:
    it is cheap). Trainers call it before a run starts (``trainers/local/config.validate_run``)."""
    cfg = dict(cfg)
    kind = cfg.get("kind", "simulated")
    if kind == "simulated":
        build(cfg)
        return
    skip = ("kind", *STACK_KEYS, *TRAINER_KEYS)
    _check_names(judge_class(kind), kind, {k: v for k, v in cfg.items() if k not in skip})


def _check_names(cls: type, kind: str, cfg: Mapping[str, Any]) -> None:
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):  # the simulator checks its own
        valid = [p for p in params if p not in _INJECTED]
        unknown = sorted(set(cfg) - set(valid))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown} for judge kind {kind!r}; valid: {valid}")


def build(cfg: Mapping[str, Any]):
    """The bare judge of a config mapping (``kind`` defaults to ``simulated``, whose ``preset``
    defaults to ``calibrated``). ``cache`` / ``faults`` are skipped here: a trainer builds the
    bare judge (its SNR probe measures the judge itself) and wraps it in a ``JudgeStack``."""
    cfg = dict(cfg)
    kind = cfg.pop("kind", "simulated")
    for key in (*STACK_KEYS, *TRAINER_KEYS):  # the stack's / trainer's, not the judge's
        cfg.pop(key, None)
    cls = judge_class(kind)
    _check_names(cls, kind, cfg)
    return cls(**cfg)


__all__ = ["JUDGES", "JUDGE_KINDS", "STACK_KEYS", "TRAINER_KEYS", "build", "check", "judge_class"]
