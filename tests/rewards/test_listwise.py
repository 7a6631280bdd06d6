"""The listwise constructors (issue 41, item 3): ``listwise`` (RULER) and ``kwise_knockout``
(Tournament-GRPO), played by ``helpers.drive_play`` against a noiseless ranking judge: exact
orders, exact calls and waves, and the failure and tie rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_group, random_groups, true_rank
from helpers import drive_play

from arenabench import rewards
from arenabench.rewards.kwise_knockout import round_matches
from arenabench.types import RankJudgment


def quality(group):
    return [t.meta["quality"] for t in group.trajectories]


def noiseless(group):
    """A ranking judge that orders the shown items by true quality, equal qualities tied."""
    q = quality(group)

    def answer(ask):
        tiers: dict[float, list[int]] = {}
        for pos, i in enumerate(ask.items):
            tiers.setdefault(q[i], []).append(pos)
        return RankJudgment.from_order([tiers[v] for v in sorted(tiers, reverse=True)], len(ask.items))

    return answer


def test_order_points_convention():
    """The one order → scores rule: items ranked below, ties sharing their positions' points."""
    assert RankJudgment.from_order([[2], [0, 1], [3]], 4).scores == (1.5, 1.5, 3.0, 0.0)
    assert RankJudgment.from_order([[0, 1, 2]], 3).scores == (1.0, 1.0, 1.0)
    for bad in ([[0], [0]], [[0], [2]], [[0]]):
        with pytest.raises(ValueError, match="cover"):
            RankJudgment.from_order(bad, 2)


# --- listwise -----------------------------------------------------------------------------------


@pytest.mark.parametrize("calls", [1, 3])
@pytest.mark.parametrize("votes", [1, 2])
def test_listwise_recovers_the_true_order_in_one_wave_of_m_calls(calls, votes):
    cons = rewards.get("listwise", calls=calls, votes=votes)
    for n in (2, 3, 8, 16):
        for g in random_groups(n, k=3, seed=n):
            r, waves = drive_play(cons, g, noiseless(g), seed=n)
            np.testing.assert_array_equal(r.rank, true_rank(g))
            assert len(waves) == r.waves == 1 and len(waves[0]) == calls
            assert r.judge_calls == calls * votes and not r.flags
            assert all(sorted(a.items) == list(range(n)) for a in waves[0])  # the whole group each
            # each call asks its own samples: a list shown twice in one order is never merged
            assert [a.sample for a in waves[0]] == [c * votes for c in range(calls)]
            # rank reward 1 − rank/(N − 1), standardized
            np.testing.assert_allclose(r.reward, 1 - true_rank(g) / (n - 1))


def test_listwise_shows_random_orders_deterministic_per_seed():
    g = random_groups(8, seed=1)[0]
    cons = rewards.get("listwise", calls=4)
    a = [ask.items for ask in drive_play(cons, g, noiseless(g), seed=5)[1][0]]
    assert a == [ask.items for ask in drive_play(cons, g, noiseless(g), seed=5)[1][0]]
    assert len(set(a)) == 4 and a != [ask.items for ask in drive_play(cons, g, noiseless(g), seed=6)[1][0]]


def test_listwise_averages_mean_points_and_ties_share():
    """Two calls that disagree on items 0 and 1: each gets the mean of its points, and equal
    means share their rank (exact values)."""
    g = make_group([1.0, 1.0, 0.0], prompt="avg")
    replies = iter([{0: 2.0, 1: 1.0, 2: 0.0}, {0: 1.0, 1: 2.0, 2: 0.0}])

    def answer(ask):
        points = next(replies)
        return RankJudgment(tuple(points[i] for i in ask.items))

    r, _ = drive_play(rewards.get("listwise", calls=2), g, answer)
    np.testing.assert_array_equal(r.extra["score"], [1.5, 1.5, 0.0])
    np.testing.assert_array_equal(r.rank, [0.5, 0.5, 2.0])


def test_listwise_failed_rankings_are_left_out_and_flagged_all_failed_is_unranked():
    g = random_groups(6, seed=2)[0]
    calls = iter([True, False, False])  # the first of three rankings fails
    answer = noiseless(g)
    r, _ = drive_play(rewards.get("listwise", calls=3), g, lambda a: None if next(calls) else answer(a))
    np.testing.assert_array_equal(r.rank, true_rank(g))
    assert r.flags == ["failed_matches:1", "judge_failures:1"] and r.failures == 1
    r, _ = drive_play(rewards.get("listwise", calls=2), g, lambda a: None)
    assert np.isnan(r.rank).all() and not r.advantage.any()
    assert r.flags == ["failed_matches:2", "unranked:6", "zero_advantage", "judge_failures:2"]


def test_listwise_all_tied_gives_zero_advantage():
    g = random_groups(5, seed=3)[0]
    r, _ = drive_play(rewards.get("listwise"), g, lambda a: RankJudgment.from_order([range(5)], 5))
    assert (r.rank == 2.0).all() and not r.advantage.any()


# --- kwise_knockout -------------------------------------------------------------------------------


def test_round_matches_byes_and_leftover_matches():
    assert round_matches(list(range(8)), 4, 1) == ([[0, 1, 2, 3], [4, 5, 6, 7]], [])
    assert round_matches(list(range(9)), 4, 1) == ([[0, 1, 2, 3], [4, 5, 6, 7]], [8])  # a bye
    assert round_matches(list(range(10)), 4, 1) == ([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], [])
    assert round_matches(list(range(10)), 4, 2) == ([[0, 1, 2, 3], [4, 5, 6, 7]], [8, 9])
    assert round_matches([3, 1, 2], 4, 1) == ([[3, 1, 2]], [])  # the final: everyone left


@pytest.mark.parametrize("seed", range(5))
def test_knockout_n8_k4_champion_rounds_and_ranks_by_hand(seed):
    """N = 8, k = 4: two first-round matches of 4 (the seeded order's halves), then a final of
    their two winners: 2 + 1 = 3 calls in 2 waves; ranks 0 (champion), 1 (finalist), and the six
    first-round losers in pairs by their place in their match: 2.5, 4.5, 6.5."""
    q = [0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8, 0.4]
    g = make_group(q, prompt="k4")
    r, waves = drive_play(rewards.get("kwise_knockout", k=4), g, noiseless(g), seed=seed)
    assert [len(w) for w in waves] == [2, 1] and r.judge_calls == 3 and r.waves == 2
    s = r.extra["seeds"]
    halves = [s[:4], s[4:]]
    assert [list(a.items) for a in waves[0]] == halves
    winners = [max(h, key=lambda i: q[i]) for h in halves]
    assert sorted(waves[1][0].items) == sorted(winners)
    assert int(np.argmin(r.rank)) == 1  # the true best is champion
    want_round = np.ones(8)
    want_round[winners] = 2
    want_round[1] = 3
    np.testing.assert_array_equal(r.extra["round"], want_round)
    want = np.empty(8)
    want[1], want[min(winners, key=lambda i: q[i])] = 0.0, 1.0
    for h in halves:  # second, third, last in the match
        for place, i in enumerate(sorted(h, key=lambda i: -q[i])[1:]):
            want[i] = [2.5, 4.5, 6.5][place]
    np.testing.assert_array_equal(r.rank, want)
    assert not r.flags


def test_knockout_n8_k2_is_a_bracket_of_three_rounds():
    """k = 2: 4 + 2 + 1 = 7 calls in 3 waves; the champion is the true best, the finalist 1, the
    two semi-final losers share 2.5 and the four first-round losers 5.5 (each last in its match)."""
    q = [0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8, 0.4]
    g = make_group(q, prompt="k2")
    r, waves = drive_play(rewards.get("kwise_knockout", k=2), g, noiseless(g), seed=1)
    assert [len(w) for w in waves] == [4, 2, 1] and r.judge_calls == 7 and r.waves == 3
    assert sorted(r.rank.tolist()) == [0.0, 1.0, 2.5, 2.5, 5.5, 5.5, 5.5, 5.5]
    assert r.rank[1] == 0.0 and r.extra["round"][1] == 4
    assert sorted(r.extra["round"].tolist()) == [1, 1, 1, 1, 2, 2, 3, 4]


@pytest.mark.parametrize(("n", "k", "advance", "calls", "waves"), [
    (9, 4, 1, 2 + 1, 2),  # a bye in round 1, then a final of 3
    (10, 4, 1, 3 + 1, 2),  # a leftover match of 2
    (16, 4, 1, 4 + 1, 2),
    (16, 4, 2, 4 + 2 + 1, 3),  # 8 advance, then 4, then a final of 4
    (5, 2, 1, 2 + 1 + 1, 3),
    (2, 4, 1, 1, 1),
])  # fmt: skip
def test_knockout_costs_and_the_true_best_wins(n, k, advance, calls, waves):
    cons = rewards.get("kwise_knockout", k=k, advance=advance)
    for g in random_groups(n, k=4, seed=n + k):
        r, played = drive_play(cons, g, noiseless(g), seed=n)
        assert r.judge_calls == calls and r.waves == waves, [[a.items for a in w] for w in played]
        assert r.rank[int(np.argmax(quality(g)))] == 0.0 and np.count_nonzero(r.rank == 0) == 1
        assert math.isclose(r.advantage.sum(), 0.0, abs_tol=1e-9) and not r.flags


def test_knockout_failed_and_tied_matches_go_by_coin_and_share_ranks():
    g = random_groups(8, seed=4)[0]
    # every call fails, or every call ties: nothing to rank on, zero advantage
    r, _ = drive_play(rewards.get("kwise_knockout"), g, lambda a: None)
    assert not r.advantage.any() and r.flags[0] == "failed_matches:3" and r.judge_calls == 3
    r, _ = drive_play(
        rewards.get("kwise_knockout"),
        g,
        lambda a: RankJudgment.from_order([range(len(a.items))], len(a.items)),
    )
    assert not r.advantage.any() and r.flags[0] == "tied_match:3"
    # one failed first-round match: its winner is a coin's, its four players share a pool with the
    # winner's later opponents; the other match still decides who is ranked below whom
    answer, first = noiseless(g), []

    def one_fails(ask):
        first.append(ask.items)
        return None if len(first) == 1 else answer(ask)

    r, _ = drive_play(rewards.get("kwise_knockout"), g, one_fails, seed=2)
    assert r.flags == ["failed_matches:1", "judge_failures:1"] and r.failures == 1
    assert np.isnan(r.extra["within"][list(first[0])]).sum() == 3  # the failed match's losers
    pooled = {float(r.rank[i]) for i in first[0]}
    assert len(pooled) == 1  # joined by the coin: one shared rank


@pytest.mark.parametrize("bad", [{"k": 1}, {"k": 4, "advance": 4}, {"advance": 0}, {"k": True}])
def test_knockout_rejects_bad_parameters(bad):
    with pytest.raises(ValueError):
        rewards.get("kwise_knockout", **bad)


def test_listwise_rejects_bad_calls():
    with pytest.raises(ValueError):
        rewards.get("listwise", calls=0)


@pytest.mark.parametrize(
    "spec", ["listwise", "listwise:calls=3", "kwise_knockout", "kwise_knockout:k=3:advance=2"]
)
def test_no_evidence_no_advantage_and_hostile_replies_at_every_size(spec):
    """What the engine-driven checks over every registered name will ask (tests/rewards/test_ties.py,
    tests/fuzz): a judge that fails or ties every call gives zero advantage at every N; random
    replies with ties and failures never crash and give finite, zero-mean advantages."""
    cons = rewards.from_spec(spec)
    tie = lambda a: RankJudgment.from_order([range(len(a.items))], len(a.items))  # noqa: E731
    for n in (2, 3, 5, 7, 8, 9, 16, 17):
        g = random_groups(n, seed=n)[0]
        for answer in (lambda a: None, tie):
            r, _ = drive_play(cons, g, answer, seed=n)
            assert not r.advantage.any() and np.isfinite(r.reward).all(), (n, r.flags)
        rng = np.random.default_rng(n)

        def hostile(ask, rng=rng):
            if rng.random() < 0.2:
                return None
            return RankJudgment(tuple(float(x) for x in rng.integers(0, 3, len(ask.items))))

        for seed in range(20):
            r, _ = drive_play(cons, g, hostile, seed=seed)
            assert np.isfinite(r.advantage).all() and abs(r.advantage.sum()) < 1e-9
