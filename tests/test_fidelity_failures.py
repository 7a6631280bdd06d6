"""``arenabench fidelity`` never drops a judge-failed group silently (issue 43 §6): a group the
judge left wholly unranked counts at τ = 0 (no information) and the row says how many there were."""

from __future__ import annotations

import math

import numpy as np

from arenabench.fidelity import FAILED_COLUMNS, columns, group_metrics, run_fidelity
from arenabench.judges.simulated import SimulatedJudge
from arenabench.types import ConstructorResult, JudgeFailure


class FailsOnPrompts:
    """The calibrated simulator, but every request whose prompt is in ``bad`` fails."""

    def __init__(self, bad):
        self.inner, self.bad = SimulatedJudge("calibrated"), set(bad)
        self.stats = self.inner.stats

    def judge_pairs(self, requests):
        out = self.inner.judge_pairs(requests)
        return [
            JudgeFailure("timeout: dead") if r.prompt in self.bad else o
            for r, o in zip(requests, out, strict=True)
        ]


def _result(rank):
    n = len(rank)
    return ConstructorResult(np.zeros(n), np.zeros(n), np.asarray(rank, float), 0, 0, 0)


def test_unranked_groups_are_no_information_not_nan():
    q = np.array([0.1, 0.5, 0.9, 0.3])
    m = group_metrics(_result([np.nan] * 4), q)
    assert m["kendall_tau"] == 0.0 and m["spearman"] == 0.0 and m["failed_group"] == 1.0
    assert m["top1"] == 0.25  # four tied leaders, the best among them
    # two unranked (tied last) below two ranked ones: tau-b is defined (it was NaN)
    m = group_metrics(_result([np.nan, 2, 1, np.nan]), q)
    assert math.isfinite(m["kendall_tau"]) and m["failed_group"] == 0.0
    assert m["kendall_tau"] == np.float64(5 / math.sqrt(5 * 6))  # 5 concordant of 5 untied pairs


def test_fidelity_counts_failed_groups_beside_the_mean():
    from arenabench.sim import simulate_groups

    groups = simulate_groups(20, 6, seed=0)
    bad = {g.prompt for g in groups[::2]}  # the judge fails every request of half the groups
    (row,) = run_fidelity(
        ["round_robin"], group_size=6, n_groups=20, judge=FailsOnPrompts(bad), progress=False
    )
    (clean,) = run_fidelity(["round_robin"], group_size=6, n_groups=20, progress=False)
    assert row["failed_groups"] == 10
    assert "failed_groups" in columns([row]) and "failed_groups" not in clean
    assert math.isfinite(row["kendall_tau"])
    # the failed half counts as 0: the mean is the clean half's sum over all 20 groups
    assert 0 < row["kendall_tau"] < clean["kendall_tau"]
    assert FAILED_COLUMNS == ["failed_groups"]
