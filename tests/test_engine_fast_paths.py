"""The engine's fast paths give what the general code gives, bit for bit (a lighter engine must not
change a single result): the one-vote, both-orders match result, the per-group judge-health
counts and the ranking of tied keys."""

import math

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.diagnostics import ComparisonHealth, comparison_health, triangles
from arenabench.types import MatchResult


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
