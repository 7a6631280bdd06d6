"""Fault injection: faults are reproducible, every one is retried then counted, and what a fault
does not finally break gives exactly the fault-free rewards — in the engine and over a 50-step
local training run.

Why "exactly": the simulated judge is a pure function of (seed, prompt, texts, sample), the
engine's per-group RNG of (seed, step, group) and a retry only raises ``attempt``; so a
recovered fault changes no reply, hence no reward, hence no policy update. A *final* failure
legitimately changes its group's reward (a failed match is dropped, not tied), and from the next
step on the policy and so every later group differ: the runs are compared step by step up to
and including the first step with a final failure, and a separate run with a retry budget large
enough to recover every fault must match the fault-free run on all 50 steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import compose_cfg

from arenabench import Engine, judges, rewards
from arenabench.judges.faults import KINDS, FaultyJudge, InjectedJudgeError
from arenabench.sim import simulate_groups
from arenabench.trainers.local.trainer import train
from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest

# a small, fast policy: the claims are about the judge path, not the model
SMALL = ["trainer.d_model=16", "trainer.n_layer=1", "trainer.n_head=2", "eval_every=0", "tracking=none"]


def pair_requests(n_groups=50, n=8):
    groups = simulate_groups(n_groups, n, seed=1)
    return [
        PairRequest(g.prompt, g.trajectories[i], g.trajectories[j], s)
        for g in groups
        for i in range(n)
        for j in range(n)
        if i != j
        for s in range(2)
    ]


# --------------------------------------------------------------------------- the wrapper


def test_fault_decisions_are_pure_functions_of_seed_content_and_attempt():
    reqs = pair_requests()
    a = FaultyJudge(judges.get("calibrated"), rate=0.2, seed=0)
    b = FaultyJudge(judges.get("calibrated"), rate=0.2, seed=0)
    first = [a.fault_for(r) for r in reqs]
    assert first == [b.fault_for(r) for r in reqs]  # reproducible (no process-salted hash)
    assert first != [FaultyJudge(a.inner, rate=0.2, seed=1).fault_for(r) for r in reqs]
    retry = [a.fault_for(PairRequest(r.prompt, r.a, r.b, r.sample, attempt=1)) for r in reqs]
    assert retry != first  # a retry is a fresh draw: it can succeed
    # request-level kinds share rate − P(batch raise); all three occur, in equal shares
    got = {k: first.count(k) / len(reqs) for k in ("timeout", "malformed", "nan")}
    want = a.p_request / 3
    assert all(abs(v - want) < 0.02 for v in got.values()), got


def test_each_attempt_of_a_request_is_faulted_with_probability_rate():
    reqs = pair_requests()
    judge = FaultyJudge(judges.get("calibrated"), rate=0.2, seed=3)
    faulted = batches = 0
    for k in range(0, len(reqs), 20):
        batch = reqs[k : k + 20]
        batches += 1
        try:
            replies = judge.judge_pairs(batch)
        except InjectedJudgeError:
            faulted += len(batch)
            continue
        bad = [x for x in replies if isinstance(x, JudgeFailure) or not math.isfinite(x.score_a)]
        faulted += len(bad)
    assert judge.faulted == faulted and judge.raised_batches > 0
    assert abs(faulted / len(reqs) - 0.2) < 0.03
    assert set(judge.by_kind) == set(KINDS)


def test_faulty_replies_look_like_real_ones_and_unfaulted_ones_are_the_inner_judges():
    inner = judges.get("calibrated")
    reqs = pair_requests(10)
    judge = FaultyJudge(inner, rate=0.5, seed=2, kinds=("timeout", "malformed", "nan"), timeout_s=0.001)
    out = judge.judge_pairs(reqs)
    clean = inner.judge_pairs(reqs)
    for r, got, want in zip(reqs, out, clean, strict=True):
        kind = judge.fault_for(r)
        if kind is None:
            assert got == want
        elif kind == "nan":
            assert isinstance(got, PairJudgment) and math.isnan(got.score_a)
        else:
            prefix = "timeout:" if kind == "timeout" else "malformed verdict:"
            assert isinstance(got, JudgeFailure) and got.reason.startswith(prefix)
    points = [PointRequest(r.prompt, r.a, r.sample) for r in reqs[:50]]
    assert len(judge.score_points(points)) == 50
    always = FaultyJudge(inner, rate=1.0, kinds=("raise",))
    with pytest.raises(InjectedJudgeError):
        always.judge_pairs(reqs[:3])


@pytest.mark.parametrize(
    "kwargs,match",
    [({"kinds": ("oops",)}, "subset of"), ({"kinds": ()}, "non-empty"), ({"rate": 1.5}, r"\[0, 1\]")],
)
def test_bad_fault_settings_are_one_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FaultyJudge(judges.get("calibrated"), **kwargs)


# --------------------------------------------------------------------------- the engine


def test_a_judge_that_always_raises_is_retried_and_counted_not_a_crash():
    groups = simulate_groups(4, 8)
    judge = FaultyJudge(judges.get("calibrated"), rate=1.0, kinds=("raise",))
    out = Engine(judge, max_retries=2).run(rewards.get("round_robin"), groups)
    unique = 4 * 28 * 2
    assert out.stats.failures == unique and out.stats.retries == 2 * unique
    assert judge.faulted == 3 * unique == out.stats.retries + out.stats.failures
    (reason,) = out.stats.failure_reasons
    assert reason.startswith("InjectedJudgeError: injected fault")
    for r in out.results:
        assert not np.any(r.advantage) and f"judge_failures:{28 * 2}" in r.flags


@pytest.mark.parametrize(
    "name", ["round_robin", "seeded_single_elim", "swiss", "pointwise", "prc", "rrc_agr"]
)
def test_engine_every_fault_is_retried_then_counted_and_recovered_groups_are_unchanged(name):
    groups = simulate_groups(48, 8, seed=2)
    clean = Engine(judges.get("calibrated")).run(rewards.get(name), groups)
    judge = FaultyJudge(judges.get("calibrated"), rate=0.2, seed=7)
    out = Engine(judge, max_retries=2).run(rewards.get(name), groups)
    assert judge.faulted > 0
    assert out.stats.retries == judge.by_attempt[0] + judge.by_attempt[1]
    assert out.stats.failures == judge.by_attempt[2]
    kinds = {"untouched": 0, "recovered": 0, "failed": 0}
    for a, b in zip(clean.results, out.results, strict=True):
        if b.failures:
            kinds["failed"] += 1
            assert f"judge_failures:{b.failures}" in b.flags
            continue
        kinds["recovered" if b.retries else "untouched"] += 1
        np.testing.assert_array_equal(a.reward, b.reward)
        np.testing.assert_array_equal(a.advantage, b.advantage)
    assert kinds["recovered"] > 0, kinds  # faults that a retry recovered change nothing


# --------------------------------------------------------------------------- 50 training steps


def run_recorded(*overrides):
    cfg = compose_cfg("reward=seeded_single_elim", "steps=50", *SMALL, *overrides)
    steps = []

    def on_step(step, groups, out):
        steps.append(
            {
                "texts": [tuple(t.text for t in g.trajectories) for g in groups],
                "reward": [r.reward.copy() for r in out.results],
                "failures": [r.failures for r in out.results],
                "retries": [r.retries for r in out.results],
                "flags": [list(r.flags) for r in out.results],
                "stats": out.stats,
            }
        )

    final = train(cfg, progress=False, on_step=on_step)
    return final, steps


@pytest.fixture(scope="module")
def fault_free():
    return run_recorded()


FAULTS = "judge.faults={rate:0.2,seed:11}"


@pytest.mark.slow
def test_50_steps_under_20pct_faults_with_enough_retries_match_the_fault_free_run(fault_free):
    """Every fault recovered (retries 8: a request fails 9 times with P = 0.2⁹): all 50 steps'
    per-group rewards are identical to the fault-free run."""
    _, clean = fault_free
    final, steps = run_recorded(FAULTS, "engine.max_retries=8")
    assert len(steps) == 50 and math.isfinite(final["loss"])
    retries = sum(s["stats"].retries for s in steps)
    assert sum(s["stats"].failures for s in steps) == 0 == final["judge_failures"]
    assert final["judge_faults"] == retries == final["judge_retries"] > 1000  # each fault retried once
    for a, b in zip(clean, steps, strict=True):
        assert a["texts"] == b["texts"]
        for ra, rb in zip(a["reward"], b["reward"], strict=True):
            np.testing.assert_array_equal(ra, rb)
    assert sum(sum(r > 0 for r in s["retries"]) for s in steps) > 100  # many groups were hit


@pytest.mark.slow
def test_50_steps_under_20pct_faults_count_final_failures_and_spare_unaffected_groups(fault_free):
    """Default retries (2): the run completes; every fault is a retry or, on the last attempt, a
    counted failure flagged on its group; until the policies diverge (the first step with a final
    failure, included) every group without a final failure has the fault-free rewards."""
    _, clean = fault_free
    final, steps = run_recorded(FAULTS)
    assert len(steps) == 50 and math.isfinite(final["loss"])
    retries = sum(s["stats"].retries for s in steps)
    failures = sum(s["stats"].failures for s in steps)
    assert failures > 0 and final["judge_failures"] == failures and final["judge_retries"] == retries
    assert final["judge_faults"] == retries + failures  # every injected fault: retried or counted
    for s in steps:
        for f, flags in zip(s["failures"], s["flags"], strict=True):
            assert (f"judge_failures:{f}" in flags) == (f > 0)
    first = next(k for k, s in enumerate(steps) if s["stats"].failures)
    compared = 0
    for a, b in zip(clean[: first + 1], steps[: first + 1], strict=True):
        assert a["texts"] == b["texts"]  # same policy so far
        for ra, rb, f in zip(a["reward"], b["reward"], b["failures"], strict=True):
            if f == 0:
                np.testing.assert_array_equal(ra, rb)
                compared += 1
    assert compared > 0


def test_faults_are_configured_from_the_judge_config():
    cfg = compose_cfg("steps=2", *SMALL, "judge.faults={rate:0.5,seed:1,kinds:[nan]}")
    final = train(cfg, progress=False)
    assert final["judge_faults"] > 0 and final["judge_retries"] > 0
    with pytest.raises(ValueError, match="subset of"):
        train(compose_cfg("steps=1", *SMALL, "judge.faults={kinds:[oops]}"), progress=False)
