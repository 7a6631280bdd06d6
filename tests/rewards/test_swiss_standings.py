"""Issue 31 (2): Swiss standings compare exactly, so equal rates and Buchholz values reach the
documented third key (mean match score).

On an integer-rubric judge many players finish on the same score rate; their Buchholz values
(means of their opponents' rates) are often mathematically equal although their float means
differ in the last place (the float means of 0, 0, 5/6 and of 0, 1/6, 2/3 differ). Points are kept in
half-units and rate and Buchholz as ``Fraction``s, so those players are ordered by the third key.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from conftest import make_group

from arenabench import Engine, judges, rewards
from arenabench.rewards.swiss import exact_order


def _groups(k: int, n: int):
    rng = np.random.default_rng(31)
    return [make_group(1.7 + 0.3 * rng.standard_normal(n), anchor=0, prompt=f"sw{n}g{g}") for g in range(k)]


def test_exact_order_keeps_equal_rationals_equal():
    a = [Fraction(0), Fraction(0), Fraction(5, 6)]
    b = [Fraction(0), Fraction(1, 6), Fraction(2, 3)]
    assert sum(a) / 3 == sum(b) / 3 and np.mean([float(x) for x in a]) != np.mean([float(x) for x in b])
    np.testing.assert_array_equal(
        exact_order([sum(a) / 3, None, sum(b) / 3, Fraction(0)]), [1.0, np.nan, 1.0, 0.0]
    )


def test_integer_judge_reaches_the_third_key():
    """300 groups at N = 6 and N = 8 on the integer judge: every pair of players with equal rate
    and equal Buchholz (exact) is ordered by mean match score; such pairs occur, including pairs
    whose Buchholz the float mean of the opponents' rates had split (the old rule ranked those by
    the last-place float difference instead)."""
    engine = Engine(judges.get("integer", seed=2), seed=0)
    third_key, float_split = 0, 0
    for n in (6, 8):
        out = engine.run(rewards.get("swiss"), _groups(300, n))
        for r in out.results:
            rate, buch, opps = r.extra["rate_exact"], r.extra["buchholz_exact"], r.extra["opponents"]
            ms = r.extra["mean_score"]
            for p in range(n):  # Buchholz is the exact mean of the opponents' exact rates
                assert buch[p] == (sum(rate[o] for o in opps[p]) / len(opps[p]) if opps[p] else None)
            for p in range(n):
                for q in range(p + 1, n):
                    if rate[p] is None or rate[p] != rate[q] or buch[p] != buch[q] or ms[p] == ms[q]:
                        continue
                    third_key += 1
                    old = [np.mean([float(rate[o]) for o in opps[x]]) for x in (p, q)]
                    float_split += old[0] != old[1]
                    assert (r.rank[p] < r.rank[q]) == (ms[p] > ms[q]), (n, p, q, r.rank, ms)
    assert third_key > 100 and float_split > 10, (third_key, float_split)
