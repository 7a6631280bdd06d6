"""RRC: SCR, CARA, AGR (its anchor pool); bad parameters and fidelity across the pairwise families."""

import json

import numpy as np
import pytest
from conftest import make_group, random_groups, true_rank

from arenabench import Engine, judges, rewards
from arenabench.aggregation import is_swap_optimal, order_wins
from arenabench.fidelity import run_fidelity
from arenabench.rewards.reference import AnchorPool, SimulatedReference
from arenabench.sim import GROUP_SPREAD, simulate_groups
from arenabench.types import PairJudgment, Trajectory

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
    pooled = 0
    for r in res:
        W, order = r.extra["votes"], r.extra["kemeny_order"]
        assert is_swap_optimal(W, order)
        # the strict order's win counts 7 … 0, except that Kemeny neighbours no evidence separates
        # (equal votes both ways, equal Borda count) share their mean (issue 13)
        strict = order_wins(order)
        np.testing.assert_allclose(r.reward.sum(), 0.1 * 28)
        for a, b in zip(order, order[1:], strict=False):
            if W[a, b] == W[b, a] and W[a].sum() == W[b].sum():
                assert r.reward[a] == r.reward[b]
            else:
                assert r.reward[a] > r.reward[b]
        pooled += not np.allclose(r.reward, 0.1 * strict)
    assert 0 < pooled < len(res)  # index order decided some neighbours before issue 13


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
    assert SimulatedReference().spread == GROUP_SPREAD  # the simulator's step-0 policy


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


@pytest.mark.slow
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
