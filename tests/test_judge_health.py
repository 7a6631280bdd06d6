"""Per-step judge diagnostics (issue 18): position consistency, ties, cycles and failures equal
hand-computed values on small scripted fixtures."""

import math

import numpy as np
import pytest
from conftest import make_group
from helpers import Scripted

from arenabench import Engine, judges, rewards
from arenabench.diagnostics import (
    HEALTH_COUNTS,
    HEALTH_METRICS,
    ComparisonHealth,
    comparison_health,
    health_metrics,
    health_rates,
    triangles,
)
from arenabench.types import MatchResult

T = [f"p rollout {i}" for i in range(4)]  # make_group's texts


def test_a_known_flip_and_a_known_tie():
    """Round-robin of 3. (0, 1): 0 wins in both orders. (0, 2): the slot-A side wins in both
    orders — a flip, and the summed scores tie (7 + 3 each). (1, 2): 1 wins in one order, the
    other order ties (5, 5): the verdicts differ (i vs tie), so it is inconsistent too."""
    table = {
        (T[0], T[1]): (8, 2),
        (T[1], T[0]): (3, 6),
        (T[0], T[2]): (7, 3),
        (T[2], T[0]): (7, 3),
        (T[1], T[2]): (6, 4),
        (T[2], T[1]): (5, 5),
    }
    out = Engine(Scripted(table)).run(rewards.get("round_robin"), [make_group([0, 0, 0])])
    h = out.stats.health
    assert h == ComparisonHealth(matches=3, ties=1, bidirectional=3, consistent=1, triangles=0, cyclic=0)
    rates = health_rates(h, out.stats.failures, out.stats.judge_calls - out.stats.retries)
    assert rates["judge_consistency"] == pytest.approx(1 / 3)
    assert rates["judge_tie_rate"] == pytest.approx(1 / 3)
    assert math.isnan(rates["judge_cycle_rate"])  # the tie leaves no judged triangle
    assert rates["judge_failure_rate"] == 0.0


def test_a_known_three_cycle_among_four():
    """0 > 1 > 2 > 0 (rock-paper-scissors), and all three beat 3: four judged triangles, one cyclic."""
    beats = {(0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)}
    table = {}
    for a, b in beats:
        table[(T[a], T[b])] = (9, 1)
        table[(T[b], T[a])] = (1, 9)
    out = Engine(Scripted(table)).run(rewards.get("round_robin"), [make_group([0, 0, 0, 0])])
    h = out.stats.health
    assert (h.matches, h.ties, h.bidirectional, h.consistent) == (6, 0, 6, 6)
    assert (h.triangles, h.cyclic) == (4, 1)
    m = health_metrics(out.stats)
    assert m["judge_cycle_rate"] == 0.25 and m["judge_consistency"] == 1.0 and m["judge_triangles"] == 4.0


def test_failures_count_per_request_and_a_half_answered_match_is_not_bidirectional():
    """One order of (1, 2) is not scripted: it fails (no retries), the match keeps the other order
    (partial), so 2 of 3 matches are bidirectional; 1 of the 6 requests failed."""
    table = {(T[a], T[b]): (9, 1) if a < b else (1, 9) for a in range(3) for b in range(3) if a != b}
    del table[(T[2], T[1])]
    out = Engine(Scripted(table), max_retries=0).run(rewards.get("round_robin"), [make_group([0, 0, 0])])
    h = out.stats.health
    assert (h.matches, h.bidirectional, h.consistent, h.triangles, h.cyclic) == (3, 2, 2, 1, 0)
    assert health_metrics(out.stats)["judge_failure_rate"] == pytest.approx(1 / 6)


def test_single_order_policy_has_no_bidirectional_comparisons():
    g = make_group(np.linspace(0, 1, 6))
    out = Engine(judges.get("calibrated")).run(rewards.get("round_robin", order="random"), [g])
    h = out.stats.health
    assert h.bidirectional == 0 and h.matches == 15 and h.triangles == 20
    assert math.isnan(health_rates(h, 0, 15)["judge_consistency"])
    m = health_metrics(out.stats)
    assert m["judge_consistency"] == 0.0 and m["judge_bidirectional"] == 0.0  # the tracker convention
    assert set(m) == set(HEALTH_METRICS) | set(HEALTH_COUNTS)


def test_pointwise_step_has_no_comparisons():
    out = Engine(judges.get("calibrated")).run(rewards.get("pointwise"), [make_group([0.1, 0.2, 0.3])])
    assert out.stats.health == ComparisonHealth()
    assert health_metrics(out.stats)["judge_tie_rate"] == 0.0


def test_repeated_pair_uses_its_majority_and_failed_matches_are_left_out():
    """Triangles from match results directly: (0, 1) asked three times (0 wins twice), a failed
    match adds nothing."""

    def m(i, j, si, sj, failed=False):
        return MatchResult(i, j, si, sj, failed=failed, samples=[(si / 2, sj / 2)] * 2, orders=[0, 1])

    res = [m(0, 1, 6, 4), m(0, 1, 4, 6), m(0, 1, 7, 3), m(1, 2, 6, 4), m(2, 0, 6, 4)]
    res.append(m(0, 2, 0, 0, failed=True))
    h = comparison_health(3, res)
    assert (h.matches, h.triangles, h.cyclic) == (5, 1, 1)
    assert triangles(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]], bool)) == (1, 0)


class Collect:
    """A tracker that keeps what ``train`` logs (``log_metrics(metrics, step)``)."""

    def __init__(self):
        self.logged: list[dict] = []

    def log_metrics(self, metrics, step):
        self.logged.append(dict(metrics))


@pytest.mark.parametrize("order", ["both", "random"])
def test_local_trainer_logs_judge_health_every_step(order):
    """Two steps of the real trainer, the order policy set from hydra (``reward.order=...``)."""
    from helpers import compose_cfg

    from arenabench.trainers.local.trainer import STEP_METRICS, train

    assert set(HEALTH_METRICS) | set(HEALTH_COUNTS) <= set(STEP_METRICS)
    cfg = compose_cfg(
        "reward=round_robin",
        f"reward.order={order}",
        "steps=2",
        "eval_every=0",
        "prompts_per_step=2",
        "group_size=4",
        "tracking=none",
    )
    tracker, stats = Collect(), []
    train(cfg, tracker=tracker, progress=False, on_step=lambda step, groups, out: stats.append(out.stats))
    assert len(tracker.logged) == len(stats) == 2
    for logged, st in zip(tracker.logged, stats, strict=True):
        assert {k: logged[k] for k in (*HEALTH_METRICS, *HEALTH_COUNTS)} == health_metrics(st)
        assert logged["judge_bidirectional"] == (logged["judge_matches"] if order == "both" else 0.0)
