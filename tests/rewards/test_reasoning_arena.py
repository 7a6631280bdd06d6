"""Reasoning Arena: the live tournament's schedule and Bradley-Terry rewards (live, full)."""

import numpy as np
import pytest
from conftest import random_groups, true_rank

from arenabench import rewards
from arenabench.types import MatchResult


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_live_strength_ties_go_by_arrival():
    """Traces 1, 2, 3 are equally good and beat 0: their strengths are equal in theory, so the
    standing is 1, 2, 3, 0 by arrival (not by the optimizer's round-off), and trace 4 plays the
    best (1), the worst (0) and the median (standing[2] = 3)."""
    from arenabench.types import Group, Trajectory

    q = [0.0, 1.0, 1.0, 1.0, 0.5]
    group = Group("p", tuple(Trajectory(f"t{k}", f"text {k}", meta={"quality": v}) for k, v in enumerate(q)))
    gen = rewards.get("reasoning_arena_live").play(group, np.random.default_rng(0))
    asks, opponents = next(gen), []
    while True:
        opponents.append([m.j for m in asks])
        results = []
        for m in asks:  # a perfect judge: the better side wins, equals tie
            s = (
                float(q[m.i] > q[m.j]) + 0.5 * (q[m.i] == q[m.j]),
                float(q[m.j] > q[m.i]) + 0.5 * (q[m.i] == q[m.j]),
            )
            results.append(MatchResult(m.i, m.j, 2 * s[0], 2 * s[1], samples=[s, s]))
        try:
            asks = gen.send(results)
        except StopIteration:
            break
    assert opponents == [[0], [1, 0], [1, 0, 2], [1, 0, 3]]


def test_live_standing_treats_round_off_as_a_tie():
    from arenabench.rewards.reasoning_arena import by_strength

    theta = np.array([0.0, 1.0, 1.0 + 1e-12, 1.0 - 1e-12, -0.5, 9.0])  # 5 has not arrived yet
    assert by_strength(theta, 5) == [1, 2, 3, 0, 4]
    assert by_strength(np.array([0.0, 1e-6, 2e-6]), 3) == [2, 1, 0]  # real gaps still order
