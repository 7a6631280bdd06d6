"""The engine's named per-step state, results built complete once, the shared constructor
pieces, and the ``bind_reference`` hook (issue 12)."""

import ast
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from arenabench import Engine, judges, rewards
from arenabench.engine import GroupRun, StepRun
from arenabench.rewards.base import Outcome
from arenabench.rewards.brackets import single_elimination
from arenabench.rewards.bradley_terry import evidence, observations, unit_reward
from arenabench.rewards.failures import split_failures
from arenabench.rewards.reference import SimulatedReference
from arenabench.sim import simulate_groups
from arenabench.types import Accounting, ConstructorResult, MatchResult

ROOT = Path(__file__).resolve().parents[1]


def test_step_run_plays_every_group_in_waves_then_finishes():
    groups = simulate_groups(3, 8, seed=1)
    run = StepRun(Engine(judges.get("noiseless")), rewards.get("seeded_single_elim"), groups, step=0)
    assert set(run.playing) == {0, 1, 2}
    assert all(isinstance(r, GroupRun) and len(r.asks) == 7 for r in run.playing.values())  # anchor phase
    with pytest.raises(RuntimeError, match="still playing"):
        run.finish()
    waves = 0
    while run.playing:
        run.send_wave()
        waves += 1
    out = run.finish()
    assert waves == out.stats.waves == 1 + 3  # seeding, then log2(8) bracket rounds
    assert all(isinstance(r, ConstructorResult) and r.waves == waves for r in out.results)


def test_step_run_matches_engine_run():
    groups = simulate_groups(4, 5, seed=2)
    c = rewards.get("swiss")
    a = Engine(judges.get("calibrated"), seed=3).run(c, groups, step=2)
    run = StepRun(Engine(judges.get("calibrated"), seed=3), c, groups, step=2)
    while run.playing:
        run.send_wave()
    b = run.finish()
    assert a.stats == b.stats
    for x, y in zip(a.results, b.results, strict=True):
        assert np.array_equal(x.advantage, y.advantage) and x.flags == y.flags


def test_finalize_builds_the_result_with_its_accounting_and_flags():
    c = rewards.get("round_robin")
    group = simulate_groups(1, 3)[0]
    acc = Accounting(comparisons=3, judge_calls=7, waves=1, failures=2, retries=1)
    res = c.finalize(group, Outcome(rank=np.array([0.0, 1.0, 2.0]), flags=["x"]), acc)
    assert (res.comparisons, res.judge_calls, res.waves, res.failures, res.retries) == (3, 7, 1, 2, 1)
    assert res.flags == ["x", "judge_failures:2"]
    bare = c.finalize(group, Outcome(rank=np.array([0.0, 1.0, 2.0])))
    assert (bare.comparisons, bare.judge_calls, bare.failures) == (0, 0, 0) and bare.flags == []


def test_split_failures_keeps_order_and_counts_failed():
    ok1 = MatchResult(0, 1, 5.0, 3.0)
    bad = MatchResult(1, 2, float("nan"), float("nan"), failed=True)
    ok2 = MatchResult(0, 2, 1.0, 2.0)
    assert split_failures([ok1, bad, ok2]) == ([ok1, ok2], 1)
    assert split_failures([]) == ([], 0)


def test_observations_fall_back_to_verdicts_only_when_asked_for_probabilities():
    with_p = MatchResult(0, 1, 5.0, 3.0, samples=[(5.0, 3.0)], probs=[0.7])
    without = MatchResult(1, 2, 2.0, 4.0, samples=[(2.0, 4.0)])
    failed = MatchResult(0, 2, float("nan"), float("nan"), failed=True)
    obs, n_failed, fallback = observations([with_p, without, failed], gamma=0.9, probs=True)
    assert obs == [(0, 1, 0.7), (1, 2, pytest.approx(0.1))] and (n_failed, fallback) == (1, 1)
    obs, _, fallback = observations([with_p, without], gamma=0.9)
    assert obs == [(0, 1, 0.9), (1, 2, pytest.approx(0.1))] and fallback == 0
    seen = evidence(4, obs)
    assert seen.tolist() == [True, True, True, False]
    reward = unit_reward(np.array([1.0, 3.0, 2.0, 9.0]), seen)
    assert reward[:3].tolist() == [0.0, 1.0, 0.5] and np.isnan(reward[3])


def test_single_elimination_gives_byes_to_top_seeds_and_returns_depth_and_champion():
    """5 players (seeds 0..4 best first): seed 0 wins every game it plays; lower index wins."""
    history: list = []
    flags: Counter = Counter()
    play = single_elimination(rewards.get("seeded_single_elim"), [0, 1, 2, 3, 4], history, flags)
    asks = next(play)
    rounds = 0
    try:
        while True:
            rounds += 1
            asks = play.send(
                [MatchResult(a.i, a.j, *((1.0, 0.0) if a.i < a.j else (0.0, 1.0))) for a in asks]
            )
    except StopIteration as stop:
        depth, champion = stop.value
    assert champion == 0 and rounds == 3 and len(history) == 4  # N - 1 games
    assert depth.tolist() == [4, 3, 2, 2, 1] and not flags  # seed 4 plays (and loses) round 1 only


class _Policy:
    def generate(self, group, n, generation=0):
        return SimulatedReference(seed=7).generate(group, n, generation)


def test_bind_reference_sets_agr_pool_policy_and_adaptive_forwards_it():
    policy = _Policy()
    agr = rewards.get("rrc_agr")
    agr.bind_reference(policy)
    assert agr.pool.policy is policy
    routed = rewards.get("adaptive", tournament="rrc_agr")
    routed.bind_reference(policy)
    assert routed._inner.pool.policy is policy
    rewards.get("round_robin").bind_reference(policy)  # default: nothing to bind
    rewards.get("adaptive").bind_reference(policy)


def test_bind_reference_leaves_a_named_non_simulated_reference_alone():
    agr = rewards.get("rrc_agr")
    agr.reference = "some_stored_policy"  # as if built with another registered reference
    before = agr.pool.policy
    agr.bind_reference(_Policy())
    assert agr.pool.policy is before


def test_anchor_pool_module_does_not_import_the_simulator():
    tree = ast.parse((ROOT / "arenabench" / "rewards" / "reference.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("arenabench.sim") for m in imported)
