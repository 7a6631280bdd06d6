"""The simulated presets answer exactly as they did before fitted judges (kind ``ordinal``) were
added: published results must reproduce. Digests of every preset's answers (pairs in both
orders, two samples, and point scores) on fixed groups, rounded to 10 decimals so that a last-ulp
difference of a platform's exp/log does not count; recorded at commit 00a4f0e."""

import hashlib

import pytest

from arenabench import judges
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest, PointRequest

DIGESTS = {
    "bradley_terry": "4600da14cc741108",
    "calibrated": "c4c4cd035a9387c7",
    "cot": "c9a0e1e6612315c5",
    "integer": "0ac6518e33a3af10",
    "noiseless": "d176974feefb0f65",
    "position_gap": "4c3c8aa2067cfa19",
}


def answers_digest(name: str) -> str:
    groups = simulate_groups(4, 5, seed=3)
    pairs = [
        PairRequest(g.prompt, g.trajectories[i], g.trajectories[j], sample=s)
        for g in groups
        for i in range(5)
        for j in range(5)
        if i != j
        for s in range(2)
    ]
    points = [PointRequest(g.prompt, t, sample=s) for g in groups for t in g.trajectories for s in range(2)]
    j = judges.get(name, seed=7)
    vals = [(p.score_a, p.score_b, p.prob_a) for p in j.judge_pairs(pairs)] + j.score_points(points)
    flat = [round(float(x), 10) for v in vals for x in (v if isinstance(v, tuple) else (v,))]
    return hashlib.sha256(repr(flat).encode()).hexdigest()[:16]


def test_every_preset_is_covered():
    assert sorted(DIGESTS) == judges.presets()


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_preset_answers_unchanged(name):
    assert answers_digest(name) == DIGESTS[name]
