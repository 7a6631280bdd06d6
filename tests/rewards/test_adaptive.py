"""Adaptive: GRPO on verifiable groups, a tournament for all-equal ones; the exact-match verifier."""

import pickle

import numpy as np
import pytest
from conftest import make_group, true_rank

from arenabench import Engine, judges, rewards, verifiers
from arenabench.advantages import standardize
from arenabench.rewards.adaptive import routing_report
from arenabench.sim import simulate_groups
from arenabench.types import Group


def rlvr_group(correct, prompt, quality=None):
    n = len(correct)
    q = np.linspace(1.0, 2.0, n) if quality is None else quality
    texts = [f"{prompt} trace {i}. Answer: {'42' if c else str(7 + i)}" for i, c in enumerate(correct)]
    return make_group(q, prompt=prompt, texts=texts)


def test_adaptive_keeps_diverse_groups_and_routes_all_equal_ones(calibrated):
    diverse = rlvr_group([1, 0, 1, 1, 0, 0, 1, 0], "div")
    all_right = rlvr_group([1] * 8, "right")
    all_wrong = rlvr_group([0] * 8, "wrong")
    out = calibrated.run(rewards.get("adaptive"), [diverse, all_right, all_wrong])
    d, a, w = out.results
    r = np.array([1, 0, 1, 1, 0, 0, 1, 0], float)
    np.testing.assert_array_equal(d.reward, r)
    np.testing.assert_array_equal(d.advantage, standardize(r))  # GRPO, unchanged
    assert d.judge_calls == 0 and not d.extra["summary"]["routed"]
    for g in (a, w):
        assert g.extra["summary"]["routed"] and g.comparisons == 18
        assert np.any(g.advantage != 0)
    assert routing_report(out.results) == pytest.approx(
        {"routed": 2 / 3, "zero_adv_before": 2 / 3, "zero_adv_after": 0.0}
    )


def test_adaptive_routes_to_any_tournament(noiseless):
    g = rlvr_group([1] * 6, "x", quality=np.array([0.3, 0.1, 0.6, 0.2, 0.5, 0.4]))
    c = rewards.get("adaptive", tournament="rrc_scr", tournament_params={"cara": True})
    r = noiseless.run(c, [g]).results[0]
    np.testing.assert_array_equal(r.rank, true_rank(g))
    assert pickle.loads(pickle.dumps(c)) == c


@pytest.mark.slow
def test_adaptive_on_simulated_rlvr_groups():
    groups = simulate_groups(300, 8, seed=4)
    out = Engine(judges.get("calibrated")).run(rewards.get("adaptive"), groups)
    rep = routing_report(out.results)
    assert 0.5 < rep["routed"] < 0.75 and rep["zero_adv_before"] == rep["routed"]
    assert rep["zero_adv_after"] == 0.0


def test_exact_match_verifier():
    f = verifiers.extract_answer
    assert f("so the Answer: 42.") == "42."
    assert f("\\boxed{3} then \\boxed{ 7 }") == " 7 "
    assert f("no final answer") is None
    g = make_group([0, 0, 0, 0], texts=["Answer: 42", "answer is 42.", "$\\boxed{4 2}$", "Answer: 43"])
    np.testing.assert_array_equal(verifiers.get("exact_match")(g), [1, 1, 1, 0])
    with pytest.raises(ValueError, match="exact_match needs the reference answer"):
        verifiers.get("exact_match")(Group("p", make_group([0, 1]).trajectories))
    with pytest.raises(ValueError, match="registered: exact_match"):
        verifiers.get("exact")
