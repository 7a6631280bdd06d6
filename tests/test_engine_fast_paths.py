"""The engine's fast paths give what the general code gives, bit for bit (a lighter engine must not
change a single result): the one-vote, both-orders match result, the per-group judge-health
counts and the ranking of tied keys."""

import math

import numpy as np

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
