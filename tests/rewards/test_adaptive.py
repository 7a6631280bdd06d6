"""Adaptive: GRPO on verifiable groups, a tournament for all-equal ones; the exact-match verifier."""

import pickle
from dataclasses import replace

import numpy as np
import pytest
from conftest import make_group, true_rank

from arenabench import Engine, judges, rewards, verifiers
from arenabench.advantages import standardize
from arenabench.rewards.adaptive import routing_metrics, routing_report
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


# -- issue 42: routing rules and the tournament's scale ----------------------------------------


def three_kinds():
    return [
        rlvr_group([1, 0, 1, 1, 0, 0, 1, 0], "div"),
        rlvr_group([1] * 8, "right"),
        rlvr_group([0] * 8, "wrong"),
    ]


@pytest.mark.parametrize(
    "route_when, routed",
    [("all_equal", [0, 1, 1]), ("all_correct", [0, 1, 0]), ("all_wrong", [0, 0, 1])],
)
def test_route_when_picks_the_all_equal_groups_routed(calibrated, route_when, routed):
    out = calibrated.run(rewards.get("adaptive", route_when=route_when), three_kinds())
    paper = calibrated.run(rewards.get("adaptive"), three_kinds()).results
    for res, want, p in zip(out.results, routed, paper, strict=True):
        assert res.extra["summary"]["routed"] == want
        if want:  # the same tournament, the same draws as the paper's routing
            assert res.comparisons == 18 and np.array_equal(res.advantage, p.advantage)
        else:
            assert res.judge_calls == 0 and np.array_equal(res.advantage, standardize(res.reward))
    for k in (1, 2):  # an all-equal group left on the verifier path keeps advantage 0
        assert out.results[k].advantage.any() == bool(routed[k])
    rep = routing_report(out.results)
    assert rep["routed"] == pytest.approx(sum(routed) / 3)
    assert rep["zero_adv_before"] == pytest.approx(2 / 3)
    assert rep["zero_adv_after"] == pytest.approx((2 - sum(routed[1:])) / 3)
    assert routing_metrics(out.results) == pytest.approx(
        {"routed_share": sum(routed) / 3, "all_correct_share": 1 / 3, "all_wrong_share": 1 / 3}
    )


def test_routing_metrics_only_for_adaptive(calibrated):
    out = calibrated.run(rewards.get("reasoning_arena_live"), three_kinds())
    assert routing_metrics(out.results) == {}


def test_a_graded_all_equal_group_is_routed_only_under_all_equal():
    c = {w: rewards.get("adaptive", route_when=w) for w in ("all_equal", "all_correct", "all_wrong")}
    half = np.full(4, 0.5)
    assert [c[w].routes(half) for w in c] == [True, False, False]
    assert [c[w].routes(np.ones(4)) for w in c] == [True, True, False]
    assert [c[w].routes(np.zeros(4)) for w in c] == [True, False, True]
    assert not any(c[w].routes(np.array([0.0, 1.0])) for w in c)
    assert not rewards.get("adaptive", route=False).routes(np.ones(4))


def test_tournament_scale_reward_puts_routed_groups_on_the_verifier_scale(calibrated):
    paper = calibrated.run(rewards.get("adaptive"), three_kinds()).results
    scaled = calibrated.run(rewards.get("adaptive", tournament_scale="reward"), three_kinds()).results
    d0, d1 = paper[0], scaled[0]
    np.testing.assert_array_equal(d1.advantage, d0.advantage)  # verifier groups: GRPO under both
    for p, s in zip(paper[1:], scaled[1:], strict=True):
        np.testing.assert_array_equal(s.reward, p.reward)  # the same tournament rewards
        assert s.reward.min() == 0.0 and s.reward.max() == 1.0  # min-max: the verifier's units
        np.testing.assert_allclose(s.advantage, (s.reward - s.reward.mean()) / 0.5, rtol=0, atol=1e-15)
        np.testing.assert_allclose(p.advantage, standardize(p.reward), rtol=0, atol=1e-15)
        assert s.advantage.std() < p.advantage.std()  # never renormalized to unit std here
    # a half-right verifier group's GRPO advantages are ±1 (up to standardize's ε = 1e-6): a reward
    # step of 1 is an advantage step of 2, as in a routed group under tournament_scale=reward
    np.testing.assert_allclose(d0.advantage, np.where(d0.reward == 1, 1.0, -1.0), rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"route_when": "both"}, "route_when must be one of all_equal, all_correct, all_wrong; got 'both'"),
        ({"tournament_scale": "batch"}, "tournament_scale must be one of group, reward; got 'batch'"),
        ({"route": "yes"}, "route must be true or false"),
    ],
)
def test_bad_routing_options_name_the_choices(kw, msg):
    with pytest.raises(ValueError, match=msg):
        rewards.get("adaptive", **kw)


def test_a_routed_group_of_identical_traces_counts_as_routed(calibrated):
    g = rlvr_group([0] * 4, "same")
    g = Group(g.prompt, tuple(replace(t, text="same text. Answer: 7") for t in g.trajectories), meta=g.meta)
    res = calibrated.run(rewards.get("adaptive", tournament_scale="reward"), [g]).results[0]
    assert res.extra["summary"] == {
        "routed": 1.0,
        "zero_adv_before": 1.0,
        "all_correct": 0.0,
        "all_wrong": 1.0,
    }
    assert not res.advantage.any() and res.judge_calls == 0
