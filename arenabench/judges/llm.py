"""What the LLM backends (:mod:`~arenabench.judges.vllm_offline`, :mod:`~arenabench.judges.openai_compat`)
share: the rubric, the sampling settings every backend has, prompts and a repr without secrets."""

from __future__ import annotations

from typing import Any

from arenabench.judges.accounting import JudgeAccounting
from arenabench.judges.prompts import load_rubric, point_request_messages, request_messages
from arenabench.types import JudgeFailure, PairRequest, PointRequest


class LLMJudge(JudgeAccounting):
    """Base of the LLM judges (pairwise, and pointwise on the 1-10 scale of ``prompts.point_prompt``);
    each backend validates its own arguments first."""

    def __init__(
        self,
        model: str,
        rubric: str,
        temperature: float,
        max_tokens: int,
        top_logprobs: int,
        mask_tool_outputs: bool,
    ):
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

    def _messages(self, req: PairRequest | PointRequest) -> list[dict[str, str]] | JudgeFailure:
        """The chat messages of a pairwise or a pointwise request (``prompts``)."""
        if isinstance(req, PointRequest):
            return point_request_messages(self.rubric, req, self.mask_tool_outputs)
        return request_messages(self.rubric, req, self.mask_tool_outputs)

    def _repr(self, **shown: Any) -> str:
        """``Name(key=value!r, ...)``: the judge's identity (cache keys use it), never a secret."""
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


__all__ = ["LLMJudge"]
