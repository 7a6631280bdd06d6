"""Issue 31 (3): seeded single elimination gives the greedy anchor no systematic advantage.

In groups of equal true quality nothing but judge noise (and, on an integer grid, ties) separates
the rollouts, so the anchor's mean advantage must be 0 within 2 standard errors. The N = 8, 400
group check of ``test_ties.py`` could not see the bias this file guards against (+0.044 ± 0.015
at N = 16 on the continuous judge, −0.061 ± 0.018 on the integer one, 4,000 groups): the anchor's
N − 1 seeding matches weighed in its tier key, and its bracket games replayed its seeding verdicts.
Fixed by the tier key (``brackets.tier_scores``: the seeding score counted once) and by asking a
rematch as a new judgment (``brackets.rematch``) — except on the integer judge at N = 16.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_group

from arenabench import Engine, judges, rewards

GROUPS = 4000
CHUNK = 500  # groups per engine run (a step); the engine draws each group's rng from (seed, step, index)


def equal_quality_groups(k: int, n: int, seed: int = 11):
    """As ``test_ties.equal_quality_groups``: k groups of n rollouts of one true quality each."""
    rng = np.random.default_rng(seed)
    return [make_group([1.7 + 0.3 * rng.standard_normal()] * n, anchor=0, prompt=f"eq{g}") for g in range(k)]


OPEN = pytest.mark.xfail(
    strict=True,
    reason="issue 31, still open: integer judge at N = 16, anchor mean advantage -0.069 ± 0.019 "
    "(a mean of N-1 integer seeding scores against single integer scores in tied games and tiers)",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,n,preset",
    [
        ("seeded_single_elim", 8, "calibrated"),
        ("seeded_single_elim", 8, "integer"),
        ("seeded_single_elim", 16, "calibrated"),
        pytest.param("seeded_single_elim", 16, "integer", marks=OPEN),
        # test_ties.py's 400-group check, powered (see POWERED there)
        ("double_elim", 8, "calibrated"),
        ("double_elim", 8, "integer"),
    ],
)
def test_anchor_mean_advantage_is_zero_in_equal_quality_groups(name, n, preset):
    """4,000 equal-quality groups (seeds: groups 11, judge 4, engine 0, as ``test_ties``):
    |mean anchor advantage| <= 2 SE. Measured when written (chunks of 500): single elimination
    z = +0.17, −0.41, −0.72 (N = 8 calibrated, N = 8 integer, N = 16 calibrated), N = 16 integer
    z = −3.56, still open (strict xfail: it fails loudly once fixed, so the mark is removed);
    double elimination z = +0.35, +1.53."""
    engine = Engine(judges.get(preset, seed=4), seed=0)
    groups = equal_quality_groups(GROUPS, n)
    adv0 = []
    for k in range(0, GROUPS, CHUNK):
        out = engine.run(rewards.get(name), groups[k : k + CHUNK], step=k // CHUNK)
        adv0 += [float(r.advantage[0]) for r in out.results]
    a = np.array(adv0)
    se = a.std(ddof=1) / math.sqrt(len(a))
    assert abs(a.mean()) <= 2 * se, f"anchor mean advantage {a.mean():+.4f}, 2 SE = {2 * se:.4f}"
