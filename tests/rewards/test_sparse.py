"""Sparse BT constructors (bt_bracket, adaptive_pairs): exact counts and waves, exact orders where
the math gives them under a noiseless judge, failures and judges without probabilities."""

import math

import numpy as np
import pytest
from conftest import make_group, random_groups, true_rank

from arenabench import Engine, judges, rewards
from arenabench.rewards.sparse import closest_pairs
from arenabench.types import JudgeFailure, PairJudgment

SIZES = [2, 3, 5, 8, 16]


@pytest.mark.slow
@pytest.mark.parametrize("votes", [1, 3])
@pytest.mark.parametrize("n", SIZES)
def test_exact_comparison_call_and_wave_counts(n, votes, calibrated):
    groups = random_groups(n, k=4, seed=n)
    out = calibrated.run(rewards.get("bt_bracket", votes=votes), groups)
    for r in out.results:
        assert r.comparisons == 2 * n - 2  # seeding N−1 + bracket N−1
        assert r.judge_calls == 2 * r.comparisons * votes
        assert r.waves == 1 + math.ceil(math.log2(n))
    assert out.stats.judge_batches == out.stats.waves  # one batch per wave for all groups
    out = calibrated.run(rewards.get("adaptive_pairs", votes=votes), groups)
    for r in out.results:
        assert r.comparisons == min(2 * n - 2, n * (n - 1) // 2)
        assert r.judge_calls == 2 * r.comparisons * votes
    assert out.stats.judge_batches == out.stats.waves


@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 8, 9, 16])
def test_adaptive_pairs_waves_are_one_plus_rounds_and_it_honours_its_budget(n, calibrated):
    groups = random_groups(n, k=3, seed=1)
    for rounds in (1, 2, 3):
        out = calibrated.run(rewards.get("adaptive_pairs", rounds=rounds), groups)
        assert all(r.waves == 1 + rounds for r in out.results)
    for budget in (1, n + 3, 2 * n, 10**6):
        for r in calibrated.run(rewards.get("adaptive_pairs", budget=budget), groups).results:
            assert r.comparisons == min(budget, n * (n - 1) // 2)
            assert r.waves <= 3


def test_closest_pairs_are_unplayed_nearest_and_capped_per_trajectory():
    est = np.array([0.0, 0.1, 0.35, 1.0, 1.05, np.nan])
    assert closest_pairs(est, set(), 3) == [(3, 4), (0, 1), (2, 5)]  # no estimate: paired last
    assert closest_pairs(est, {frozenset((3, 4))}, 2) == [(0, 1), (2, 3)]
    # cap 1 gives 3 disjoint pairs; the 4th comes once the cap rises to 2: the next-closest pair
    assert closest_pairs(est, set(), 4) == [(3, 4), (0, 1), (2, 5), (1, 2)]
    everything = {frozenset((i, j)) for i in range(6) for j in range(i + 1, 6)}
    assert closest_pairs(est, everything, 3) == []
    assert len(closest_pairs(est, set(), 100)) == 15


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bt_bracket", "adaptive_pairs"])
def test_noiseless_exact_order_where_the_evidence_determines_it(name, noiseless):
    """Noiseless: a side's score depends on its own quality only (``score`` ranks exactly), and
    P(i better) = sigmoid(11·Δq) is an exact Bradley-Terry model (``prob`` with a vanishing L2
    recovers θ = 11q on a connected graph — both graphs contain the anchor's star)."""
    for n in range(2, 18):
        groups = random_groups(n, k=3, seed=n)
        for params in ({"outcome": "score"}, {"outcome": "prob", "l2": 1e-6}):
            for g, r in zip(groups, noiseless.run(rewards.get(name, **params), groups).results, strict=True):
                np.testing.assert_array_equal(r.rank, true_rank(g), err_msg=f"{name} {params} N={n}")
                assert r.reward[int(np.argmax(true_rank(g) == 0))] == 1.0


def test_bt_bracket_champion_is_the_true_best_under_a_noiseless_judge(noiseless):
    for n in (2, 3, 7, 8, 13, 16):
        groups = random_groups(n, k=4, seed=3 * n)
        for g, r in zip(groups, noiseless.run(rewards.get("bt_bracket"), groups).results, strict=True):
            assert r.extra["champion"] == int(np.argmin(true_rank(g)))


class _Judge:
    """The noiseless judge, with P(A) removed or every reply failed."""

    def __init__(self, mode: str):
        self.inner, self.mode = judges.get("noiseless"), mode

    def judge_pairs(self, requests):
        if self.mode == "fail":
            return [JudgeFailure("down") for _ in requests]
        return [PairJudgment(x.score_a, x.score_b) for x in self.inner.judge_pairs(requests)]


@pytest.mark.parametrize("name", ["bt_bracket", "adaptive_pairs"])
def test_failed_judge_leaves_everyone_unranked_and_flags(name):
    g = make_group([3.0, 2.0, 1.0, 0.0], anchor=0)
    r = Engine(_Judge("fail"), max_retries=0).run(rewards.get(name), [g]).results[0]
    np.testing.assert_array_equal(r.advantage, 0.0)
    assert np.isnan(r.rank).all()
    assert any(f.startswith("failed_matches:") for f in r.flags)
    assert any(f.startswith("judge_failures:") for f in r.flags)


@pytest.mark.parametrize("name", ["bt_bracket", "adaptive_pairs"])
def test_a_judge_without_probabilities_falls_back_to_verdicts_flagged(name):
    g = make_group([3.0, 2.0, 1.0, 0.0, -1.0], anchor=2)
    r = Engine(_Judge("no_prob")).run(rewards.get(name), [g]).results[0]
    assert any(f.startswith("verdict_fallback:") for f in r.flags)
    assert r.rank[0] == 0  # wins all its matches: highest strength
    verdict = Engine(judges.get("noiseless")).run(rewards.get(name, outcome="verdict"), [g]).results[0]
    np.testing.assert_allclose(r.reward, verdict.reward)


@pytest.mark.parametrize(
    "params",
    [{"outcome": "elo"}, {"gamma": 0.5}, {"l2": 0.0}, {"l2": math.inf}],
)
def test_bad_parameters_raise(params):
    with pytest.raises(ValueError):
        rewards.get("bt_bracket", **params)


@pytest.mark.parametrize("params", [{"budget": 0}, {"budget": -1}, {"budget": 2.5}, {"rounds": 0}])
def test_bad_budget_or_rounds_raise(params):
    with pytest.raises(ValueError, match=next(iter(params))):
        rewards.get("adaptive_pairs", **params)
