"""The simulated judge's token bill (arenabench.judges.tokens): exact prefill under the tiny BPE,
the ideal prefix cache, the assumed verdict-only decode. Against vLLM's own counters: test_vllm."""

from __future__ import annotations

import os

import pytest

from arenabench import judges, rewards
from arenabench.engine import Engine
from arenabench.judges.stack import JudgeStack
from arenabench.judges.tokens import PromptTokens
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest, PointRequest, Trajectory

# texts whose pieces do not add up (leading/trailing whitespace, empty) take the whole-string path
TEXTS = [
    "plain words t1 t2",
    " leading",
    "trailing ",
    "\nnewline",
    "x\n",
    "",
    "a<<<b>>>c",
    "été ☃ 12",
    "'s it",
]


def q(prompt: str, a: str, b: str, **meta) -> PairRequest:
    return PairRequest(prompt, Trajectory("a", a, meta=meta), Trajectory("b", b))


@pytest.fixture(scope="module")
def counter():
    return PromptTokens()


def test_prefill_is_the_whole_prompt_count_on_every_text(counter):
    reqs = [q("prompt 3", a, b) for a in TEXTS for b in TEXTS]
    reqs.append(
        PairRequest(
            "q", Trajectory("a", "x", meta={"final_answer": "7", "reasoning": " r "}), Trajectory("b", "y")
        )
    )
    fresh = PromptTokens()
    got = [n for n, _ in fresh.prefill_batch(reqs)]
    assert got == [counter.count(counter.render(r)) for r in reqs]


def test_ideal_cache_serves_exactly_the_shared_prefix(counter):
    pt = PromptTokens()
    r1, r2 = q("prompt 9", "same A text", "B one"), q("prompt 9", "same A text", "other B")
    (n1, c1), (n2, c2) = pt.prefill_batch([r1, r2])
    p1, p2 = pt.render(r1), pt.render(r2)
    shared = os.path.commonprefix([p1, p2])
    assert c1 == 0 and n1 == counter.count(p1) and n2 == counter.count(p2)
    assert c2 == counter.count(shared) > 0
    # a new trajectory A under the same query: only the system + query part is cached
    ((n3, c3),) = pt.prefill_batch([q("prompt 9", "new A", "B one")])
    assert c3 == counter.count(p1[: p1.index("same A text")])
    # a new query: the system message (everything before the query's text) is cached
    ((n4, c4),) = pt.prefill_batch([q("other query", "same A text", "B one")])
    p4 = pt.render(q("other query", "same A text", "B one"))
    assert c4 == counter.count(os.path.commonprefix([p1, p4])) > 100 and n4 == counter.count(p4)


def test_reference_rubric_counts_the_reference_and_skips_a_missing_one():
    pt = PromptTokens(rubric="math_reasoning")  # uses_reference: true
    r = q("p", "x1", "x2", reference="42")
    (n, _), missing = pt.prefill_batch([r, q("p", "x1", "x2")])
    assert n == pt.count(pt.render(r)) and "42" in pt.render(r) and missing is None


def test_simulated_judge_counts_tokens_without_changing_a_verdict(counter):
    groups = simulate_groups(3, 4, seed=0)
    on, off = JudgeStack(judges.get("calibrated")), JudgeStack(judges.get("calibrated", tokenizer=None))
    out_on = Engine(on, seed=0).run(rewards.get("round_robin"), groups)
    out_off = Engine(off, seed=0).run(rewards.get("round_robin"), groups)
    assert [r.advantage.tolist() for r in out_on.results] == [r.advantage.tolist() for r in out_off.results]
    m_on, m_off = on.step_metrics(), off.step_metrics()
    assert m_off["judge_prompt_tokens"] == m_off["judge_completion_tokens"] == 0
    n_req = on.stats["requests"]
    assert (
        m_on["judge_prompt_tokens"] > 500 * n_req
        and m_on["judge_prompt_tokens_total"] == m_on["judge_prompt_tokens"]
    )
    assert 0 < m_on["judge_cached_prompt_tokens"] < m_on["judge_prompt_tokens"]
    # decode: the verdict line of integer scores + one end-of-sequence token per request
    line = counter.count('{"score_a": 7, "score_b": 3, "winner": "A"}')
    assert counter.decode(7.2, 2.6) == line + 1
    assert n_req * (line - 3) <= m_on["judge_completion_tokens"] <= n_req * (line + 3)
    assert on.step_metrics()["judge_prompt_tokens"] == 0  # per step; the total stays
    assert on.step_metrics()["judge_prompt_tokens_total"] == m_on["judge_prompt_tokens"]


def test_unknown_tokenizer_names_the_valid_ones():
    with pytest.raises(ValueError, match="tiny-bpe"):
        judges.get("calibrated", tokenizer="gpt2")


@pytest.mark.parametrize("name", judges.fitted())
def test_fitted_judge_counts_the_simulated_judges_tokens_exactly(name, counter):
    """A fitted judge (kind ordinal) bills what the simulated judge bills for the same requests:
    each prompt's whole count under the tiny BPE, the same ideal-cache share, and the verdict line
    of its own scores (1 and 0; a tie 0 and 0) + one end-of-sequence token."""
    groups = simulate_groups(2, 4, seed=1)
    reqs = [
        PairRequest(g.prompt, g.trajectories[i], g.trajectories[j])
        for g in groups
        for i in range(4)
        for j in range(4)
        if i != j
    ]
    fitted, sim = judges.get(name), judges.get("calibrated")
    verdicts = fitted.judge_pairs(reqs)
    sim.judge_pairs(reqs)
    assert fitted.stats["prompt_tokens"] == sum(counter.count(counter.render(r)) for r in reqs)
    assert fitted.stats["prompt_tokens"] == sim.stats["prompt_tokens"]
    assert 0 < fitted.stats["cached_prompt_tokens"] == sim.stats["cached_prompt_tokens"]
    decode = 0
    for v in verdicts:
        a, b = int(round(v.score_a)), int(round(v.score_b))
        w = "A" if a > b else "B" if b > a else "tie"
        decode += counter.count(f'{{"score_a": {a}, "score_b": {b}, "winner": "{w}"}}') + 1
    assert fitted.stats["completion_tokens"] == decode
    assert judges.get(name, tokenizer=None).judge_pairs(reqs) == verdicts
    ref_rubric = judges.get(name, rubric="math_reasoning")  # no reference in these requests: nothing sent
    assert ref_rubric.judge_pairs(reqs[:1]) == verdicts[:1] and ref_rubric.stats["prompt_tokens"] == 0


@pytest.mark.parametrize("spec", ["round_robin", "seeded_single_elim", "anchor", "pointwise"])
def test_fitted_judge_rewards_are_bit_identical_with_and_without_counting(spec):
    groups = simulate_groups(3, 8, seed=2)
    out = {}
    for tok in ("tiny-bpe", None):
        stack = JudgeStack(judges.get("gpt4_llmbar", tokenizer=tok))
        out[tok] = (Engine(stack, seed=0).run(rewards.get(spec), groups), stack.step_metrics())
    (on, m_on), (off, m_off) = out["tiny-bpe"], out[None]
    for a, b in zip(on.results, off.results, strict=True):
        assert a.reward.tobytes() == b.reward.tobytes() and a.advantage.tobytes() == b.advantage.tobytes()
    assert m_off["judge_prompt_tokens"] == m_off["judge_completion_tokens"] == 0
    assert m_on["judge_prompt_tokens"] > 0  # pointwise too: its scoring prompt (issue 41 item 4)


def test_plain_words_count_as_their_pre_tokens_exactly():
    """The per-pre-token count of plain texts (module doc) equals the whole encode, on random texts
    over letters, digits and single spaces, on a tiny policy's texts and on near-misses (other
    characters, doubled or edge spaces) that must take the whole-encode path."""
    import random

    fresh = PromptTokens()
    assert fresh._pre_tokens is not None  # the tiny BPE has the shape the fast path needs
    rng = random.Random(0)
    alphabets = ["abcxyzABCXYZ0123456789", "t0123456789", "tT15 ab9"]
    texts = ["t3 t5 t12 t0", "A1b2C3 x", "a  b", " a b", "a b ", "a\tb", "a'b c", "x1.5 y", "ab-cd"]
    for k in range(3000):
        words = ["".join(rng.choice(alphabets[k % 3]) for _ in range(rng.randint(1, 6))) for _ in range(8)]
        texts.append(" ".join(w for w in words if w.strip()) or "x")
    got = [fresh.count(t) for t in texts]
    want = [len(fresh.tok.encode(t, add_special_tokens=False).ids) for t in texts]
    assert got == want
    assert len(fresh._pre_tokens) > 10  # the fast path ran


def test_pointwise_prefill_is_the_whole_prompt_and_caches_what_repeats():
    """``PromptTokens.point_prefill`` (issue 41 item 4: pointwise rows of the tokens frontier)
    equals encoding the whole pointwise prompt on every text; a query seen before gets the text
    before the trajectory cached, the same request again its whole prompt, a new query the system
    message; the assumed reply is ``{"score": n}`` on the 1–10 scale."""
    pt = PromptTokens()
    reqs = [PointRequest("prompt 5", Trajectory("a", x)) for x in TEXTS]
    got = [pt.point_prefill(r) for r in reqs]
    assert [n for n, _ in got] == [pt.count(pt.render_point(r)) for r in reqs]
    assert pt.point_prefill(reqs[0]) == (got[0][0], got[0][0])  # sent again whole
    # a new plain trajectory under a query seen before: everything before the trajectory is cached
    p0 = pt.render_point(reqs[0])
    n2, c2 = pt.point_prefill(PointRequest("prompt 5", Trajectory("b", "other words t9")))
    assert c2 == pt.count(p0[: p0.index(TEXTS[0])])
    new = PointRequest("other query", Trajectory("a", "plain words t1 t2"))
    n, c = pt.point_prefill(new)
    system = pt.render_point(new).split("other query")[0]
    assert c == pt.count(system) > 50 and n == pt.count(pt.render_point(new))
    assert pt.point_decode(1.0) == pt.count('{"score": 10}') + 1
    assert pt.point_decode(0.0) == pt.count('{"score": 1}') + 1
    stats = {"prompt_tokens": 0, "cached_prompt_tokens": 0, "completion_tokens": 0}
    PromptTokens().charge_points(stats, reqs[:2], [0.5, 0.25])
    assert stats["prompt_tokens"] == got[0][0] + got[1][0]
    assert stats["completion_tokens"] == pt.point_decode(0.5) + pt.point_decode(0.25)


def test_unbilled_requests_stay_out_of_the_stacks_counters():
    """The trainer's SNR probe re-scores responses on the bare judge inside ``stack.unbilled()``:
    its tokens are no part of a constructor's bill (step and total counters), what the stack sends
    afterwards is."""
    stack = JudgeStack(judges.get("calibrated"))
    reqs = [PointRequest("q", Trajectory("a", "t1 t2 t3", meta={"quality": 0.5}))]
    with stack.unbilled():
        stack.base.score_points(reqs)
    assert stack.base.stats["prompt_tokens"] > 0  # the judge did count them ...
    m = stack.step_metrics()
    assert m["judge_prompt_tokens"] == m["judge_prompt_tokens_total"] == 0  # ... the bill does not
    stack.score_points(reqs)
    m = stack.step_metrics()
    assert m["judge_prompt_tokens"] == m["judge_prompt_tokens_total"] > 0
