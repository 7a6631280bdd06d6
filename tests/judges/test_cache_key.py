"""The judgment cache's key is an LLM judge's complete answer-determining configuration (issue 43 §1).

Every constructor parameter of an LLM judge is in the key unless the class names it as transport
(where and how a request is sent, never what it answers); the test walks the signature, so a new
parameter is covered the day it is added. A bad cache row is skipped and counted, never fatal.
"""

from __future__ import annotations

import inspect
import json

import pytest

from arenabench.judges.cache import CachedJudge, JudgmentCache
from arenabench.judges.openai_compat import OpenAIJudge
from arenabench.judges.simulated import SimulatedJudge
from arenabench.judges.stack import JudgeStack, cache_identity
from arenabench.judges.vllm_offline import VLLMJudge
from arenabench.types import PairJudgment, PairRequest, Trajectory

# a changed value for each answer-determining parameter (a parameter missing here fails the test)
VARIED = {
    "model": "other-model",
    "rubric": "travel_planning",
    "temperature": 1.0,
    "max_tokens": 77,
    "top_logprobs": 3,
    "extra_body": {"structured_outputs": {"regex": "x"}},
    "point_extra_body": {"structured_outputs": {"regex": "y"}},
    "rank_extra_body": {"structured_outputs": {"regex": "z"}},
    "mask_tool_outputs": False,
    "max_reply_chars": 1234,
    "structured": "json",
    "choices": ["A", "B"],
    "reasoning_chars": 40,
    "engine_kwargs": {"dtype": "bfloat16"},
}
BASE = {
    OpenAIJudge: {"base_urls": "http://127.0.0.1:1", "model": "m"},
    VLLMJudge: {"model": "m", "llm": object()},
}


def _params(cls) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "llm")]


@pytest.mark.parametrize("cls", [OpenAIJudge, VLLMJudge])
def test_every_answer_parameter_changes_the_key(cls):
    base = cache_identity(cls(**BASE[cls]))
    assert base == cache_identity(cls(**BASE[cls]))  # stable
    transport = set(cls.transport_params)
    assert transport <= set(_params(cls))
    changed = 0
    for name in _params(cls):
        if name in transport:
            continue
        assert name in VARIED, f"{cls.__name__}.{name}: give it a varied value (is it answer-determining?)"
        other = cache_identity(cls(**{**BASE[cls], name: VARIED[name]}))
        assert other != base, f"{cls.__name__}: changing {name} kept the cache key"
        changed += 1
    assert changed >= 6


def test_transport_parameters_keep_the_key():
    """Where a request goes and how it is retried never changes its answer: one cache serves
    every replica and retry policy."""
    base = cache_identity(OpenAIJudge(**BASE[OpenAIJudge]))
    for name, value in {
        "base_urls": ["http://127.0.0.1:2", "http://127.0.0.1:3"],
        "api_key_env": "OTHER_KEY",
        "max_concurrency": 3,
        "timeout_s": 5.0,
        "retries": 7,
        "backoff_s": 0.1,
        "outage_deadline_s": 3.0,
        "max_backoff_s": 2.0,
    }.items():
        assert cache_identity(OpenAIJudge(**{**BASE[OpenAIJudge], name: value})) == base, name


def test_key_names_prompt_and_parser_versions():
    model, rubric = cache_identity(OpenAIJudge(**BASE[OpenAIJudge]))
    cfg = json.loads(model.split(":", 2)[2])
    assert rubric == "open_writing"
    assert set(cfg) >= {"prompt", "parser", "temperature", "top_logprobs", "extra_body"}
    assert len(cfg["prompt"]) == 64  # sha256 of the rendered prompt template and rubric


def test_secret_never_in_the_key(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-very-secret")
    model, _ = cache_identity(OpenAIJudge(**BASE[OpenAIJudge], api_key_env="JUDGE_KEY"))
    assert "sk-very-secret" not in model


def test_simulated_key_unchanged():
    """The simulated judges' keys (and so their cache files) are what they were."""
    model, rubric = cache_identity(SimulatedJudge("calibrated"))
    assert rubric == "simulated"
    assert model.startswith("SimulatedJudge:calibrated:{")


class _Stored:
    """Answers every request with A winning; counts requests."""

    def __init__(self):
        self.requests = 0

    def judge_pairs(self, requests):
        self.requests += len(requests)
        return [PairJudgment(7.0, 3.0) for _ in requests]


def _reqs(n=3):
    ts = [Trajectory(f"t{i}", f"text {i}") for i in range(n + 1)]
    return [PairRequest("q", ts[i], ts[i + 1]) for i in range(n)]


@pytest.mark.parametrize("row", ["[1, 2]", "5", '"x"', "null", '{"score_a": NaN, "score_b": 1}', "{not json"])
def test_bad_cache_row_is_skipped_and_counted(tmp_path, row):
    cache = JudgmentCache(tmp_path / "c.sqlite")
    inner = _Stored()
    judge = CachedJudge(inner, cache, "m", "r")
    reqs = _reqs()
    judge.judge_pairs(reqs)  # fills the cache
    bad = judge.key(reqs[1])
    conn = cache._connection()
    conn.execute("UPDATE judgments SET value = ? WHERE key = ?", (row, bad))
    again = CachedJudge(inner, JudgmentCache(tmp_path / "c.sqlite"), "m", "r")
    assert again.judge_pairs(reqs) == [PairJudgment(7.0, 3.0)] * 3  # asked again, not fatal
    assert inner.requests == 4
    assert again.report()["bad_rows"] == 1 and again.report()["judge_bad_rows"] == 1
    assert again.misses == 1 and again.hits == 2


def test_stack_over_llm_judge_misses_after_a_sampling_change(tmp_path):
    """The issue's case: a second run at another temperature / top_logprobs must not reuse the
    first run's answers (it got 24 of 24 hits and PRC saw prob_a=None)."""
    path = str(tmp_path / "c.sqlite")
    a = JudgeStack(OpenAIJudge(**BASE[OpenAIJudge]), cache=path)
    b = JudgeStack(OpenAIJudge(**BASE[OpenAIJudge], temperature=1.0, top_logprobs=5), cache=path)
    r = _reqs(1)[0]
    assert a.cached.key(r) != b.cached.key(r)
