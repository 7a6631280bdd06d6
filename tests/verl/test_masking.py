"""Flag-aware rewards in verl: a group whose judge requests mostly failed gets reward_score 0 for
every member (arenabench.max_failed_share, shared ``mask_unreliable``), flagged and counted."""

import asyncio

import numpy as np
import pytest
from helpers import verl_batch

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE
from arenabench.engine import Engine
from arenabench.judges import FailingJudge, FaultyJudge
from arenabench.trainers.verl import launch
from arenabench.trainers.verl.barrier import ReadyGroup
from arenabench.trainers.verl.reward_manager import DEFAULTS, arena_options
from arenabench.trainers.verl.scoring import EXTRA_KEYS, ArenaScorer, Response


def test_the_option_defaults_to_the_shared_threshold_and_is_read_from_the_config():
    assert DEFAULTS["max_failed_share"] == DEFAULT_MAX_FAILED_SHARE == 0.25
    assert arena_options({"arenabench": {"max_failed_share": None}})["max_failed_share"] is None
    assert arena_options({})["max_failed_share"] == 0.25


def ready(uid, n=8):
    texts = [f"{uid} answer {k} " + "word " * k for k in range(n)]
    return ReadyGroup(uid, n, [Response(t, f"prompt {uid}", len(t.split())) for t in texts])


@pytest.mark.parametrize("threshold", [0.25, None])
def test_scorer_masks_groups_over_the_threshold(threshold):
    s = ArenaScorer(
        {"name": "seeded_single_elim"},
        {"kind": "simulated", "preset": "calibrated", "quality": "hash"},
        max_failed_share=threshold,
    )
    # 20% malformed verdicts and no retries: some groups lose more than a quarter of their requests
    s.engine = Engine(FaultyJudge(s.judge, rate=0.2, seed=1, kinds=["malformed"]), max_retries=0)
    groups = [ready(f"g{k}") for k in range(12)]
    unmasked = Engine(FaultyJudge(s.judge, rate=0.2, seed=1, kinds=["malformed"]), max_retries=0).run(
        s.constructor, [s._group(g) for g in groups]
    )
    out = s(groups)
    n_masked = 0
    for res, per in zip(unmasked.results, out, strict=True):
        share = res.failures / (res.judge_calls - res.retries)
        masked = threshold is not None and share > threshold
        n_masked += masked
        got = [m["reward_score"] for m in per]
        np.testing.assert_allclose(got, np.zeros(8) if masked else res.advantage, atol=1e-12)
        assert all(m["reward_extra_info"]["arena_masked"] == float(masked) for m in per)
        assert all(tuple(m["reward_extra_info"]) == EXTRA_KEYS for m in per)
        # the rest of the group's record is kept: ranks, rewards, failures
        assert [m["reward_extra_info"]["arena_rank_reward"] for m in per] == pytest.approx(list(res.reward))
    assert s.masked_groups == n_masked
    if threshold is not None:
        assert 0 < n_masked < len(groups)


def test_worker_with_a_failing_judge_hands_out_zero_rewards(smoke_env, tokenizer):
    """verl's real RewardLoopWorker: every judge call fails, the tournament still ranks by its
    fallback rule, the manager masks both groups and counts them."""
    from verl.experimental.reward_loop import RewardLoopWorker

    cfg = launch.compose("smoke", ["arenabench.timeout_s=30", "arenabench.log_metrics=false"])
    assert cfg.arenabench.max_failed_share == 0.25  # conf/verl/base.yaml
    worker = RewardLoopWorker(cfg)
    manager = worker.reward_manager
    manager.scorer.engine = Engine(FailingJudge(), max_retries=1)
    data, _ = verl_batch(tokenizer)
    outputs = asyncio.run(worker.compute_score_batch(data))
    assert [o["reward_score"] for o in outputs] == [0.0] * len(outputs)
    assert all(o["reward_extra_info"]["arena_masked"] == 1.0 for o in outputs)
    assert all(o["reward_extra_info"]["arena_failures"] > 0 for o in outputs)
    assert manager.scorer.masked_groups == 2


def test_engine_schedule_reaches_the_scorer_from_the_verl_config():
    """``arenabench.schedule`` / ``max_inflight`` (conf/verl/base.yaml) configure the scorer's engine;
    ``auto`` keeps the simulated judge in lockstep; a bad value names the choices."""
    cfg = launch.compose("smoke", ["arenabench.schedule=pipelined", "arenabench.max_inflight=8"])
    opts = arena_options(cfg)
    assert (DEFAULTS["schedule"], opts["schedule"], opts["max_inflight"]) == ("auto", "pipelined", 8)
    judge = {"kind": "simulated", "preset": "calibrated", "quality": "hash"}
    s = ArenaScorer({"name": "seeded_single_elim"}, judge, schedule="pipelined", max_inflight=8)
    assert s.engine.resolved_schedule == "pipelined" and s.engine.inflight_limit == 8
    assert ArenaScorer({"name": "seeded_single_elim"}, judge).engine.resolved_schedule == "lockstep"
    groups = [ready(f"g{k}") for k in range(3)]
    lock = ArenaScorer({"name": "seeded_single_elim"}, judge)(groups)
    pipe = s(groups)
    assert [[o["reward_score"] for o in g] for g in pipe] == [[o["reward_score"] for o in g] for g in lock]
    with pytest.raises(ValueError, match="lockstep, pipelined, auto"):
        ArenaScorer({"name": "seeded_single_elim"}, judge, schedule="eager")
