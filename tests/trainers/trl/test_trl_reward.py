"""The TRL reward adapter without TRL: group recovery, equality with the engine, None for failed
groups, metrics through the ``log_metric`` hook, the async path, cache and faults.
(``test_trl_train.py`` runs the real ``GRPOTrainer``.)"""

import asyncio
import math
import threading
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from arenabench import rewards
from arenabench.advantages import mask_unreliable
from arenabench.engine import Engine
from arenabench.judges import FailingJudge
from arenabench.trainers.scoring import judge_stack
from arenabench.trainers.trl import ArenaReward, GroupLayoutError, recover_groups

WORDS = ["red", "green", "blue", "gold", "pink", "grey", "white", "black"]


def batch(k=2, g=4, seed=0):
    """TRL's flat layout: each prompt ``g`` times in a row, a ground-truth column."""
    rng = np.random.default_rng(seed)
    prompts, completions, answers = [], [], []
    for p in range(k):
        answer = " ".join(WORDS[(p + j) % len(WORDS)] for j in range(3))
        for _ in range(g):
            prompts.append(f"copy: {answer}")
            completions.append(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 5)))))
            answers.append(answer)
    return prompts, completions, answers


class Log:
    def __init__(self):
        self.metrics, self.extra = {}, {}

    def metric(self, name, value):
        self.metrics.setdefault(name, []).append(value)

    def extra_col(self, column, values):
        self.extra[column] = list(values)


def test_recover_groups_chunks_by_num_generations():
    prompts = ["a"] * 4 + ["b"] * 4 + ["a"] * 4  # a repeated prompt later on is its own group
    assert recover_groups(prompts, 4) == [range(0, 4), range(4, 8), range(8, 12)]
    chat = [[{"role": "user", "content": "x"}]] * 2 + [[{"role": "user", "content": "y"}]] * 2
    assert recover_groups(chat, 2) == [range(0, 2), range(2, 4)]


@pytest.mark.parametrize(
    "prompts, g, match",
    [
        (["a"] * 3 + ["b"] * 5, 4, "chunk 0 .* mixes 2 prompts"),  # a chunk mixing two prompts
        (["a", "b"] * 4, 4, "chunk 0 .* mixes 2 prompts"),  # interleaved, not repeated
        (["a"] * 4 + ["b"] * 4, 8, "chunk 0 .* mixes 2 prompts"),  # num_generations too large
        (["a"] * 6, 4, "not whole groups of 4"),
        ([], 4, "not whole groups"),
    ],
)
def test_broken_layout_is_one_clear_error(prompts, g, match):
    with pytest.raises(GroupLayoutError, match=match):
        recover_groups(prompts, g)
    reward = ArenaReward("round_robin", num_generations=g)
    with pytest.raises(GroupLayoutError, match="GRPOConfig.num_generations"):
        reward.score(prompts, ["x"] * len(prompts))
    assert reward.calls == 0 and reward.stack.stats["calls"] == 0  # nothing was judged


@pytest.mark.parametrize("name", ["seeded_single_elim", "round_robin", "anchor", "pointwise", "swiss"])
@pytest.mark.parametrize("output", ["advantage", "reward"])
def test_values_equal_a_fresh_engine_on_the_same_groups(name, output):
    prompts, completions, answers = batch(k=3, g=4)
    reward = ArenaReward(
        name, {"kind": "simulated", "preset": "calibrated"}, num_generations=4, seed=7, output=output
    )
    values = reward.score(prompts, completions, ground_truth=answers)
    call = reward.history[-1]
    assert len(values) == 12 and len(call.groups) == 3
    assert all(
        len(g) == 4 and len({prompts[i] for i in range(4 * k, 4 * k + 4)}) == 1
        for k, g in enumerate(call.groups)
    )
    stack, _ = judge_stack({"kind": "simulated", "preset": "calibrated"})
    fresh = Engine(stack, seed=7).run(rewards.build({"name": name}), call.groups, step=call.step)
    want = np.concatenate([r.advantage if output == "advantage" else r.reward for r in fresh.results])
    got = np.array([np.nan if v is None else v for v in values])
    ranked = ~np.isnan(np.concatenate([r.rank for r in fresh.results]))
    assert np.allclose(got[ranked], want[ranked])
    assert np.isnan(got[~ranked]).all()
    assert fresh.stats.judge_calls == call.stats.judge_calls


def test_one_judge_batch_per_wave_across_groups():
    prompts, completions, answers = batch(k=4, g=8)
    reward = ArenaReward("seeded_single_elim", num_generations=8)
    reward.score(prompts, completions, ground_truth=answers)
    stats = reward.history[-1].stats
    assert stats.groups == 4 and stats.waves == 4  # 1 + log2 8
    assert stats.judge_batches == stats.waves  # no retries: one batch per wave for all 4 groups


def test_failed_groups_return_none_with_counts_and_no_tie():
    prompts, completions, answers = batch(k=2, g=4)
    reward = ArenaReward("seeded_single_elim", FailingJudge(), num_generations=4)
    log = Log()
    values = reward.score(
        prompts, completions, ground_truth=answers, log_metric=log.metric, log_extra=log.extra_col
    )
    assert values == [None] * 8
    m = {k: v[-1] for k, v in log.metrics.items()}
    assert m["arena/masked_groups"] == 2 and m["arena/none_rewards"] == 8
    assert m["arena/failures"] > 0 and m["arena/judge_calls"] == m["arena/failures"] * 3  # 2 retries each
    assert log.extra["arena_masked"] == [1.0] * 8


def test_faults_rate_one_through_the_config_and_masking_threshold():
    prompts, completions, answers = batch(k=2, g=4)
    judge = {"kind": "simulated", "faults": {"rate": 1.0, "seed": 0}}
    reward = ArenaReward("round_robin", judge, num_generations=4)
    assert reward.score(prompts, completions, ground_truth=answers) == [None] * 8
    assert reward.history[-1].metrics["arena/judge_faults"] > 0
    # max_failed_share=None never masks: the constructor's fallback advantages (all 0 here) come back
    lenient = ArenaReward("round_robin", judge, num_generations=4, max_failed_share=None)
    values = lenient.score(prompts, completions, ground_truth=answers)
    advs, masked = mask_unreliable(lenient.history[-1].results, None)
    assert masked == 0 and all(v is None or v == 0.0 for v in values)


def test_masking_follows_mask_unreliable():
    prompts, completions, answers = batch(k=6, g=4, seed=3)
    judge = {"kind": "simulated", "faults": {"rate": 0.6, "seed": 1}}
    reward = ArenaReward("round_robin", judge, num_generations=4, max_retries=0)
    values = reward.score(prompts, completions, ground_truth=answers)
    call = reward.history[-1]
    advs, masked = mask_unreliable(call.results, 0.25)
    assert sum(call.masked) == masked > 0
    for k, adv in enumerate(advs):
        vals = values[4 * k : 4 * k + 4]
        if call.masked[k]:
            assert vals == [None] * 4
        else:
            assert [0.0 if v is None else v for v in vals] == pytest.approx(list(adv))


def test_metrics_reach_log_metric_and_totals_accumulate(tmp_path):
    prompts, completions, answers = batch(k=2, g=4)
    cache = tmp_path / "judgments.sqlite"
    reward = ArenaReward("seeded_single_elim", {"kind": "simulated", "cache": str(cache)}, num_generations=4)
    log = Log()
    for step in range(2):  # the same batch twice: the second call is served by the cache
        state = SimpleNamespace(global_step=step)
        reward.score(prompts, completions, ground_truth=answers, trainer_state=state, log_metric=log.metric)
    m = log.metrics
    for key in (
        "arena/judge_calls",
        "arena/failures",
        "arena/waves",
        "arena/routed_share",
        "arena/cache_hits",
        "arena/masked_groups",
        "arena/none_rewards",
        "arena/judge_calls_total",
    ):
        assert len(m[key]) == 2, key
    # within a call the bracket re-asks pairs the seeding round judged (hits); the rerun is all hits
    assert m["arena/cache_hits"][0] < m["arena/judge_calls"][0]
    assert m["arena/cache_hits"][1] == m["arena/judge_calls"][1] > 0 and m["arena/cache_misses"][1] == 0
    assert m["arena/judge_calls_total"][1] == m["arena/judge_calls"][0] + m["arena/judge_calls"][1]
    assert m["arena/routed_share"] == [1.0, 1.0] and m["arena/waves"] == [3.0, 3.0]
    q = [t.meta["quality"] for g in reward.history[-1].groups for t in g.trajectories]  # overlap quality
    assert m["arena/true_quality"][-1] == pytest.approx(np.mean(q)) and -2 <= min(q) <= max(q) <= 2
    assert [c.step for c in reward.history] == [0, 1]


def test_async_call_runs_the_engine_off_the_event_loop():
    prompts, completions, answers = batch(k=2, g=4)
    reward = ArenaReward("round_robin", num_generations=4)
    threads = []
    run = reward._run

    def spy(*a):
        threads.append(threading.current_thread().name)
        return run(*a)

    reward._run = spy

    async def main():
        ticks = 0

        async def ticker():  # the loop keeps running while the judge works
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        out = await reward(prompts=prompts, completions=completions, ground_truth=answers)
        t.cancel()
        return out, ticks

    values, ticks = asyncio.run(main())
    reward.close()
    assert threads and threads[0].startswith("arena-judge") and ticks > 0
    assert values == reward.score(prompts, completions, ground_truth=answers)


def test_trl_sees_an_async_callable_with_a_name():
    reward = ArenaReward("seeded_single_elim", num_generations=4)
    assert asyncio.iscoroutinefunction(reward.__call__) and reward.__name__ == "arena_seeded_single_elim"


def test_check_config():
    reward = ArenaReward("anchor", num_generations=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reward.check_config(
            SimpleNamespace(num_generations=4, num_generations_eval=None, scale_rewards="none")
        )
    with pytest.raises(GroupLayoutError, match="num_generations_eval=8"):
        reward.check_config(SimpleNamespace(num_generations=4, num_generations_eval=8, scale_rewards="none"))
    with pytest.warns(UserWarning, match="scale_rewards='none'"):
        reward.check_config(SimpleNamespace(num_generations=4, scale_rewards="group"))
    with pytest.raises(ValueError, match="output"):
        ArenaReward("anchor", num_generations=4, output="rank")


def test_anchor_none_refuses_anchor_constructors():
    prompts, completions, answers = batch(k=1, g=4)
    with pytest.raises(ValueError, match="needs a greedy anchor"):
        ArenaReward("anchor", num_generations=4, anchor="none").score(prompts, completions)
    assert not math.isnan(
        ArenaReward("round_robin", num_generations=4, anchor="none").score(prompts, completions)[0]
    )


def test_judge_health_reaches_log_metric():
    """Position consistency, tie, cycle and failure rates of the call's comparisons (issue 18),
    as ``diagnostics.health_metrics`` computes them from the engine's step stats."""
    from arenabench.diagnostics import HEALTH_COUNTS, HEALTH_METRICS, health_metrics

    prompts, completions, answers = batch(k=2, g=4)
    reward = ArenaReward("round_robin", {"kind": "simulated"}, num_generations=4)
    log = Log()
    reward.score(prompts, completions, ground_truth=answers, log_metric=log.metric)
    expected = health_metrics(reward.history[-1].stats)
    for key in (*HEALTH_METRICS, *HEALTH_COUNTS):
        assert log.metrics[f"arena/{key}"] == [expected[key]], key
    assert expected["judge_matches"] == expected["judge_bidirectional"] > 0  # 2 groups × 6 pairs, both orders
    assert 0.0 <= expected["judge_consistency"] <= 1.0 and expected["judge_failure_rate"] == 0.0


def test_constant_quality_is_a_judge_blind_to_the_task():
    """``quality: constant`` (the learning study's control): every completion has hidden quality 0,
    so the judge's verdicts carry no information about the task — yet it still judges every match
    (the tournament ranks its noise), so training takes steps of the same scale."""
    from arenabench.trainers.scoring import hidden_quality

    assert hidden_quality("overlap", "red green", "red green") == 2.0
    assert hidden_quality("overlap", "gold", "red") == -2.0
    assert hidden_quality("constant", "red green", "red green") == 0.0
    with pytest.raises(ValueError, match="overlap, hash, constant"):
        hidden_quality("f1", "red", "red")
    prompts, completions, answers = batch(k=2, g=4)
    judge = {"kind": "simulated", "preset": "calibrated", "quality": "constant"}
    reward = ArenaReward("round_robin", judge, num_generations=4)
    values = reward.score(prompts, completions, ground_truth=answers)
    call = reward.history[-1]
    assert {t.meta["quality"] for g in call.groups for t in g.trajectories} == {0.0}
    assert call.metrics["arena/true_quality"] == 0.0  # the judge's hidden quality, not the task's
    assert call.stats.judge_calls == 2 * 2 * 6 and None not in values and np.std(values) > 0
