"""``benchmarks/overhead.py``'s free-fit control: the live arena's own schedule with every
Bradley-Terry fit looked up, so the same judge work and rewards (else the floor it reports
would be another tournament's)."""

import sys

import numpy as np
from helpers import ROOT

from arenabench import judges, rewards
from arenabench.engine import Engine
from arenabench.sim import simulate_groups

sys.path.insert(0, str(ROOT))
from benchmarks.overhead import FreeFitLive  # noqa: E402


def test_free_fit_control_plays_the_live_arena():
    groups = simulate_groups(4, 8, seed=3)
    live = Engine(judges.get("calibrated")).run(rewards.get("reasoning_arena_live"), groups)
    free = FreeFitLive()
    sizes = []
    for _ in range(2):  # the first run fills the memo, the second only looks fits up
        ctl = Engine(judges.get("calibrated")).run(free, groups)
        assert ctl.stats.judge_calls == live.stats.judge_calls and ctl.stats.waves == live.stats.waves
        for a, b in zip(live.results, ctl.results, strict=True):
            np.testing.assert_array_equal(a.reward, b.reward)
        sizes.append(len(free.memo))
    # at most a fit per wave and a final one per group (groups can share a fit's key)
    assert 0 < sizes[0] == sizes[1] <= 4 * 7 + 1
