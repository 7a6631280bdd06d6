"""Real vLLM on the CPU with a tiny random Llama: the code paths are real, the verdicts random.

Marked ``vllm`` (select with ``-m vllm``, skip with ``-m "not vllm"``); the test command runs
them. One offline engine and one ``vllm serve`` process are shared by the whole session.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from arenabench import rewards
from arenabench.engine import Engine
from arenabench.judges.openai_compat import OpenAIJudge
from arenabench.judges.prompts import consistent_verdict_regex
from arenabench.judges.vllm_offline import VLLMJudge
from arenabench.sim import simulate_groups
from arenabench.types import Group, JudgeFailure, PairJudgment, PairRequest, Trajectory

pytestmark = pytest.mark.vllm


def _requests(n: int, seed: int = 0) -> list[PairRequest]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        a = Trajectory(f"a{k}", f"Step {k}: I compute {rng.integers(100)}. Answer: {rng.integers(10)}")
        b = Trajectory(f"b{k}", f"Plan {k}: call search, then summarize. Answer: {rng.integers(10)}")
        out.append(PairRequest(f"Question {k}: what is {k} + {k}?", a, b, sample=k % 3))
    return out


class _CountingLLM:
    """The real ``vllm.LLM`` with its ``generate`` calls counted (everything else passes through)."""

    def __init__(self, llm):
        self._llm = llm
        self.generate_calls = 0
        self.batch_sizes: list[int] = []

    def generate(self, prompts, params, **kw):
        self.generate_calls += 1
        self.batch_sizes.append(len(prompts))
        return self._llm.generate(prompts, params, **kw)

    def __getattr__(self, name):
        return getattr(self._llm, name)


@pytest.fixture()
def counting(vllm_llm):
    return _CountingLLM(vllm_llm)


def test_wave_of_16_is_one_generate_call_and_every_regex_verdict_parses(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, llm=counting)
    replies = judge.judge_pairs(_requests(24))
    assert counting.generate_calls == 1 and counting.batch_sizes == [24]
    assert all(isinstance(r, PairJudgment) for r in replies), [
        r for r in replies if not isinstance(r, PairJudgment)
    ]
    for r in replies:
        assert 0 <= r.score_a <= 10 and 0 <= r.score_b <= 10
    assert judge.stats["calls"] == 1 and judge.stats["requests"] == 24
    assert judge.stats["prompt_tokens"] > 24 * 50 and judge.stats["completion_tokens"] >= 24 * 5
    assert judge.stats["failures"] == {}
    assert math.isfinite(judge.latency_percentiles()["p50"])


def test_regex_reasoning_prefix_puts_the_verdict_on_the_final_line(tiny_model_dir, counting):
    """``reasoning_chars > 0``: free reasoning, a newline, then the verdict -- the parser's
    final-line contract (issue 43), so every constrained reply still parses."""
    judge = VLLMJudge(
        str(tiny_model_dir),
        structured="regex",
        reasoning_chars=24,
        temperature=1.0,
        max_tokens=256,
        llm=counting,
    )
    replies = judge.judge_pairs(_requests(8))
    assert all(isinstance(r, PairJudgment) for r in replies), replies
    assert judge.stats["failures"] == {}


def test_engine_wave_goes_to_vllm_together(tiny_model_dir, counting):
    """Round-robin, K=2 groups of N=4: one wave of 2·6·2 = 24 requests → exactly one generate."""
    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, llm=counting)
    step = Engine(judge).run(rewards.get("round_robin"), simulate_groups(2, 4, seed=3))
    assert step.stats.waves == 1
    assert step.stats.judge_calls == 24
    assert step.stats.failures == 0
    assert counting.generate_calls == step.stats.judge_batches == 1
    for res in step.results:
        assert np.all(np.isfinite(res.advantage)) and abs(float(np.mean(res.advantage))) < 1e-9


def test_seeded_single_elim_one_generate_per_wave(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, llm=counting)
    step = Engine(judge).run(rewards.get("seeded_single_elim"), simulate_groups(3, 8, seed=1))
    assert step.stats.failures == 0
    assert counting.generate_calls == step.stats.waves == step.stats.judge_batches
    assert counting.batch_sizes[0] >= 16  # the anchor-seeding wave of all 3 groups


def test_choice_mode_prob_a_is_renormalized_over_labels(tiny_model_dir, counting):
    judge = VLLMJudge(
        str(tiny_model_dir), structured="choice", choices=["A", "B"], temperature=1.0, llm=counting
    )
    reqs = _requests(16, seed=2)
    replies = judge.judge_pairs(reqs)
    assert counting.generate_calls == 1
    assert all(isinstance(r, PairJudgment) for r in replies)
    probs = [r.prob_a for r in replies]
    assert all(p is not None and 0.0 <= p <= 1.0 for p in probs)
    assert len({round(p, 6) for p in probs}) > 1  # different prompts, different P(A)
    # vLLM reports the constrained distribution: the two labels' probabilities sum to 1 already.
    raw = counting._llm.generate(
        [judge._prompt(reqs[0], counting.get_tokenizer())], [judge.sampling_params(reqs[0])]
    )
    first = raw[0].outputs[0].logprobs[0]
    mass = {lp.decoded_token: math.exp(lp.logprob) for lp in first.values()}
    assert mass.get("A", 0.0) + mass.get("B", 0.0) == pytest.approx(1.0, abs=1e-4)
    assert probs[0] == pytest.approx(mass.get("A", 0.0) / (mass.get("A", 0.0) + mass.get("B", 0.0)), abs=1e-6)


def test_prc_constructor_on_vllm_probabilities(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured="choice", choices=["A", "B"], llm=counting)
    groups = [Group(g.prompt, g.trajectories, anchor=0, meta=g.meta) for g in simulate_groups(2, 4, seed=5)]
    step = Engine(judge).run(rewards.get("prc"), groups)
    assert step.stats.failures == 0
    for res in step.results:
        assert np.all(np.isfinite(res.reward)) and np.all((res.reward >= 0) & (res.reward <= 1))


def test_truncated_json_is_a_counted_failure_not_a_tie(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured="json", max_tokens=3, llm=counting)
    replies = judge.judge_pairs(_requests(4))
    assert all(isinstance(r, JudgeFailure) and "truncated" in r.reason for r in replies)
    assert judge.stats["failures"] == {"malformed verdict": 4}
    step = Engine(judge, max_retries=1).run(rewards.get("round_robin"), simulate_groups(1, 3, seed=0))
    # 3 pairs x 2 orders = 6 requests, each tried twice, all failed: counted and flagged, no tie
    assert (step.stats.judge_calls, step.stats.retries, step.stats.failures) == (12, 6, 6)
    res = step.results[0]
    assert "failed_matches:3" in res.flags, res.flags


def test_prompt_longer_than_context_fails_that_request_only(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), llm=counting)
    huge = Trajectory("h", "word " * 40_000)
    reqs = [PairRequest("q", huge, Trajectory("s", "short")), *_requests(2)]
    replies = judge.judge_pairs(reqs)
    assert isinstance(replies[0], JudgeFailure) and replies[0].reason.startswith("prompt too long")
    assert all(isinstance(r, PairJudgment) for r in replies[1:])
    assert counting.batch_sizes == [2]


def test_unknown_structured_mode_names_the_choices():
    with pytest.raises(ValueError, match=r"valid: \['regex', 'choice', 'json', None\]"):
        VLLMJudge("m", structured="grammar")


# -- the OpenAI-compatible backend against a real `vllm serve` --------------------------------


def serve_judge(urls, model, regex=None, **kw) -> OpenAIJudge:
    """An OpenAIJudge on `vllm serve`, its output held to ``regex`` (the consistent verdict's by default)."""
    regex = consistent_verdict_regex() if regex is None else regex
    return OpenAIJudge(
        urls, model=model, api_key_env=None, extra_body={"structured_outputs": {"regex": regex}}, **kw
    )


def test_openai_backend_answers_a_wave_from_vllm_serve(vllm_server):
    url, model = vllm_server
    judge = serve_judge(url, model, max_tokens=64, temperature=1.0, top_logprobs=5)
    replies = judge.judge_pairs(_requests(16))
    assert all(isinstance(r, PairJudgment) for r in replies), [
        r for r in replies if not isinstance(r, PairJudgment)
    ]
    assert judge.stats["calls"] == 16 and judge.stats["failures"] == {}
    assert judge.stats["prompt_tokens"] > 0 and judge.stats["completion_tokens"] > 0
    # the label is implied by the scores under the consistent regex, so P(label) is 1 (or 0)
    assert all(r.prob_a is not None and 0.0 <= r.prob_a <= 1.0 for r in replies)


def test_openai_backend_choice_probabilities(vllm_server):
    url, model = vllm_server
    judge = serve_judge(url, model, r'\{"winner": "(A|B)"\}', max_tokens=2, temperature=1.0, top_logprobs=5)
    replies = judge.judge_pairs(_requests(8, seed=4))
    assert all(
        isinstance(r, JudgeFailure) and "malformed" in r.reason for r in replies
    )  # max_tokens=2 truncates
    judge.max_tokens = 16
    replies = judge.judge_pairs(_requests(8, seed=4))
    assert all(isinstance(r, PairJudgment) for r in replies)
    assert all(r.prob_a is not None and 0.0 <= r.prob_a <= 1.0 for r in replies)
    assert len({round(r.prob_a, 6) for r in replies}) > 1


def test_openai_backend_dead_server_is_counted_after_retries(vllm_server):
    """A second base URL on a closed port: its requests fail over to the live server."""
    url, model = vllm_server
    judge = serve_judge(["http://127.0.0.1:9", url], model, retries=1, backoff_s=0.0, max_tokens=64)
    replies = judge.judge_pairs(_requests(6))
    assert all(isinstance(r, PairJudgment) for r in replies)
    assert judge.stats["retries"] == 3 and judge.stats["calls"] == 9


def test_token_counts_match_the_engine_counters_exactly(tiny_model_dir, vllm_llm):
    """The simulated judge's prefill (tiny BPE + the tiny chat template) is vLLM's own
    ``prompt_token_ids`` count on the same requests; cached and decode tokens are the engine's
    ``num_cached_tokens`` and output token ids, summed (docs/tokens.md)."""
    from arenabench.judges.tokenizer import render_chat
    from arenabench.judges.tokens import PromptTokens

    reqs = _requests(8, seed=5)
    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=0.0, top_logprobs=0, llm=vllm_llm)
    tokenizer = vllm_llm.get_tokenizer()
    counter = PromptTokens()
    msgs = judge._messages(reqs[0])
    assert render_chat(msgs) == tokenizer.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )
    outputs = vllm_llm.generate([judge._prompt(r, tokenizer) for r in reqs], use_tqdm=False)
    judge.judge_pairs(reqs)
    assert [len(o.prompt_token_ids) for o in outputs] == [n for n, _ in counter.prefill_batch(reqs)]
    assert judge.stats["prompt_tokens"] == sum(len(o.prompt_token_ids) for o in outputs)
    first = judge.stats["cached_prompt_tokens"]
    judge.judge_pairs(reqs)  # the same prompts again: vLLM's prefix cache serves them
    again = judge.stats["cached_prompt_tokens"] - first
    assert 0 < again < judge.stats["prompt_tokens"] / 2
    assert judge.stats["completion_tokens"] > 0


def test_prefix_ordered_wave_cached_tokens_equal_vllms_own_counter(tiny_model_dir, vllm_llm):
    """A round-robin wave sent in prefix order (``Engine(request_order="prefix")``) as one
    ``generate`` on an empty prefix cache: the judge's cached tokens (summed
    ``num_cached_tokens``) are vLLM's own ``vllm:prefix_cache_hits``, its prefill the engine's
    ``vllm:prefix_cache_queries``, and requests hit prefixes computed in the same batch."""

    def counters():
        return {m.name: m.value for m in vllm_llm.get_metrics() if m.name.startswith("vllm:prefix_cache_")}

    judge = VLLMJudge(str(tiny_model_dir), temperature=0.0, top_logprobs=0, llm=vllm_llm)
    assert vllm_llm.reset_prefix_cache()
    before = counters()
    step = Engine(judge, request_order="prefix").run(
        rewards.get("round_robin"), simulate_groups(2, 4, seed=11)
    )
    after = counters()
    assert step.stats.judge_batches == 1 and step.stats.failures == 0
    cached, prefill = judge.stats["cached_prompt_tokens"], judge.stats["prompt_tokens"]
    assert cached == after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"]
    assert prefill == after["vllm:prefix_cache_queries"] - before["vllm:prefix_cache_queries"]
    assert prefill / 2 < cached < prefill  # every request after the first shares the system prompt, or more


# --- pointwise asks (issue 41): the scoring prompt on the tiny model --------------------------------


def _points(n: int, seed: int = 0):
    from arenabench.types import PointRequest

    return [PointRequest(r.prompt, r.a, sample=r.sample) for r in _requests(n, seed)]


def test_a_pointwise_wave_is_one_generate_call_and_every_regex_score_parses(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, llm=counting)
    scores = judge.score_points(_points(12))
    assert counting.generate_calls == 1 and counting.batch_sizes == [12]
    assert all(isinstance(s, float) and s in {k / 9 for k in range(10)} for s in scores), scores
    assert judge.stats["requests"] == 12 and not judge.stats["failures"]
    assert judge.stats["prompt_tokens"] > 12 * 100 and judge.stats["completion_tokens"] >= 12 * 4


def test_free_text_scores_from_a_random_model_are_counted_failures(tiny_model_dir, counting):
    judge = VLLMJudge(str(tiny_model_dir), structured=None, temperature=1.0, max_tokens=8, llm=counting)
    replies = judge.score_points(_points(6))
    assert all(isinstance(r, JudgeFailure) and r.reason.startswith("malformed score") for r in replies)
    assert judge.stats["failures"] == {"malformed score": 6}


@pytest.mark.parametrize(
    ("cfg", "calls"),
    [
        ({"name": "pointwise"}, 8),
        ({"name": "pointwise_rank"}, 8),
        ({"name": "pointwise", "votes": 4}, 32),  # conf/reward/pointwise_budget.yaml
        ({"name": "prc"}, 12),
    ],
)
def test_pointwise_constructors_and_prc_count_tokens_on_vllm(tiny_model_dir, counting, cfg, calls):
    from arenabench.judges import JudgeStack

    judge = VLLMJudge(str(tiny_model_dir), structured="choice", choices=["A", "B"], llm=counting)
    stack = JudgeStack(judge)
    groups = [Group(g.prompt, g.trajectories, anchor=0, meta=g.meta) for g in simulate_groups(2, 4, seed=5)]
    step = Engine(stack).run(rewards.build(cfg), groups)
    assert step.stats.failures == 0 and step.stats.judge_calls == calls
    assert counting.generate_calls == step.stats.judge_batches
    m = stack.step_metrics()
    assert m["judge_prompt_tokens"] == judge.stats["prompt_tokens"] > calls * 100
    assert m["judge_completion_tokens"] > 0
    for res in step.results:
        assert np.all(np.isfinite(res.reward))


# --- ranking asks (issue 41, item 3): the listwise prompt on the tiny model ------------------------


def test_a_ranking_wave_is_one_generate_call_every_reply_parsed_or_counted(tiny_model_dir, counting):
    """The tiny random model cannot rank: under the ranking regex its lines have k numbers from 1
    to k, often one repeated, which the parser counts as ``malformed ranking`` failures. What is
    asserted is the accounting: one ``generate`` for the batch, every request a ranking of k
    scores or a counted failure, each list's prompt the whole group once, and the simulators'
    counter (``PromptTokens.rank_prefill``) equal to the engine's own prefill."""
    from arenabench.types import RankJudgment, RankRequest

    judge = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, max_tokens=32, llm=counting)
    groups = simulate_groups(4, 4, seed=7)
    reqs = [RankRequest(g.prompt, g.trajectories, sample=s) for s in range(2) for g in groups]
    out = judge.rank_lists(reqs)
    assert counting.generate_calls == 1 and counting.batch_sizes == [8]
    ok = [r for r in out if isinstance(r, RankJudgment)]
    bad = [r for r in out if isinstance(r, JudgeFailure)]
    assert len(ok) + len(bad) == 8
    assert all(len(r.scores) == 4 and sum(r.scores) == 6.0 for r in ok)  # 3 + 2 + 1 + 0 points, ties sharing
    assert all(r.reason.startswith("malformed ranking:") for r in bad), bad
    assert judge.stats["failures"] == ({"malformed ranking": len(bad)} if bad else {})
    assert judge.stats["requests"] == 8 and judge.stats["completion_tokens"] >= 8 * 5
    # the simulators' counter bills exactly what the engine prefilled (each response once a list)
    from arenabench.judges.tokens import PromptTokens

    assert sum(PromptTokens().rank_prefill(r)[0] for r in reqs) == judge.stats["prompt_tokens"]
    # the prefill of one list of 4 is below that of the 6 pairs a round-robin of 4 sends (12 prompts)
    pairs = VLLMJudge(str(tiny_model_dir), structured="regex", temperature=1.0, llm=counting)
    t = groups[0].trajectories
    pairs.judge_pairs(
        [PairRequest(groups[0].prompt, t[i], t[j]) for i in range(4) for j in range(4) if i != j]
    )
    assert 0 < judge.stats["prompt_tokens"] / 8 < pairs.stats["prompt_tokens"] / 4
