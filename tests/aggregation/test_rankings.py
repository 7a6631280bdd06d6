"""The aggregation rules (issue 18): each against a hand-worked example or a reference (choix for
Bradley-Terry, brute force for Kemeny), and as a constructor option."""

import itertools
import math

import numpy as np
import pytest
from conftest import random_groups, true_rank

from arenabench import Engine, judges, rewards
from arenabench.advantages import ranks_from_keys
from arenabench.aggregation import (
    AGGREGATIONS,
    aggregate,
    bradley_terry_choix,
    bradley_terry_scores,
    copeland,
    disagreement,
    elo,
    is_swap_optimal,
    kemeny,
    win_rate,
)
from arenabench.judges import ConstantJudge, FailingJudge

# 5 items, item 4 never compared. 0 v 1 three times (0 wins twice), 1 beats 2, 2 and 0 tie,
# 0 beats 3 (listed as 3 v 0 lost by 3).
FIRST = [0, 0, 0, 1, 2, 3]
SECOND = [1, 1, 1, 2, 0, 0]
OUTCOME = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0]


def test_win_rate_by_hand():
    # 0: 2 of 3 v 1, ½ v 2, 1 v 3 → 3.5/5; 1: 1/3 v 0 + 1 v 2 → 2/4; 2: 0 + ½ → ½/2; 3: 0/1
    np.testing.assert_allclose(win_rate(5, FIRST, SECOND, OUTCOME), [0.7, 0.5, 0.25, 0.0, np.nan])


def test_copeland_by_hand():
    # 0: beats 1 (majority 2-1), splits with 2, beats 3 → 2.5; 1: beats 2 → 1; 2: split → ½; 3: 0
    np.testing.assert_array_equal(copeland(5, FIRST, SECOND, OUTCOME), [2.5, 1.0, 0.5, 0.0, np.nan])


def test_elo_by_hand_and_its_order_matters():
    """K = 32, scale 400, ratings from 0. (0 beats 1): E = ½, R0 = 16, R1 = −16. (1 beats 2):
    E1 = 1/(1 + 10^(16/400)) = 0.476990, R1 = −16 + 32·0.523010 = 0.736307, R2 = −16.736307.
    (2 ties 0): E2 = 1/(1 + 10^(32.736307/400)) = 0.453028, R2 += 32·0.046972 = 1.503117,
    R0 −= 1.503117."""
    r = elo(3, [0, 1, 2], [1, 2, 0], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(r, [14.496883, 0.736307, -15.233190], atol=1e-5)
    assert r.sum() == pytest.approx(0.0, abs=1e-12)  # zero-sum updates
    swapped = elo(3, [2, 1, 0], [0, 2, 1], [0.5, 1.0, 1.0])  # the same games, the other way round
    assert not np.allclose(swapped, r)


@pytest.mark.parametrize("seed", range(4))
def test_bradley_terry_matches_choix(seed):
    rng = np.random.default_rng(seed)
    n, m = 7, 30
    i = rng.integers(n, size=m)
    j = (i + rng.integers(1, n, size=m)) % n
    o = (rng.random(m) < 1 / (1 + np.exp(-(i - j) / 3))).astype(float)  # hard outcomes
    ours = bradley_terry_scores(n, i, j, o)
    winners, losers = np.where(o == 1, i, j), np.where(o == 1, j, i)
    ref = bradley_terry_choix(n, winners, losers, l2=0.1)
    np.testing.assert_allclose(ours - ours.mean(), ref - ref.mean(), atol=1e-4)


def brute_force(W):
    n = len(W)
    return min(disagreement(W, np.array(p)) for p in itertools.permutations(range(n)))


@pytest.mark.parametrize("seed", range(6))
def test_kemeny_exact_is_the_brute_force_optimum_and_greedy_swap_optimal(seed):
    """Odd comparisons per pair (1 or 3), so no pair is split and nothing is pooled: the scores
    are the order's win counts n−1 … 0."""
    rng = np.random.default_rng(seed)
    n = 6
    i, j, o = [], [], []
    for a, b in itertools.combinations(range(n), 2):
        for _ in range(int(rng.choice([1, 3]))):
            i.append(a), j.append(b), o.append(float(rng.random() < 0.5 + 0.08 * (b - a)))
    W = np.zeros((n, n))
    np.add.at(W, (i, j), o)
    np.add.at(W, (j, i), 1 - np.array(o))
    for exact in (True, False):
        score = kemeny(n, i, j, o, exact=exact)
        assert sorted(score) == list(range(n))
        order = np.argsort(-score)
        if exact:
            assert disagreement(W, order) == brute_force(W)
        else:
            assert is_swap_optimal(W, order) and disagreement(W, order) >= brute_force(W)


def test_complete_graph_one_vote_win_rate_copeland_bt_agree():
    """A round-robin with one verdict per pair: the three rules give the same ranks, ties
    included (Bradley-Terry strengths of equal win counts are snapped to one value)."""
    rng = np.random.default_rng(3)
    n = 7
    i, j = np.triu_indices(n, 1)
    for _ in range(20):
        o = rng.choice([0.0, 0.5, 1.0], size=len(i))
        ranks = [
            ranks_from_keys(aggregate(name, n, i, j, o)) for name in ("win_rate", "copeland", "bradley_terry")
        ]
        np.testing.assert_array_equal(ranks[0], ranks[1])
        np.testing.assert_array_equal(ranks[0], ranks[2])


def test_all_ties_score_everyone_alike_and_bad_input_is_an_error():
    i, j = np.triu_indices(5, 1)
    for name in AGGREGATIONS:
        s = aggregate(name, 5, i, j, np.full(len(i), 0.5))
        assert np.ptp(s) == 0, name
    with pytest.raises(ValueError, match="aggregation must be one of win_rate, copeland, elo"):
        aggregate("borda", 3, [0], [1], [1.0])
    with pytest.raises(ValueError, match="outcomes must be 1"):
        win_rate(3, [0], [1], [0.7])
    with pytest.raises(ValueError, match="two different items"):
        copeland(3, [0], [0], [1.0])


@pytest.mark.parametrize("name", [a for a in AGGREGATIONS if a != "win_rate"])
@pytest.mark.parametrize("topology", ["round_robin", "swiss"])
def test_constructor_option(topology, name):
    """As a constructor option: exact with a noiseless judge on a round-robin (every rule);
    a tying judge gives zero advantage and a failing one leaves everyone unranked."""
    groups = random_groups(8, k=4, seed=1)
    c = rewards.from_spec(f"{topology}:aggregation={name}")
    if topology == "round_robin":
        for r, g in zip(Engine(judges.get("noiseless")).run(c, groups).results, groups, strict=True):
            np.testing.assert_array_equal(r.rank, true_rank(g))
    tied = Engine(ConstantJudge()).run(c, groups).results
    assert all(not np.any(r.advantage) for r in tied)
    failed = Engine(FailingJudge(), max_retries=0).run(c, groups).results
    assert all(np.isnan(r.rank).all() and not np.any(r.advantage) for r in failed)


def test_snap_joins_only_near_values():
    from arenabench.aggregation.rankings import snap

    x = np.array([1.0, 1.0 + 3e-8, 2.0, np.nan, 2.0 + 5e-8, 2.0 + 2e-7, 0.5])
    got = snap(x)
    assert got[0] == got[1] == 1.0 + 1.5e-8 and got[2] == got[4] and got[5] != got[4]
    assert np.isnan(got[3]) and got[6] == 0.5


def test_bad_aggregation_names_the_choices():
    with pytest.raises(ValueError, match="round_robin: aggregation must be one of win_rate, copeland"):
        rewards.get("round_robin", aggregation="borda")
    with pytest.raises(ValueError, match="kemeny_exact is exponential"):
        Engine(judges.get("noiseless")).run(
            rewards.get("round_robin", aggregation="kemeny_exact"), random_groups(13, k=1)
        )
    assert math.isnan(win_rate(2, [], [], [])[0])
