"""The reward worker's metrics: ONE MLflow point per global step, however many barrier flushes
scored that step's groups (a small batch's groups finish apart: one flush each)."""

import asyncio

import numpy as np
import pytest
from helpers import logging_worker, verl_batch

from arenabench.trainers.verl import launch
from arenabench.trainers.verl.reward_manager import StepLog


def step_log(expected=2):
    points = []
    return StepLog(lambda metrics, step: points.append((step, dict(metrics))), expected), points


ADV_A = np.array([1.0, -1.0, 0.0, 0.0])
ADV_B = np.zeros(4)  # a zero-advantage group


def test_two_flushes_of_a_step_make_one_point():
    log, points = step_log()
    log.add(1, [ADV_A], {"judge_calls": 12.0})
    assert points == []  # the step has 1 of its 2 groups
    log.add(1, [ADV_B], {"judge_calls": 24.0})
    assert [s for s, _ in points] == [1]
    got = points[0][1]
    assert got["judge_calls"] == 24.0  # cumulative counters as after the step's last flush
    assert (got["arena/flushes"], got["arena/step_groups"], got["arena/flush_groups"]) == (2.0, 2.0, 1.0)
    assert got["arena/zero_adv_share"] == 0.5
    assert got["arena/adv_std"] == pytest.approx(np.concatenate([ADV_A, ADV_B]).std())


def test_a_step_that_ends_short_is_logged_when_the_next_step_arrives():
    log, points = step_log()
    log.add(1, [ADV_A], {"judge_calls": 12.0})
    log.add(2, [ADV_A, ADV_B], {"judge_calls": 36.0})
    got = [(s, m["arena/step_groups"], m["judge_calls"]) for s, m in points]
    assert got == [(1, 1.0, 12.0), (2, 2.0, 36.0)]


def test_groups_of_a_step_already_logged_go_into_the_next_point():
    log, points = step_log()
    log.add(1, [ADV_A, ADV_A], {"judge_calls": 24.0})
    log.add(1, [ADV_B], {"judge_calls": 36.0})  # e.g. validation groups after the step
    assert len(points) == 1
    log.add(2, [ADV_A, ADV_A], {"judge_calls": 60.0})
    assert [s for s, _ in points] == [1, 2]  # never a second point at step 1
    last = points[1][1]
    assert (last["arena/flushes"], last["arena/step_groups"], last["judge_calls"]) == (2.0, 3.0, 60.0)
    assert last["arena/zero_adv_share"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="at least one group"):
        StepLog(lambda m, s: None, expected=0)


def test_judge_counters_are_summed_over_a_steps_flushes_and_latencies_pooled():
    log, points = step_log()
    log.add(1, [ADV_A], {}, judge={"judge_resent": 3.0, "judge_outage_s": 1.5}, latencies=[0.1, 0.4])
    log.add(1, [ADV_B], {}, judge={"judge_resent": 2.0, "judge_outage_s": 0.5}, latencies=[0.2])
    log.add(1, [ADV_B], {}, judge={"judge_resent": 7.0}, latencies=[0.3])  # after the point: carried
    log.add(2, [ADV_A, ADV_B], {}, judge={"judge_lost": 1.0, "outage_groups": 1.0}, latencies=[0.5])
    (s1, first), (s2, second) = points
    assert (s1, first["judge_resent"], first["judge_outage_s"], first["judge_lost"]) == (1, 5.0, 2.0, 0.0)
    assert first["judge_latency_p50"] == pytest.approx(0.2)  # over the step's 3 batches
    assert (s2, second["judge_resent"], second["judge_lost"], second["outage_groups"]) == (2, 7.0, 1.0, 1.0)
    assert second["judge_latency_p90"] == pytest.approx(0.48)  # 0.3 (carried) and 0.5
    assert second["judge_prompt_tokens"] == 0.0  # every counter logged each step, 0 when nothing


def test_through_verls_reward_worker_one_point_for_a_step_scored_in_two_flushes(
    smoke_env, tokenizer, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = launch.compose("smoke", [f"arenabench.tracking_uri={uri}"])
    worker, uri, run_id = logging_worker(cfg, monkeypatch)
    data, rows = verl_batch(tokenizer)
    data.non_tensor_batch["global_steps"] = np.full(len(data), 1)

    async def one_group_at_a_time():
        for p in (0, 1):  # the second group arrives after the first was scored: two flushes
            idx = [b for b, (q, _, _) in enumerate(rows) if q == p]
            await asyncio.gather(*(worker.compute_score(data[b : b + 1]) for b in idx))

    asyncio.run(one_group_at_a_time())
    assert worker.reward_manager.barrier.stats.flushes == 2
    client = MlflowClient(uri)
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "judge_calls")] == [(1, 24.0)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "arena/flushes")] == [(1, 2.0)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "arena/step_groups")] == [(1, 2.0)]


def test_the_steps_judge_health_sums_its_flushes():
    """Per-step judge diagnostics as the local trainer logs them, summed over the step's flushes:
    a step whose two flushes saw 3 + 1 bidirectional comparisons (2 + 1 consistent), a tie, one
    cyclic triangle of two, and 1 failed request of 20 sent (+ 4 retries)."""
    from arenabench.diagnostics import ComparisonHealth
    from arenabench.engine import StepStats

    log, points = step_log()
    first = StepStats(judge_calls=14, retries=4, failures=1)
    first.health = ComparisonHealth(matches=3, ties=1, bidirectional=3, consistent=2, triangles=1, cyclic=1)
    second = StepStats(judge_calls=10)
    second.health = ComparisonHealth(matches=1, bidirectional=1, consistent=1, triangles=1)
    log.add(1, [ADV_A], {"judge_calls": 14.0}, first)
    log.add(1, [ADV_B], {"judge_calls": 24.0}, second)
    got = points[0][1]
    assert got["arena/judge_consistency"] == 3 / 4
    assert got["arena/judge_tie_rate"] == 1 / 4
    assert got["arena/judge_cycle_rate"] == 1 / 2
    assert got["arena/judge_failure_rate"] == 1 / 20
    assert (got["arena/judge_bidirectional"], got["arena/judge_matches"], got["arena/judge_triangles"]) == (
        4.0,
        4.0,
        2.0,
    )
