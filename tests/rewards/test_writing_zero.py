"""Writing-Zero: one random peer per rollout."""

import numpy as np
import pytest
from conftest import random_groups

from arenabench import rewards

SIZES = [2, 3, 5, 8, 16]


@pytest.mark.parametrize("n", SIZES)
def test_writing_zero_is_one_random_peer_each(n, noiseless):
    groups = random_groups(n, k=5, seed=40 + n)
    for g, r in zip(groups, noiseless.run(rewards.get("writing_zero"), groups).results, strict=True):
        assert r.comparisons == n
        ref = r.extra["reference"]
        assert np.all(ref != np.arange(n))
        q = np.array([t.meta["quality"] for t in g.trajectories])
        np.testing.assert_array_equal(r.reward, np.where(q > q[ref], 1.0, -1.0))
