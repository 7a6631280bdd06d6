"""ArenaRewardManager inside verl's real RewardLoopWorker, on a batch shaped as verl builds it."""

import asyncio

import numpy as np
import pytest
import torch
from helpers import PROMPT_LEN, expected_group, logging_worker, verl_batch

from arenabench.trainers.verl import launch
from arenabench.trainers.verl.reward_manager import ArenaRewardManager
from arenabench.trainers.verl.scoring import EXTRA_KEYS


@pytest.fixture
def worker(smoke_env):
    """verl's RewardLoopWorker (the class its Ray actor runs) on the composed smoke config: it
    loads our manager through reward.reward_manager.source=importlib, as the trainer does."""
    from verl.experimental.reward_loop import RewardLoopWorker

    cfg = launch.compose("smoke", ["arenabench.timeout_s=30", "arenabench.log_metrics=false"])
    return RewardLoopWorker(cfg)


def test_worker_loads_our_manager(worker):
    assert type(worker.reward_manager) is ArenaRewardManager
    assert worker.reward_manager.scorer.constructor.name == "seeded_single_elim"


def test_rewards_sit_on_last_valid_token_and_equal_the_constructor(worker, tokenizer):
    data, rows = verl_batch(tokenizer)
    # what RewardLoopManager.compute_rm_score does with one worker: all samples, concurrently
    outputs = asyncio.run(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    rm = ArenaRewardManager.assemble_rm_scores(data, scores)
    assert rm.shape == data.batch["responses"].shape

    valid = data.batch["attention_mask"][:, PROMPT_LEN:].sum(-1)
    for p in (0, 1):
        idx, res = expected_group(tokenizer, data, rows, p)
        assert res.judge_calls == 12  # seeded single-elim, N = 4: 2N - 2 = 6 comparisons x 2 orders
        for k, b in enumerate(idx):
            nz = torch.nonzero(rm[b]).flatten().tolist()
            if res.advantage[k] != 0:
                assert nz == [int(valid[b]) - 1]
            else:
                assert nz == []
            assert rm[b, int(valid[b]) - 1].item() == pytest.approx(res.advantage[k], abs=1e-6)
            info = outputs[b]["reward_extra_info"]
            assert info["arena_rank_reward"] == pytest.approx(res.reward[k])
            assert info["arena_judge_calls"] == res.judge_calls
        np.testing.assert_allclose(sorted(rm[idx].sum(-1).tolist()), sorted(res.advantage), atol=1e-6)
    # verl stacks reward_extra_info per key across samples: every sample has the same keys
    assert all(tuple(o["reward_extra_info"]) == EXTRA_KEYS for o in outputs)
    # both groups were ready together: one engine run, one judge batch per wave
    assert worker.reward_manager.barrier.stats.flushes == 1
    assert worker.reward_manager.scorer.runs == 1


def test_streaming_calls_of_one_sample_each(worker, tokenizer):
    """The agent-loop path: one compute_score call per response, in any order."""
    data, rows = verl_batch(tokenizer)
    order = [5, 0, 7, 2, 1, 6, 3, 4]

    async def stream():
        return await asyncio.gather(*(worker.compute_score(data[b : b + 1]) for b in order))

    outs = dict(zip(order, asyncio.run(stream()), strict=True))
    for p in (0, 1):
        idx, res = expected_group(tokenizer, data, rows, p)
        got = [outs[b]["reward_score"] for b in idx]
        np.testing.assert_allclose(got, res.advantage, atol=1e-9)


def test_judge_accounting_reaches_the_mlflow_run(smoke_env, tokenizer, tmp_path, monkeypatch):
    """With MLFLOW_RUN_ID set (the launcher sets it), the reward worker appends the step's
    cumulative judge calls to the run, under the local trainer's metric names."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = launch.compose("smoke", [f"arenabench.tracking_uri={uri}"])
    worker, uri, run_id = logging_worker(cfg, monkeypatch)
    data, _ = verl_batch(tokenizer)
    data.non_tensor_batch["global_steps"] = np.full(len(data), 3)  # v1 sends it with every sample
    asyncio.run(worker.compute_score_batch(data))
    client = MlflowClient(uri)
    calls = client.get_metric_history(run_id, "judge_calls")
    assert [(m.step, m.value) for m in calls] == [(3, 24.0)]  # 2 groups x 12
    assert client.get_metric_history(run_id, "arena/zero_adv_share")[0].value == 0.0
