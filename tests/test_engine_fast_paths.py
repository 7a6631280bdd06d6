"""The engine's fast paths give what the general code gives, bit for bit (a lighter engine must not
change a single result): the one-vote, both-orders match result, the per-group judge-health
counts and the ranking of tied keys."""

import math
import struct

import numpy as np
import pytest

from arenabench.advantages import ranks_from_keys, standardize
from arenabench.diagnostics import ComparisonHealth, comparison_health, triangles
from arenabench.kinds import PAIR, any_match_result
from arenabench.types import Match, MatchResult, PairJudgment

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered")

SCORES = [0.0, -0.0, 1.0, 7.5, 0.1, 0.2, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308, 3, 10]
PROBS = [None, 0.0, -0.0, 1.0, 0.5, 0.3, 0.7, 5e-324, 1]


def _canon(x):
    """A value with its type and float bits (NaN as one tag), for exact comparison."""
    if isinstance(x, float):
        return (type(x).__name__, "nan" if math.isnan(x) else struct.pack("<d", x))
    if isinstance(x, list | tuple):
        return (type(x).__name__, [_canon(v) for v in x])
    if isinstance(x, MatchResult):
        return [(k, _canon(v)) for k, v in vars(x).items()]
    return (type(x).__name__, x)


def _reply(rng):
    a, b = (SCORES[k] for k in rng.integers(len(SCORES), size=2))
    if rng.random() < 0.2:
        a, b = np.float64(a), np.float64(b)
    return PairJudgment(a, b, PROBS[rng.integers(len(PROBS))])


def _fold(ask, got):
    """The engine's fold of a match (``kinds.PAIR.fold``) over ``got``'s replies, laid out as its
    expansion lays them out (shown orders × votes, order-major: ``got``'s orders)."""
    (res,) = PAIR.fold([ask], [list(range(len(got)))], [rep for _, rep in got])
    return res


def test_one_vote_both_orders_fast_path_matches_the_general_result():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        ask = Match(int(rng.integers(5)), 5)
        got = [(0, _reply(rng)), (1, _reply(rng))]
        fast = _fold(ask, got)
        assert _canon(fast) == _canon(any_match_result(ask, got)), (ask, got)


@pytest.mark.parametrize(
    "ask,orders",
    [
        (Match(0, 1), (0, 1)),  # a failed request: the general path
        (Match(0, 1, votes=2), (0, 0, 1, 1)),
        (Match(0, 1, votes=3), (0, 0, 0, 1, 1, 1)),
        (Match(0, 1, first=0), (0,)),
        (Match(0, 1, first=1), (1,)),
        (Match(0, 1, votes=2, first=1), (1, 1)),
    ],
)
def test_match_results_off_the_fast_path_are_the_general_results(ask, orders):
    rng = np.random.default_rng(1)
    for _ in range(300):
        got = [(o, None if rng.random() < 0.25 else _reply(rng)) for o in orders]
        assert _canon(_fold(ask, got)) == _canon(any_match_result(ask, got))


def _health_by_hand(n, results):
    """comparison_health as it was first written: per-order lists, numpy signs, a net matrix."""
    h = ComparisonHealth()
    net = np.zeros((n, n))
    for m in results:
        if m.failed:
            continue
        h.matches += 1
        w = m.winner
        h.ties += w is None
        if w is not None:
            v = 1.0 if w == m.i else -1.0
            net[m.i, m.j] += v
            net[m.j, m.i] -= v
        by_order = [[s for s, o in zip(m.samples, m.orders, strict=True) if o == k] for k in (0, 1)]
        if by_order[0] and by_order[1]:
            h.bidirectional += 1
            verdicts = [int(np.sign(sum(a - b for a, b in p))) for p in by_order]
            h.consistent += verdicts[0] == verdicts[1]
    h.triangles, h.cyclic = triangles(net > 0)
    return h


def test_comparison_health_counts_as_the_general_code():
    rng = np.random.default_rng(2)
    grid = [0.0, -0.0, 1.0, 2.0, 3.0]  # a coarse grid: ties in an order and in the sum
    for _ in range(400):
        n = int(rng.integers(2, 7))
        results = []
        for _ in range(int(rng.integers(0, 3 * n))):
            i, j = (int(x) for x in rng.choice(n, size=2, replace=False))
            orders = [[0, 1], [0, 0, 1, 1], [0], [1, 1], [0, 1, 1]][rng.integers(5)]
            samples = [(grid[rng.integers(5)], grid[rng.integers(5)]) for _ in orders]
            if rng.random() < 0.1:
                results.append(MatchResult(i, j, math.nan, math.nan, failed=True))
                continue
            si, sj = sum(a for a, _ in samples), sum(b for _, b in samples)
            results.append(MatchResult(i, j, si, sj, samples=samples, orders=list(orders)))
        assert comparison_health(n, results) == _health_by_hand(n, results)


def _ranks_by_hand(*keys):
    """ranks_from_keys as it was first written: tie groups from np.unique over the key rows."""
    first = np.asarray(keys[0], dtype=float)
    ranked = ~np.isnan(first)
    out = np.full(len(first), np.nan)
    if not ranked.any():
        return out
    cols = [np.nan_to_num(np.asarray(k, dtype=float)[ranked], nan=-np.inf) for k in keys]
    order = np.lexsort([-c for c in reversed(cols)])
    pos = np.empty(len(order))
    pos[order] = np.arange(len(order))
    _, tie = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
    tie = tie.ravel()
    out[ranked] = (np.bincount(tie, weights=pos) / np.bincount(tie))[tie]
    return out


def test_ranks_from_keys_ties_as_the_unique_rows_did():
    """Ties (±0 equal), NaN (unranked first key, lowest later key) and ±inf (equal to ±max, as
    nan_to_num maps them) rank exactly as before."""
    big = np.finfo(float).max
    values = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.nan, np.inf, -np.inf, big, -big])
    rng = np.random.default_rng(3)
    for _ in range(3000):
        n, k = int(rng.integers(1, 10)), int(rng.integers(1, 4))
        pool = values[: int(rng.integers(2, len(values) + 1))]
        keys = [rng.choice(pool, size=n) for _ in range(k)]
        assert ranks_from_keys(*keys).tobytes() == _ranks_by_hand(*keys).tobytes(), keys


def _standardize_by_hand(reward, ddof=0, eps=1e-6):
    """standardize as it was first written: numpy's mean and std methods."""
    reward = np.asarray(reward, dtype=float)
    ok = ~np.isnan(reward)
    adv = np.zeros(len(reward))
    if ok.sum() <= ddof or ok.sum() < 2:
        return adv
    r = reward[ok]
    if r.min() == r.max():
        return adv
    scale = float(np.abs(r).max())
    if scale > 1e150:
        r = r / scale
    adv[ok] = (r - r.mean()) / (r.std(ddof=ddof) + eps)
    return adv


@pytest.mark.parametrize("ddof", [0, 1])
def test_standardize_is_numpys_mean_and_std_bit_for_bit(ddof):
    """Sizes past numpy's pairwise-summation blocks (8, 128), ties, NaN, ±0, huge rewards."""
    rng = np.random.default_rng(4)
    for n in [1, 2, 3, 7, 8, 9, 16, 64, 127, 128, 129, 300, 1000]:
        for _ in range(20):
            x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4)
            kind = rng.integers(5)
            if kind == 1:
                x = np.round(x)  # ties
            elif kind == 2:
                x[rng.random(n) < 0.3] = np.nan
            elif kind == 3:
                x = x * 1e200
            elif kind == 4:
                x[rng.random(n) < 0.5] = rng.choice([0.0, -0.0])
            assert standardize(x, ddof=ddof).tobytes() == _standardize_by_hand(x, ddof=ddof).tobytes()
