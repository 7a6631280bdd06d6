"""Engine: failures are retried, then counted and flagged (never a silent tie); dedup; batching."""

import math

import numpy as np
import pytest
from conftest import make_group, random_groups

from arenabench import Engine, judges, rewards
from arenabench.types import JudgeFailure, PairJudgment


class NaNJudge:
    """Replies NaN to the requests that involve trajectory text ``bad`` (a test double of a
    broken judge; everything else is the real simulated judge)."""

    def __init__(self, bad: str | None = None, fail_attempts: int = 10**9):
        self.inner = judges.get("noiseless")
        self.bad = bad
        self.fail_attempts = fail_attempts
        self.batches: list[int] = []

    def judge_pairs(self, requests):
        self.batches.append(len(requests))
        good = self.inner.judge_pairs(requests)
        return [
            PairJudgment(math.nan, math.nan)
            if (self.bad is None or self.bad in (r.a.text, r.b.text)) and r.attempt < self.fail_attempts
            else g
            for r, g in zip(requests, good, strict=True)
        ]

    def score_points(self, requests):
        return [JudgeFailure("down") for _ in requests]


def test_nan_verdicts_are_retried_then_counted_not_tied():
    g = make_group([3.0, 2.0, 1.0], anchor=0)
    judge = NaNJudge(bad=g.trajectories[2].text)
    out = Engine(judge, max_retries=2).run(rewards.get("round_robin"), [g])
    r = out.results[0]
    # pairs (0,2) and (1,2) fail: 2 matches x 2 orders, each tried 1 + 2 times
    assert r.failures == 4
    assert out.stats.failures == 4 and out.stats.retries == 8
    assert out.stats.failure_reasons == {"non-finite score": 4}
    assert judge.batches == [6, 4, 4]
    assert "failed_matches:2" in r.flags and "judge_failures:4" in r.flags
    # trajectory 2 has no decided match: it is unranked, not tied; 0 and 1 keep their real order
    assert np.isnan(r.rank[2]) and r.advantage[2] == 0.0
    assert r.rank[0] == 0 and r.rank[1] == 1
    assert r.advantage[0] > 0 > r.advantage[1]


def test_a_retry_that_succeeds_changes_nothing():
    groups = random_groups(8, k=3, seed=5)
    clean = Engine(judges.get("noiseless")).run(rewards.get("seeded_single_elim"), groups)
    flaky = Engine(NaNJudge(fail_attempts=1), max_retries=1).run(rewards.get("seeded_single_elim"), groups)
    assert flaky.stats.failures == 0 and flaky.stats.retries == clean.stats.judge_calls
    for a, b in zip(clean.results, flaky.results, strict=True):
        np.testing.assert_array_equal(a.advantage, b.advantage)
        assert b.retries == a.judge_calls and b.failures == 0


def test_all_failed_group_gets_zero_advantage_and_flags():
    g = make_group([3.0, 2.0, 1.0, 0.0], anchor=0)
    for name in ["round_robin", "anchor", "seeded_single_elim", "swiss", "double_elim", "pointwise"]:
        r = Engine(NaNJudge(), max_retries=0).run(rewards.get(name), [g]).results[0]
        assert r.failures > 0
        assert np.all(np.isfinite(r.advantage))
        assert any(f.startswith("judge_failures") for f in r.flags)
        if name in ("round_robin", "anchor", "pointwise", "swiss"):
            np.testing.assert_array_equal(r.advantage, 0.0)


def test_pointwise_needs_a_judge_that_can_score():
    g = make_group([1.0, 2.0], anchor=0)
    with pytest.raises(ValueError, match="needs a pointwise judge"):
        Engine(None).run(rewards.get("pointwise"), [g])


def test_identical_requests_are_sent_once():
    g = random_groups(6, seed=2)[0]
    out = Engine(judges.get("calibrated")).run(rewards.get("round_robin"), [g, g])
    a, b = out.results
    assert a.judge_calls == 30 and b.judge_calls == 0
    assert out.stats.dedup_hits == 30 and out.stats.judge_calls == 30
    np.testing.assert_array_equal(a.advantage, b.advantage)


def test_judge_exception_fails_the_batch_loudly():
    class Broken:
        def judge_pairs(self, requests):
            raise TimeoutError("judge timed out")

    g = make_group([1.0, 2.0, 3.0], anchor=0)
    out = Engine(Broken(), max_retries=1).run(rewards.get("anchor"), [g])
    assert out.stats.failures == 4
    assert out.stats.failure_reasons == {"TimeoutError: judge timed out": 4}


def test_bad_engine_config():
    with pytest.raises(ValueError, match="max_retries"):
        Engine(judges.get("calibrated"), max_retries=-1)


def test_pointwise_retries_are_attributed_to_their_group():
    class FlakyPoints:
        inner = judges.get("calibrated")

        def score_points(self, requests):
            good = self.inner.score_points(requests)
            return [
                JudgeFailure("timeout") if r.attempt == 0 else x for r, x in zip(requests, good, strict=True)
            ]

    groups = random_groups(5, k=2, seed=9)
    clean = Engine(judges.get("calibrated")).run(rewards.get("pointwise"), groups)
    flaky = Engine(FlakyPoints()).run(rewards.get("pointwise"), groups)
    for a, b in zip(clean.results, flaky.results, strict=True):
        np.testing.assert_array_equal(a.advantage, b.advantage)
        assert (b.retries, b.judge_calls, b.failures) == (5, 10, 0)
    assert flaky.stats.judge_batches == 2 and flaky.stats.judge_calls == 20
