"""The simulated listwise judge (``rank_lists``, issue 41 item 3): a Plackett–Luce ranking over the
judge's views with per-call Gumbel noise and a primacy bias that grow with k. Exact values where
the model fixes them (no noise: ties), and its statistical properties with fixed seeds: each
tolerance is stated next to its check (about 4 standard errors of the share it bounds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_group

from arenabench import judges
from arenabench.judges.ordinal import OrdinalJudge
from arenabench.judges.simulated import SimulatedJudge
from arenabench.judges.stack import cache_identity
from arenabench.types import PairRequest, RankJudgment, RankRequest

DRAWS = 4000  # samples per share below: a share's standard error is at most 0.008


def lists(qualities, draws=DRAWS, prompt="p"):
    """``draws`` samples of one list of items with these qualities, shown in this order."""
    g = make_group(qualities, prompt=prompt)
    return [RankRequest(g.prompt, g.trajectories, s) for s in range(draws)]


def top_share(judge, reqs, slot):
    scores = np.array([r.scores for r in judge.rank_lists(reqs)])
    return float(np.mean(scores[:, slot] == scores.shape[1] - 1))


def above_share(judge, reqs, a, b):
    scores = np.array([r.scores for r in judge.rank_lists(reqs)])
    return float(np.mean(scores[:, a] > scores[:, b]))


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def test_the_reply_is_items_ranked_below_and_noiseless_ties_share():
    judge = judges.get("noiseless")
    (a,) = judge.rank_lists(lists([0.5, 1.0, 1.0, 2.0], draws=1))
    assert a == RankJudgment((0.0, 1.5, 1.5, 3.0))
    assert all(type(x) is float for x in a.scores)
    (b,) = judge.rank_lists(lists([1.0, 0.0], draws=1))
    assert b == RankJudgment((1.0, 0.0))


def test_answers_are_a_function_of_seed_request_and_sample():
    judge = judges.get("calibrated")
    reqs = lists([1.7, 1.72, 1.69, 1.71, 1.7], draws=200)
    first = judge.rank_lists(reqs)
    alone = [judge.rank_lists([r])[0] for r in reqs[:20]]
    assert first[:20] == alone  # not a function of the batch
    retried = judge.rank_lists([RankRequest(r.prompt, r.trajs, r.sample, attempt=2) for r in reqs])
    assert retried == first  # the attempt is not an input
    assert len(set(first)) > 20  # a new sample is a new draw
    assert judges.get("calibrated", seed=1).rank_lists(reqs) != first
    mixed = judge.rank_lists([reqs[0], *lists([1.0, 2.0], draws=1), reqs[1]])
    assert [mixed[0], mixed[2]] == first[:2]  # lists of other lengths in the same batch


def test_position_bias_raises_slot_one_win_share_as_plackett_luce_says():
    """Four equal items: without a bias each slot wins 1/4; a primacy bias b_k over Gumbel scale
    s_k gives slot m the weight exp(b_k·(3 − m)/3 / s_k). Tolerance 0.03 (≥ 4 SE)."""
    reqs = lists([1.7] * 4)
    flat = SimulatedJudge("calibrated", listwise_position_bias=0.0)
    assert abs(top_share(flat, reqs, 0) - 0.25) < 0.03
    biased = SimulatedJudge("calibrated", listwise_position_bias=0.1)
    model = biased.listwise
    w = np.exp(model.slot_bias(4) / model.scale(4))
    want = float(w[0] / w.sum())
    assert want > 0.4
    assert abs(top_share(biased, reqs, 0) - want) < 0.03
    assert top_share(biased, reqs, 0) > top_share(flat, reqs, 0) + 0.1
    # the bias grows with k: slot 1's weight over the last slot's
    assert model.slot_bias(8)[0] > model.slot_bias(4)[0] > model.slot_bias(2)[0] == 0.1


def test_noise_grows_with_k():
    """Two items 0.1 apart among far worse fillers: under Plackett–Luce their relative order is
    logistic in the gap over the Gumbel scale, sigmoid(0.1 / s_k), and s_k grows with k.
    Tolerance 0.03 (≥ 4 SE); the k = 2 and k = 8 shares differ by ~0.09."""
    judge = SimulatedJudge("calibrated", listwise_position_bias=0.0)
    s2, s8 = judge.listwise.scale(2), judge.listwise.scale(8)
    assert s8 == pytest.approx(1.6 * s2)
    two = above_share(judge, lists([1.8, 1.7]), 0, 1)
    eight = above_share(judge, lists([1.8, 1.7] + [-3.0] * 6), 0, 1)
    assert abs(two - sigmoid(0.1 / s2)) < 0.03
    assert abs(eight - sigmoid(0.1 / s8)) < 0.03
    assert two > eight + 0.05


@pytest.mark.parametrize("preset", ["calibrated", "bradley_terry", "position_gap"])
def test_a_list_of_two_agrees_with_the_pair_judge(preset):
    """On a large gap both formats prefer the better item in every draw (in both slots); on a
    small gap the list of two is as noisy as a pair (the defaults match the pair's comparison
    noise): the two win shares within 0.04 (the Thurstone/logistic shapes differ by < 0.01)."""
    judge = judges.get(preset)
    g = make_group([2.5, 1.5])
    better, worse = g.trajectories
    for a, b, top in ((better, worse, 0), (worse, better, 1)):
        ranks = judge.rank_lists([RankRequest(g.prompt, (a, b), s) for s in range(500)])
        pairs = judge.judge_pairs([PairRequest(g.prompt, a, b, s) for s in range(500)])
        assert all(r.scores[top] == 1.0 for r in ranks)
        assert all((p.score_a > p.score_b) == (top == 0) for p in pairs)
    near = make_group([1.75, 1.7])
    x, y = near.trajectories
    ranks = judge.rank_lists([RankRequest(near.prompt, (x, y), s) for s in range(DRAWS)])
    pairs = judge.judge_pairs([PairRequest(near.prompt, x, y, s) for s in range(DRAWS)])
    list_share = np.mean([r.scores[0] == 1.0 for r in ranks])
    pair_share = np.mean([p.score_a > p.score_b for p in pairs])
    if preset != "position_gap":  # its pair bias depends on the gap; the list's does not
        assert abs(list_share - pair_share) < 0.04
    assert list_share > 0.5


def test_the_fitted_judge_ranks_on_its_views_and_rejudges_in_its_share():
    base = judges.get("gpt4_llmbar")
    assert isinstance(base, OrdinalJudge)
    assert base.listwise.noise == pytest.approx(base.pair_noise * math.sqrt(3) / math.pi)
    assert base.listwise.position_bias == base.position_bias
    g = make_group([0.0, 0.1, -0.1, 0.05], prompt="q")
    reqs = [RankRequest(g.prompt, g.trajectories, s) for s in range(300)]
    fixed = OrdinalJudge(pair_noise=0.5, rejudge_share=0.0).rank_lists(reqs)
    assert len(set(fixed)) == 1  # a temperature-0 judge: the same list, the same ranking
    fresh = OrdinalJudge(pair_noise=0.5, rejudge_share=1.0).rank_lists(reqs)
    assert len(set(fresh)) > 10
    far = make_group([3.0, -3.0], prompt="q")
    for judge in (base, OrdinalJudge(pair_noise=0.5, rejudge_share=1.0)):
        out = judge.rank_lists([RankRequest(far.prompt, far.trajectories[::-1], s) for s in range(200)])
        assert all(r.scores == (0.0, 1.0) for r in out)


def test_listwise_options_are_checked():
    with pytest.raises(ValueError, match="listwise_noise_growth must be a finite number >= 0"):
        SimulatedJudge("calibrated", listwise_noise_growth=-0.1)
    with pytest.raises(ValueError, match="listwise_noise must be a finite number >= 0"):
        SimulatedJudge("calibrated", listwise_noise=math.inf)
    with pytest.raises(ValueError, match="listwise_position_bias must be finite"):
        OrdinalJudge(listwise_position_bias=math.nan)
    assert SimulatedJudge("noiseless").listwise.scale(8) == 0.0
    assert SimulatedJudge("bradley_terry").listwise.noise == 0.1  # its pair noise: the same logistic


def test_listwise_options_enter_a_judges_cache_identity():
    """A simulated judge's identity is its whole config; the fitted judge's is its repr, which
    names the listwise options only when set (so its pairwise cache keys are unchanged)."""
    assert "listwise" not in repr(OrdinalJudge())
    assert "listwise=ListwiseModel(noise=0.3," in repr(OrdinalJudge(listwise_noise=0.3))
    assert "listwise_noise_growth" in cache_identity(SimulatedJudge("calibrated"))[0]


def test_the_vectorized_points_equal_the_one_convention():
    """``simulated.ranked_below`` (the simulated judges' batch form) gives exactly what
    ``RankJudgment.from_order`` (the LLM parser's) gives for the same order, ties included."""
    from arenabench.judges.simulated import ranked_below

    rng = np.random.default_rng(0)
    u = rng.integers(0, 4, size=(200, 6)).astype(float)  # many ties
    for row, got in zip(u, ranked_below(u), strict=True):
        tiers = [[p for p in range(6) if row[p] == v] for v in sorted(set(row.tolist()), reverse=True)]
        assert tuple(got.tolist()) == RankJudgment.from_order(tiers, 6).scores
