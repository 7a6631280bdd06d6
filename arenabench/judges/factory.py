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


LLM_KINDS = ("vllm", "openai")
_MISSING = (None, "", "???")  # "???": hydra's mandatory value left unset (conf/judge/openai.yaml)
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"})


def check(cfg: Mapping[str, Any]) -> None:
    """Validate a judge config without loading a model or opening a connection: the kind, the
    parameter names (and, for the simulated judge, the preset and every value, by building it:
    it is cheap). An LLM judge (:data:`LLM_KINDS`) is built too -- its constructor loads no model
    and opens no connection -- after :func:`_check_llm`: ``model`` set, a known rubric, and every
    value its constructor checks (positive timeouts, non-empty http(s) ``base_urls``, an
    ``api_key_env`` that names a variable). Trainers call it before a run starts
    (``trainers/local/config.validate_run``)."""
    cfg = dict(cfg)
    kind = cfg.get("kind", "simulated")
    if kind == "simulated":
        build(cfg)
        return
    skip = ("kind", *STACK_KEYS, *TRAINER_KEYS)
    params = {k: v for k, v in cfg.items() if k not in skip}
    cls = judge_class(kind)
    _check_names(cls, kind, params)
    if kind in LLM_KINDS:
        _check_llm(kind, params)
        try:
            cls(**params)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"judge kind {kind!r}: {str(exc).splitlines()[0]}") from None


def _check_llm(kind: str, cfg: Mapping[str, Any]) -> None:
    """What an LLM judge's constructor cannot know (module doc of :func:`check`)."""
    import os

    from arenabench.judges.prompts import rubrics

    model = cfg.get("model")
    if not isinstance(model, str) or model.strip() in _MISSING:
        what = "the served model's name" if kind == "openai" else "a local checkpoint folder or hub id"
        raise ValueError(f"judge.model is required for judge kind {kind!r} ({what}, e.g. judge.model=...)")
    rubric = cfg.get("rubric", "open_writing")
    if rubric not in rubrics():
        raise ValueError(f"unknown judge.rubric {rubric!r}; available rubrics: {', '.join(rubrics())}")
    if kind != "openai":
        return
    from arenabench.judges.openai_compat import api_key_env_problem

    env = cfg.get("api_key_env", "OPENAI_API_KEY")
    if problem := api_key_env_problem(env):
        raise ValueError(f"judge.{problem}")
    urls = cfg.get("base_urls")
    urls = [urls] if isinstance(urls, str) else list(urls or [])
    if not urls:
        raise ValueError("judge.base_urls must name at least one server (e.g. [http://127.0.0.1:8000])")
    remote = [
        u for u in urls if str(u).strip().startswith(("http://", "https://")) and _host(u) not in _LOOPBACK
    ]
    if env is not None and not os.environ.get(env) and remote:
        raise ValueError(
            f"judge.api_key_env names {env}, which is not set, and {remote[0]} is not on this machine "
            "(a hosted server needs the key): export it, or judge.api_key_env=null for a server without auth"
        )


def _host(url: Any) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(str(url).strip()).hostname or "").lower()
    except ValueError:
        return ""


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


__all__ = [
    "JUDGES",
    "JUDGE_KINDS",
    "LLM_KINDS",
    "STACK_KEYS",
    "TRAINER_KEYS",
    "build",
    "check",
    "judge_class",
]
