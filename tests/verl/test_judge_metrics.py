"""verl's reward worker logs the judge stack's outage and token counters per training step, under
the local trainer's names (issue 29): through verl's real ``RewardLoopWorker`` against the served
test judge (``arenabench/judges/stub_server.py``, a real server process) that fails posts with
503 or is dead, read back from the sqlite MLflow store."""

import asyncio

import numpy as np
import pytest
from helpers import logging_worker, verl_batch

from arenabench.judges.stack import TOKEN_METRICS
from arenabench.judges.stub_server import ServerProcess, free_port
from arenabench.trainers.verl import launch

pytest.importorskip("aiohttp")

PER_STEP = (
    "judge_backend_calls",
    "judge_answered",
    "judge_resent",
    "judge_outage_s",
    "judge_lost",
    "outage_groups",
    *TOKEN_METRICS,
    "judge_latency_p50",
    "judge_latency_p90",
)


def _served_worker(url, tmp_path, monkeypatch, smoke_env, extra=()):
    cfg = launch.compose(
        "smoke",
        [
            f"arenabench.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
            "judge=openai",
            f"arenabench.judge.base_urls={url}",
            "arenabench.judge.model=stub",
            "arenabench.judge.max_concurrency=4",
            "+arenabench.judge.backoff_s=0.05",
            "+arenabench.judge.max_backoff_s=0.2",
            *extra,
        ],
    )
    return logging_worker(cfg, monkeypatch)


def _step(worker, tokenizer, step):
    data, _ = verl_batch(tokenizer, uids=(f"a{step}", f"b{step}"))  # new groups each step
    data.non_tensor_batch["global_steps"] = np.full(len(data), step)
    return asyncio.run(worker.compute_score_batch(data))


def _points(uri, run_id, key):
    from mlflow.tracking import MlflowClient

    return {m.step: m.value for m in MlflowClient(uri).get_metric_history(run_id, key)}


def test_outage_and_token_counters_are_logged_per_step(smoke_env, tokenizer, tmp_path, monkeypatch):
    with ServerProcess(free_port(), log=tmp_path / "answered.log", extra=("--fail-first", "3")) as srv:
        worker, uri, run_id = _served_worker(srv.url, tmp_path, monkeypatch, smoke_env)
        _step(worker, tokenizer, 1)  # the server's first 3 posts get 503: resent, then answered
        _step(worker, tokenizer, 2)
    got = {k: _points(uri, run_id, k) for k in (*PER_STEP, "judge_calls", "judge_failures")}
    for key in PER_STEP:
        assert sorted(got[key]) == [1, 2], key
    calls = got["judge_calls"]  # cumulative engine requests: this step's = calls[2] - calls[1]
    asked = {1: calls[1], 2: calls[2] - calls[1]}
    # K groups x (2N - 3) matches x 2 orders: a temperature-0 judge, so anchor_seed=auto plays record
    assert asked[1] == asked[2] == 2 * (2 * 4 - 3) * 2
    assert got["judge_failures"] == {1: 0.0, 2: 0.0}
    for s in (1, 2):
        # every engine request answered once; every post answered, resent or lost
        assert got["judge_answered"][s] == asked[s]
        assert got["judge_backend_calls"][s] == (
            got["judge_answered"][s] + got["judge_resent"][s] + got["judge_lost"][s]
        )
        assert got["judge_lost"][s] == 0 and got["outage_groups"][s] == 0
        assert got["judge_prompt_tokens"][s] > 0 and got["judge_completion_tokens"][s] > 0
        assert 0 < got["judge_latency_p50"][s] <= got["judge_latency_p90"][s]
    assert (got["judge_resent"][1], got["judge_resent"][2]) == (3, 0)  # per step, not cumulative
    assert got["judge_outage_s"][1] > 0 and got["judge_outage_s"][2] == 0
    for name in TOKEN_METRICS:  # the run's bill: the per-step counts add up to the totals
        total = _points(uri, run_id, f"{name}_total")
        assert total == {1: got[name][1], 2: got[name][1] + got[name][2]}, name


def test_a_dead_judge_loses_requests_and_masks_the_groups(smoke_env, tokenizer, tmp_path, monkeypatch):
    port = free_port()  # nothing listens there: every post is refused
    worker, uri, run_id = _served_worker(
        f"http://127.0.0.1:{port}",
        tmp_path,
        monkeypatch,
        smoke_env,
        ["arenabench.judge.retries=1", "+arenabench.judge.outage_deadline_s=0.3"],
    )
    outputs = _step(worker, tokenizer, 1)
    assert all(o["reward_score"] == 0.0 for o in outputs)  # masked: no group scored on no evidence
    got = {k: _points(uri, run_id, k) for k in PER_STEP}
    assert got["outage_groups"] == {1: 2.0}
    assert got["judge_answered"] == {1: 0.0} and got["judge_lost"][1] > 0
    assert got["judge_backend_calls"][1] == got["judge_resent"][1] + got["judge_lost"][1]
    assert got["judge_outage_s"][1] > 0
    assert got["judge_prompt_tokens"] == {1: 0.0}  # nothing answered, nothing billed
