"""What the LLM backends (:mod:`~arenabench.judges.vllm_offline`, :mod:`~arenabench.judges.openai_compat`)
share: the rubric, the sampling settings every backend has, prompts, a repr without secrets and
the judgment cache's key (:meth:`LLMJudge.cache_config`)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from typing import Any

from arenabench.judges.accounting import JudgeAccounting
from arenabench.judges.parsing import PARSER_VERSION
from arenabench.judges.prompts import (
    load_rubric,
    pair_prompt,
    point_prompt,
    point_request_messages,
    rank_prompt,
    rank_request_messages,
    request_messages,
)
from arenabench.types import JudgeFailure, PairRequest, PointRequest, RankRequest, Trajectory


def prompt_fingerprint(rubric) -> str:
    """sha256 of the prompt a rubric renders for a fixed request: it changes whenever the rubric
    file or the prompt template does, so cached answers to an older prompt are never reused."""
    reference = "REFERENCE" if rubric.uses_reference else None
    a, b = Trajectory("a", "RESPONSE A"), Trajectory("b", "RESPONSE B")
    msgs = [
        pair_prompt(rubric, "QUERY", a, b, reference),
        point_prompt(rubric, "QUERY", a, reference),
        rank_prompt(rubric, "QUERY", (a, b), reference),
    ]
    return hashlib.sha256(json.dumps(msgs, sort_keys=True).encode("utf-8")).hexdigest()


class LLMJudge(JudgeAccounting):
    """Base of the LLM judges (pairwise, pointwise on the 1-10 scale of ``prompts.point_prompt``, and
    listwise with ``prompts.rank_prompt``'s ranking line);
    each backend validates its own arguments first.

    Every subclass's constructor arguments are recorded as given (``_init_args``), and
    :meth:`cache_config` -- the judgment cache's key -- is all of them but the class's
    ``transport_params`` (where and how a request is sent, never what it answers) and the
    injected engine, plus the prompt's fingerprint and the parser's version. A new constructor
    parameter is therefore in the key unless it is declared transport.
    """

    transport_params: tuple[str, ...] = ()
    _NOT_CONFIG = ("self", "llm")  # a prebuilt engine is not configuration

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        sig = inspect.signature(init)

        @functools.wraps(init)
        def recording_init(self, *args, **kw):
            if not hasattr(self, "_init_args"):  # the most derived class's arguments
                bound = sig.bind(self, *args, **kw)
                bound.apply_defaults()
                self._init_args = {k: v for k, v in bound.arguments.items() if k not in cls._NOT_CONFIG}
            init(self, *args, **kw)

        cls.__init__ = recording_init

    def cache_config(self) -> dict[str, Any]:
        """Everything that determines this judge's answer to a request (the class doc)."""
        cfg = {k: v for k, v in self._init_args.items() if k not in self.transport_params}
        cfg["prompt"] = prompt_fingerprint(self.rubric)
        cfg["parser"] = PARSER_VERSION
        return cfg

    def __init__(
        self,
        model: str,
        rubric: str,
        temperature: float,
        max_tokens: int,
        top_logprobs: int,
        mask_tool_outputs: bool,
    ):
        if not isinstance(model, str) or model.strip() in ("", "???"):
            raise ValueError(f"model is required (a model name or path); got {model!r}")
        self.model = model
        self.rubric_name = rubric
        self.rubric = load_rubric(rubric)  # fail early on an unknown rubric
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.top_logprobs = int(top_logprobs)
        self.mask_tool_outputs = mask_tool_outputs
        self.reset_stats()

    @property
    def rejudge_share(self) -> float | None:
        """0 at temperature 0 (greedy decoding answers a re-asked request the same way); at a
        higher temperature not known without measuring it (``arenabench calibrate`` fits it from
        re-scores), so None (``types.JudgeTraits``)."""
        return 0.0 if self.temperature == 0 else None

    def _messages(self, req: PairRequest | PointRequest | RankRequest) -> list[dict[str, str]] | JudgeFailure:
        """The chat messages of a pairwise, a pointwise or a ranking request (``prompts``)."""
        if isinstance(req, PointRequest):
            return point_request_messages(self.rubric, req, self.mask_tool_outputs)
        if isinstance(req, RankRequest):
            return rank_request_messages(self.rubric, req, self.mask_tool_outputs)
        return request_messages(self.rubric, req, self.mask_tool_outputs)

    def _repr(self, **shown: Any) -> str:
        """``Name(key=value!r, ...)``: the judge's identity (cache keys use it), never a secret."""
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


__all__ = ["LLMJudge"]
