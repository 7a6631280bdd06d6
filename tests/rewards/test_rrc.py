"""RRC (SCR, CARA, AGR, PRC), Reasoning Arena (live, full, adaptive) and Writing-Zero."""

import json
import pickle

import numpy as np
import pytest
from conftest import make_group, random_groups, true_rank

from arenabench import Engine, judges, rewards, verifiers
from arenabench.advantages import standardize
from arenabench.aggregation import is_swap_optimal
from arenabench.fidelity import run_fidelity
from arenabench.rewards.adaptive import routing_report
from arenabench.rewards.reference import AnchorPool
from arenabench.sim import SimulatedReference, simulate_groups
from arenabench.types import Group, MatchResult, PairJudgment, Trajectory

SIZES = [2, 3, 5, 8, 16]


def anchors_between(group, per_gap=1):
    """Reference anchors whose qualities sit between every two consecutive rollouts (and
    beyond both ends): a pool spanning the quality range."""
    q = np.sort([t.meta["quality"] for t in group.trajectories])
    cuts = np.concatenate([[q[0] - 1], (q[1:] + q[:-1]) / 2, [q[-1] + 1]])
    return [
        Trajectory(f"a{k}", f"anchor {k} for {group.prompt}", 500, {"quality": float(c)})
        for k, c in enumerate(np.repeat(cuts, per_gap))
    ]


def agr_with_pool(groups, **params):
    c = rewards.get("rrc_agr", **params)
    c.pool = AnchorPool.fixed({g.prompt: anchors_between(g) for g in groups})
    return c


# --- exact counts ----------------------------------------------------------------------------


@pytest.mark.parametrize("votes", [1, 3])
@pytest.mark.parametrize("n", SIZES)
def test_scr_and_agr_judge_sample_counts(n, votes, calibrated):
    groups = random_groups(n, k=3, seed=n)
    for cara in (False, True):
        for r in calibrated.run(rewards.get("rrc_scr", votes=votes, cara=cara), groups).results:
            assert r.comparisons == n * (n - 1) // 2
            assert r.judge_calls == 2 * votes * n * (n - 1) // 2  # V·m(m−1)/2 per order
    for n_anchors in (1, 4):
        agr = rewards.get("rrc_agr", votes=votes, n_anchors=n_anchors)
        for r in calibrated.run(agr, groups).results:
            assert r.comparisons == n * n_anchors
            assert r.judge_calls == 2 * votes * n * n_anchors  # V·m·n per order
            assert r.waves == 1


@pytest.mark.parametrize("n", list(range(2, 20)) + [32])
def test_live_tournament_is_linear_and_18_at_n8(n, calibrated):
    for r in calibrated.run(rewards.get("reasoning_arena_live"), random_groups(n, k=3, seed=n)).results:
        assert r.comparisons == (1 if n == 2 else 3 * n - 6)
        assert r.waves == n - 1
        assert r.judge_calls == 2 * r.comparisons
    if n == 8:
        assert r.comparisons == 18 == 0 + 1 + 2 + 3 * 5


def test_live_opponents_are_best_worst_median_of_the_placed():
    """Replay the live schedule: every wave's opponents are distinct and already placed."""
    c = rewards.get("reasoning_arena_live")
    group = random_groups(8, seed=3)[0]
    gen = c.play(group, np.random.default_rng(0))
    asks = next(gen)
    q = [t.meta["quality"] for t in group.trajectories]
    seen = []
    for t in range(1, 8):
        assert [m.i for m in asks] == [t] * min(t, 3)
        opp = [m.j for m in asks]
        assert len(set(opp)) == len(opp) and all(o < t for o in opp)
        if t >= 2:  # best and worst of the placed so far (a perfect judge: true order)
            placed = sorted(range(t), key=lambda k: -q[k])
            assert opp[:2] == [placed[0], placed[-1]]
        seen.append(opp)
        results = []
        for m in asks:  # a perfect judge's verdicts, both orders
            s = (float(q[m.i] > q[m.j]), float(q[m.j] > q[m.i]))
            results.append(MatchResult(m.i, m.j, 2 * s[0], 2 * s[1], samples=[s, s]))
        try:
            asks = gen.send(results)
        except StopIteration as stop:
            outcome = stop.value
            break
    assert t == 7 and sum(len(o) for o in seen) == 18
    assert int(np.argmax(outcome.reward)) == int(np.argmax(q))


# --- noise-free judge recovers the truth ---------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_noiseless_scr_rewards_are_alpha_times_true_wins(n, noiseless):
    groups = random_groups(n, k=4, seed=10 + n)
    for cara in (False, True):
        res = noiseless.run(rewards.get("rrc_scr", alpha=0.25, cara=cara, votes=3), groups).results
        for g, r in zip(groups, res, strict=True):
            np.testing.assert_allclose(r.reward, 0.25 * (n - 1 - true_rank(g)))
            assert r.extra["cycles"] == 0


@pytest.mark.parametrize("n", SIZES)
def test_noiseless_agr_with_spanning_anchors_recovers_the_order(n, noiseless):
    groups = random_groups(n, k=4, seed=20 + n)
    res = noiseless.run(agr_with_pool(groups, alpha=0.5), groups).results
    for g, r in zip(groups, res, strict=True):
        np.testing.assert_array_equal(r.rank, true_rank(g))
        np.testing.assert_allclose(r.reward, 0.5 * (n - true_rank(g)))  # anchors below each


@pytest.mark.parametrize("name", ["reasoning_arena_live", "reasoning_arena_full"])
def test_noiseless_bradley_terry_finds_the_true_best(name, noiseless):
    for n in range(2, 17):
        groups = random_groups(n, k=6, seed=30 + n)
        for g, r in zip(groups, noiseless.run(rewards.get(name), groups).results, strict=True):
            best = int(np.argmin(true_rank(g)))
            assert r.reward[best] == 1.0 and np.sum(r.reward == 1.0) == 1, (name, n)
            assert r.reward.min() == 0.0  # min-max to [0, 1]
            if name == "reasoning_arena_full":  # all pairs: the whole order
                np.testing.assert_array_equal(r.rank, true_rank(g))


# --- CARA: cyclic preferences are repaired ---------------------------------------------------------


class CyclicJudge:
    """Rock-paper-scissors over the first three rollouts (0 > 1 > 2 > 0), true quality
    elsewhere: a majority graph with a 3-cycle that win counts cannot order."""

    def __init__(self):
        self.inner = judges.get("noiseless")

    def judge_pairs(self, requests):
        out = []
        for r, g in zip(requests, self.inner.judge_pairs(requests), strict=True):
            ia, ib = int(r.a.id.rsplit("-", 1)[1]), int(r.b.id.rsplit("-", 1)[1])
            if {ia, ib} <= {0, 1, 2}:
                a_wins = (ib - ia) % 3 == 1
                out.append(PairJudgment(9.0 if a_wins else 1.0, 1.0 if a_wins else 9.0))
            else:
                out.append(g)
        return out


def test_cara_breaks_a_cycle_that_win_counts_tie():
    group = make_group([1.0, 1.0, 1.0, 0.0, -1.0], prompt="rps")
    engine = Engine(CyclicJudge())
    plain = engine.run(rewards.get("rrc_scr"), [group]).results[0]
    assert plain.extra["cycles"] == 1
    np.testing.assert_allclose(plain.reward[:3], [0.3, 0.3, 0.3])  # the cycle cancels out
    cara = engine.run(rewards.get("rrc_scr", cara=True), [group]).results[0]
    assert sorted(cara.reward / 0.1) == pytest.approx([0, 1, 2, 3, 4])  # a strict order
    assert len(set(cara.reward[:3])) == 3
    np.testing.assert_allclose(cara.reward[3:], [0.1, 0.0])
    assert is_swap_optimal(cara.extra["votes"], cara.extra["kemeny_order"])
    assert cara.extra["kemeny_disagreement"] == 2.0  # one reversed pair, both votes


def test_cara_orders_are_swap_optimal_on_a_noisy_judge():
    judge = judges.get("calibrated", pair_noise=0.6)  # noisy enough for many cycles
    groups = random_groups(8, k=60, seed=5)
    res = Engine(judge).run(rewards.get("rrc_scr", cara=True, votes=1), groups).results
    assert sum(r.extra["cycles"] > 0 for r in res) >= 10
    for r in res:
        assert is_swap_optimal(r.extra["votes"], r.extra["kemeny_order"])
        np.testing.assert_allclose(np.sort(r.reward), 0.1 * np.arange(8))


# --- AGR's anchor pool -------------------------------------------------------------------------


def test_agr_pool_is_generated_once_and_reused_across_steps(tmp_path, calibrated):
    groups = simulate_groups(5, 6, seed=1)
    path = tmp_path / "pool.json"
    c = rewards.get("rrc_agr", n_anchors=3, pool_path=str(path))
    first = calibrated.run(c, groups, step=0).results
    again = calibrated.run(c, groups, step=1).results
    assert c.pool.generated == 5 * 3
    assert [r.extra["summary"]["reference_rollouts"] for r in first] == [3] * 5
    assert [r.extra["summary"]["reference_rollouts"] for r in again] == [0] * 5
    # stored durably: a fresh constructor (a resumed sweep) pays nothing and sees the same anchors
    resumed = rewards.get("rrc_agr", n_anchors=3, pool_path=str(path))
    out = calibrated.run(resumed, groups, step=7).results
    assert resumed.pool.generated == 0
    for x, y in zip(first, out, strict=True):
        np.testing.assert_array_equal(x.reward, y.reward)
    assert len(json.loads(path.read_text())["prompts"]) == 5
    with pytest.raises(ValueError, match="holds 3 anchors per prompt"):
        rewards.get("rrc_agr", n_anchors=4, pool_path=str(path))


def test_agr_refresh_every_k_steps(calibrated):
    groups = simulate_groups(2, 4, seed=2)
    c = rewards.get("rrc_agr", n_anchors=2, refresh_every=2)
    texts = []
    for step in range(5):
        calibrated.run(c, groups, step=step)
        texts.append(c.pool.entries[groups[0].prompt]["anchors"][0].text)
    assert c.pool.generated == 2 * 2 * 3  # steps 0, 2, 4
    assert texts[0] == texts[1] != texts[2] == texts[3] != texts[4]


def test_reference_policy_is_fixed_and_deterministic():
    g = simulate_groups(1, 4, seed=3)[0]
    a = SimulatedReference().generate(g, 50)
    b = SimulatedReference().generate(g, 50)
    assert [t.meta["quality"] for t in a] == [t.meta["quality"] for t in b]
    q = np.array([t.meta["quality"] for t in a])
    assert abs(q.mean() - g.meta["prompt_quality"]) < 0.1 and 0.15 < q.std() < 0.25


# --- PRC -------------------------------------------------------------------------------------------


def test_prc_reward_is_the_mean_probability_over_both_orders():
    class Fixed:
        """P(A) = 0.8 when rollout 1 is shown first, 0.4 when it is shown second."""

        def judge_pairs(self, requests):
            return [PairJudgment(5.0, 5.0, 0.8 if r.a.id.endswith("-1") else 0.4) for r in requests]

    group = make_group([0.0, 1.0], anchor=0)
    r = Engine(Fixed()).run(rewards.get("prc"), [group]).results[0]
    # order (1, 0): P(1 better) = 0.8; order (0, 1): P(0 better) = 0.4 → P(1 better) = 0.6
    np.testing.assert_allclose(r.reward, [0.5, 0.7])
    assert r.judge_calls == 2


def test_prc_saturates_under_chain_of_thought():
    groups = simulate_groups(400, 8, seed=0)
    cot = Engine(judges.get("cot")).run(rewards.get("prc"), groups).results
    cal = Engine(judges.get("calibrated")).run(rewards.get("prc"), groups).results
    share = np.mean([r.extra["summary"]["prob_extreme"] for r in cot])
    assert 0.86 <= share <= 0.91  # RRC measured 88.3%
    assert np.mean([r.extra["summary"]["prob_extreme"] for r in cal]) < 0.6
    hist = sum(r.extra["prob_hist"] for r in cot)
    assert hist.sum() == 400 * 7 * 2 and hist[0] + hist[-1] > 0.85 * hist.sum()


def test_prc_needs_a_judge_with_probabilities():
    class ScoresOnly:
        def judge_pairs(self, requests):
            return [PairJudgment(5.0, 4.0) for _ in requests]

    with pytest.raises(ValueError, match="reports P\\(A is better\\)"):
        Engine(ScoresOnly()).run(rewards.get("prc"), [make_group([0.0, 1.0])])


# --- adaptive ------------------------------------------------------------------------------------


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


# --- Writing-Zero ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_writing_zero_is_one_random_peer_each(n, noiseless):
    groups = random_groups(n, k=5, seed=40 + n)
    for g, r in zip(groups, noiseless.run(rewards.get("writing_zero"), groups).results, strict=True):
        assert r.comparisons == n
        ref = r.extra["reference"]
        assert np.all(ref != np.arange(n))
        q = np.array([t.meta["quality"] for t in g.trajectories])
        np.testing.assert_array_equal(r.reward, np.where(q > q[ref], 1.0, -1.0))


# --- bad input: one clear error --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("rrc_scr", {"alpha": 0}, "alpha must be a finite number > 0"),
        ("rrc_scr", {"alpha": -0.1}, "alpha must be a finite number > 0"),
        ("rrc_agr", {"alpha": 0.0}, "alpha must be a finite number > 0"),
        ("rrc_scr", {"votes": 0}, "votes must be an integer >= 1"),
        ("rrc_agr", {"votes": 0}, "votes must be an integer >= 1"),
        ("reasoning_arena_live", {"gamma": 0.5}, "gamma .* must be in \\(0.5, 1\\]"),
        ("reasoning_arena_full", {"gamma": 1.5}, "gamma .* must be in \\(0.5, 1\\]"),
        ("reasoning_arena_live", {"l2": 0}, "l2 must be a finite number > 0"),
        ("rrc_agr", {"n_anchors": 0}, "n_anchors must be >= 1"),
        ("rrc_agr", {"reference": "gpt"}, "unknown reference policy 'gpt'; registered: simulated"),
        ("adaptive", {"tournament": "round_robn"}, "Did you mean 'round_robin'"),
        ("adaptive", {"verifier": "regex"}, "registered: exact_match"),
        ("adaptive", {"tournament_params": {"gamma": 2}}, "gamma"),
    ],
)
def test_bad_parameters_are_one_clear_error(name, params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        rewards.get(name, **params)


def test_anchor_pool_missing_a_prompt_is_one_clear_error(calibrated):
    groups = random_groups(4, k=2, seed=9)
    c = agr_with_pool(groups[:1])
    with pytest.raises(ValueError, match="anchor pool has no anchors for prompt 's9g1'"):
        calibrated.run(c, groups)


def test_fidelity_on_the_calibrated_judge_orders_the_families():
    rows = {
        r["constructor"]: r
        for r in run_fidelity(
            ["pointwise", "prc", "rrc_scr", "rrc_agr", "reasoning_arena_live", "reasoning_arena_full"],
            group_size=8,
            n_groups=200,
            progress=False,
        )
    }
    tau = {k: v["kendall_tau"] for k, v in rows.items()}
    assert tau["reasoning_arena_full"] > tau["reasoning_arena_live"] > tau["pointwise"]
    assert tau["rrc_scr"] > tau["rrc_agr"] > tau["pointwise"]
    assert rows["reasoning_arena_live"]["judge_calls_per_group"] == 36
