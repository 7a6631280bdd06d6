import itertools

import numpy as np
import pytest
from scipy.stats import spearmanr

from arenabench.aggregation import (
    bradley_terry,
    bradley_terry_choix,
    disagreement,
    is_swap_optimal,
    kemeny_exact,
    kemeny_greedy,
    minmax,
    order_wins,
    soft_outcome,
)


def random_w(rng, n, kind="uniform"):
    # "votes": small integers, so many exactly tied costs
    W = rng.uniform(0, 1, (n, n)) if kind == "uniform" else rng.integers(0, 4, (n, n)).astype(float)
    np.fill_diagonal(W, 0)
    return W


def random_ws(seed, n, count):
    """``count`` random n×n weight matrices from one seed, alternating "votes" and "uniform"."""
    rng = np.random.default_rng(seed)
    for t in range(count):
        yield random_w(rng, n, "uniform" if t % 2 else "votes")


def brute_force(W):
    """Least disagreement over all n! orders, vectorized: Σ over positions p < q of W[P[q], P[p]]."""
    n = len(W)
    P = np.array(list(itertools.permutations(range(n))))
    p, q = np.triu_indices(n, 1)
    return float(W[P[:, q], P[:, p]].sum(1).min())


def consistent_w(rng, n):
    """W that agrees with a hidden order everywhere (W[a, b] > 0, W[b, a] = 0 for a above b)."""
    order = rng.permutation(n)
    W = np.zeros((n, n))
    for p, q in itertools.combinations(range(n), 2):
        W[order[p], order[q]] = rng.uniform(0.1, 2.0)
    return W, order


# ----- helpers -----


def test_disagreement_and_wins_by_hand():
    W = np.array([[0, 3, 0], [0, 0, 2], [1, 0, 0]], float)
    assert disagreement(W, np.array([0, 1, 2])) == 1.0
    assert disagreement(W, np.array([2, 1, 0])) == 5.0
    assert is_swap_optimal(W, np.array([0, 1, 2]))
    assert not is_swap_optimal(W, np.array([1, 0, 2]))
    np.testing.assert_array_equal(order_wins(np.array([2, 0, 1])), [1.0, 0.0, 2.0])


@pytest.mark.parametrize(
    "W",
    [
        np.array([[0, -1], [1, 0]], float),
        np.ones((2, 3)),
        np.array([[0, np.nan], [1, 0]]),
        np.array([[0, np.inf], [1, 0]]),
        np.ones(3),
    ],
)
def test_bad_weights_raise(W):
    for f in (kemeny_exact, kemeny_greedy):
        with pytest.raises(ValueError):
            f(W)


def test_bad_order_raises():
    with pytest.raises(ValueError):
        disagreement(np.zeros((3, 3)), np.array([0, 0, 1]))


# ----- kemeny_exact -----


@pytest.mark.parametrize("n", range(1, 8))
def test_exact_matches_brute_force(n):
    for W in random_ws(100 + n, n, 60):
        order, cost = kemeny_exact(W)
        assert sorted(order.tolist()) == list(range(n))
        assert cost == pytest.approx(disagreement(W, order), abs=1e-12)
        assert cost == pytest.approx(brute_force(W), abs=1e-9)


def test_exact_small_and_ties():
    assert kemeny_exact(np.zeros((0, 0)))[0].shape == (0,)
    assert kemeny_exact(np.zeros((0, 0)))[1] == 0.0
    np.testing.assert_array_equal(kemeny_exact(np.zeros((1, 1)))[0], [0])
    # all-tied evidence: the lexicographically smallest optimal order
    np.testing.assert_array_equal(kemeny_exact(np.ones((5, 5)))[0], np.arange(5))


def test_exact_limit_and_n12():
    with pytest.raises(ValueError, match="n <= 12"):
        kemeny_exact(np.zeros((13, 13)))
    W = random_w(np.random.default_rng(0), 12)
    order, cost = kemeny_exact(W)  # speed is benchmarked in experiments/kemeny_gap.py
    assert is_swap_optimal(W, order)  # a global optimum is also a local one
    assert cost <= kemeny_greedy(W)[1] and cost == pytest.approx(disagreement(W, order))


# ----- kemeny_greedy -----


@pytest.mark.parametrize("n", [2, 5, 9, 16])
def test_greedy_recovers_consistent_order(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        W, order = consistent_w(rng, n)
        got, cost = kemeny_greedy(W)
        np.testing.assert_array_equal(got, order)
        assert cost == 0.0


@pytest.mark.parametrize("n", range(1, 9))
def test_greedy_never_beats_exact(n):
    for W in random_ws(200 + n, n, 40):
        order, cost = kemeny_greedy(W)
        assert cost == pytest.approx(disagreement(W, order), abs=1e-12)
        assert cost >= kemeny_exact(W)[1] - 1e-9


@pytest.mark.parametrize("n", [2, 3, 4, 6, 8, 12, 16])
def test_greedy_is_swap_optimal(n):
    for W in random_ws(300 + n, n, 50):
        order, _ = kemeny_greedy(W)
        assert sorted(order.tolist()) == list(range(n))
        assert is_swap_optimal(W, order)


def test_greedy_breaks_weakest_edge_of_cycle():
    W = np.zeros((3, 3))
    W[0, 1], W[1, 2], W[2, 0] = 3, 2, 1
    order, cost = kemeny_greedy(W)
    np.testing.assert_array_equal(order, [0, 1, 2])
    assert cost == 1.0


def test_greedy_ties_in_index_order():
    np.testing.assert_array_equal(kemeny_greedy(np.ones((4, 4)))[0], np.arange(4))
    assert kemeny_greedy(np.zeros((0, 0)))[0].shape == (0,)


# ----- Bradley-Terry -----


def bt_sample(rng, strengths, m):
    n = len(strengths)
    i = rng.integers(n, size=m)
    j = (i + rng.integers(1, n, size=m)) % n  # j != i
    p = 1 / (1 + np.exp(-(strengths[i] - strengths[j])))
    win = rng.random(m) < p
    return np.where(win, i, j), np.where(win, j, i)


@pytest.mark.parametrize("seed", range(6))
def test_bt_matches_choix_on_hard_outcomes(seed):
    rng = np.random.default_rng(seed)
    n = 8
    winners, losers = bt_sample(rng, rng.normal(0, 1, n), 20)
    ours = bradley_terry(n, winners, losers, np.ones(len(winners)), l2=0.1)
    ref = bradley_terry_choix(n, winners, losers, l2=0.1)
    np.testing.assert_allclose(ours - ours.mean(), ref - ref.mean(), atol=1e-4)
    np.testing.assert_array_equal(np.argsort(-ours, kind="stable"), np.argsort(-ref, kind="stable"))


def test_bt_finite_on_perfect_round_robin():
    n = 6
    i, j = np.triu_indices(n, 1)  # item k beats every item after it
    theta = bradley_terry(n, i, j, 1.0)
    assert np.all(np.isfinite(theta))
    assert np.all(np.diff(theta) < 0)


def test_bt_soft_outcomes_shrink_strengths():
    n = 5
    i, j = np.triu_indices(n, 1)
    hard = bradley_terry(n, i, j, soft_outcome(np.ones(len(i), int), 1.0))
    soft = bradley_terry(n, i, j, soft_outcome(np.ones(len(i), int), 0.8))
    assert np.all(np.abs(soft) <= np.abs(hard) + 1e-12)
    assert np.abs(soft).max() < np.abs(hard).max() - 0.1
    assert np.all(np.diff(soft) < 0)  # same order, just less confident


def test_bt_tie_gives_equal_strength():
    # 0 and 1 tie; both beat 2 once each
    theta = bradley_terry(3, [0, 0, 1], [1, 2, 2], [0.5, 1.0, 1.0])
    assert theta[0] == pytest.approx(theta[1], abs=1e-6)
    assert theta[0] > theta[2] + 0.1
    np.testing.assert_allclose(bradley_terry(2, [0], [1], [0.5]), [0.0, 0.0], atol=1e-8)


def test_bt_mirror_symmetry():
    rng = np.random.default_rng(7)
    n, m = 7, 25
    i = rng.integers(n, size=m)
    j = (i + rng.integers(1, n, size=m)) % n
    o = rng.uniform(0, 1, m)
    w = rng.uniform(0.5, 2, m)
    a = bradley_terry(n, i, j, o, weight=w)
    b = bradley_terry(n, j, i, 1 - o, weight=w)
    np.testing.assert_allclose(a, b, atol=1e-8)


def test_bt_recovers_true_order():
    rng = np.random.default_rng(11)
    n = 10
    true = np.linspace(-2, 2, n)[rng.permutation(n)]
    winners, losers = bt_sample(rng, true, 2000)
    theta = bradley_terry(n, winners, losers, 1.0, l2=0.01)
    assert spearmanr(theta, true).statistic >= 0.9


def test_bt_uncompared_and_empty():
    theta = bradley_terry(4, [0], [1], [1.0])
    assert theta[0] > 0 > theta[1]
    assert theta[2] == theta[3] == 0.0
    np.testing.assert_array_equal(bradley_terry(3, [], [], []), np.zeros(3))
    np.testing.assert_array_equal(bradley_terry_choix(3, [], []), np.zeros(3))


def test_bt_weight_counts_as_repetition():
    once = bradley_terry(3, [0, 1, 0, 0], [1, 2, 2, 2], [1.0, 1.0, 0.0, 0.0])
    weighted = bradley_terry(3, [0, 1, 0], [1, 2, 2], [1.0, 1.0, 0.0], weight=[1, 1, 2])
    np.testing.assert_allclose(once, weighted, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(l2=0.0),
        dict(l2=-1.0),
        dict(i=[0], j=[0]),
        dict(i=[0], j=[3]),
        dict(outcome=[1.5]),
        dict(outcome=[np.nan]),
        dict(weight=[-1.0]),
        dict(weight=[np.inf]),
    ],
)
def test_bt_invalid_inputs(kwargs):
    args = dict(i=[0], j=[1], outcome=[1.0]) | kwargs
    with pytest.raises(ValueError):
        bradley_terry(3, **args)


def test_soft_outcome():
    np.testing.assert_allclose(soft_outcome(np.array([1, 0, -1]), 0.9), [0.9, 0.5, 0.1])
    assert soft_outcome(1, 1.0) == 1.0
    for gamma in (0.5, 1.2, 0.0):
        with pytest.raises(ValueError, match=r"\(0.5, 1\]"):
            soft_outcome(1, gamma)
    with pytest.raises(ValueError):
        soft_outcome(2, 0.9)


def test_minmax():
    np.testing.assert_allclose(minmax([2.0, 4.0, 3.0]), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(minmax([3.0, 3.0]), [0.5, 0.5])
    assert minmax([]).shape == (0,)


def test_greedy_tiebreak_orders_split_votes_by_score():
    W = np.ones((5, 5)) - np.eye(5)  # every pair split 1–1: any order is Kemeny-optimal
    score = np.array([0.2, 0.9, 0.1, 0.5, 0.7])
    order, cost = kemeny_greedy(W, tiebreak=score)
    np.testing.assert_array_equal(order, [1, 4, 3, 0, 2])
    assert cost == 10.0
    np.testing.assert_array_equal(kemeny_greedy(W)[0], np.arange(5))  # no tiebreak: index order
    with pytest.raises(ValueError, match="tiebreak must be 5 finite scores"):
        kemeny_greedy(W, tiebreak=[1.0, 2.0])
