"""The verl scorer builds its judge through JudgeStack: judge.cache and judge.faults work as in
the local trainer (a cached rerun pays no judge call; faults are injected, retried and counted)."""

import asyncio

import numpy as np
import pytest
from helpers import expected_group, logging_worker, verl_batch

from arenabench.trainers.scoring import judge_stack
from arenabench.trainers.verl import launch
from arenabench.trainers.verl.barrier import ReadyGroup
from arenabench.trainers.verl.scoring import ArenaScorer, Response

PROMPTS = {"a": ("copy: red green blue", "red green blue"), "b": ("copy: gold pink", "gold pink")}
TEXTS = {
    "a": ["red green blue", "red blue", "black white grey orange", "red green"],
    "b": ["gold pink", "pink", "gold gold gold pink brown", "blue"],
}
JUDGE = {"kind": "simulated", "preset": "calibrated", "quality": "overlap"}


def ready_groups():
    return [
        ReadyGroup(
            uid,
            4,
            [
                Response(
                    text=t, prompt=PROMPTS[uid][0], n_tokens=len(t.split()), ground_truth=PROMPTS[uid][1]
                )
                for t in TEXTS[uid]
            ],
        )
        for uid in "ab"
    ]


def scores(results):
    return [[m["reward_score"] for m in group] for group in results]


def test_a_second_identical_run_is_answered_from_the_cache(tmp_path):
    judge = {**JUDGE, "cache": str(tmp_path / "judgments.sqlite")}
    first = ArenaScorer({"name": "round_robin"}, judge)
    got = first(ready_groups())
    assert first.judge.stats["requests"] == 24 and first.stack.stats["cache_misses"] == 24

    again = ArenaScorer({"name": "round_robin"}, judge)  # a restarted reward worker, same file
    assert scores(again(ready_groups())) == scores(got)
    assert again.judge.stats["requests"] == 0 and again.judge.stats["calls"] == 0  # paid nothing
    assert again.stack.stats["cache_hits"] == 24 and again.stack.stats["cache_misses"] == 0
    # and the cache changes nothing: the same rewards as the bare judge
    assert scores(ArenaScorer({"name": "round_robin"}, JUDGE)(ready_groups())) == scores(got)


def test_faults_are_injected_retried_and_counted():
    clean = ArenaScorer({"name": "seeded_single_elim"}, JUDGE)(ready_groups())
    faulty = ArenaScorer(
        {"name": "seeded_single_elim"}, {**JUDGE, "faults": {"rate": 0.3, "seed": 0}}, max_retries=8
    )
    got = faulty(ready_groups())
    assert faulty.stack.stats["faults"] > 0  # injected and counted
    assert faulty.totals["failures"] == 0  # every fault recovered by a retry ...
    np.testing.assert_allclose(scores(got), scores(clean), atol=1e-12)  # ... and changed no reward

    lossy = ArenaScorer({"name": "round_robin"}, {**JUDGE, "faults": {"rate": 0.5, "seed": 0}}, max_retries=0)
    out = lossy(ready_groups())
    failures = sum(group[0]["reward_extra_info"]["arena_failures"] for group in out)
    # with no retry every faulted request is a counted failure (a raised batch fails all of it)
    assert failures == lossy.totals["failures"] == lossy.stack.stats["faults"] > 0


def test_quality_stays_a_verl_key_and_kinds_come_from_judges_build():
    stack, quality = judge_stack({"kind": "simulated", "preset": "noiseless", "quality": "hash"})
    assert quality == "hash" and stack.base.preset == "noiseless"
    with pytest.raises(ValueError, match="registered: simulated, ordinal, vllm, openai"):
        judge_stack({"kind": "vlm"})
    with pytest.raises(ValueError, match="overlap, hash"):
        judge_stack({"kind": "simulated", "quality": "f1"})
    stack, quality = judge_stack({"kind": "openai", "model": "m", "base_urls": "http://a:1, http://b:2/v1"})
    assert quality is None and stack.base.base_urls == ["http://a:1", "http://b:2"]


def test_reward_worker_logs_injected_faults_and_cache_use(smoke_env, tokenizer, tmp_path, monkeypatch):
    """Through verl's real reward worker: the smoke config plus judge.cache and judge.faults."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cache = tmp_path / "judgments.sqlite"
    cfg = launch.compose(
        "smoke",
        [
            f"arenabench.tracking_uri={uri}",
            f"+arenabench.judge.cache={cache}",
            "+arenabench.judge.faults={rate:0.2,seed:0}",
            "arenabench.max_retries=8",
        ],
    )
    worker, uri, run_id = logging_worker(cfg, monkeypatch)
    data, rows = verl_batch(tokenizer)
    data.non_tensor_batch["global_steps"] = np.full(len(data), 1)
    outputs = asyncio.run(worker.compute_score_batch(data))
    for p in (0, 1):  # faults recovered by retries: the fault-free constructor output
        idx, res = expected_group(tokenizer, data, rows, p)
        np.testing.assert_allclose([outputs[b]["reward_score"] for b in idx], res.advantage, atol=1e-9)
    client = MlflowClient(uri)
    faults = client.get_metric_history(run_id, "judge_faults")
    assert len(faults) == 1 and faults[0].value > 0
    # 2 groups x 12 requests (a rematch of an earlier wave's pair is a hit), plus one more lookup
    # per faulted attempt: a failure is never cached
    (hits,) = client.get_metric_history(run_id, "arena/cache_hits")
    (misses,) = client.get_metric_history(run_id, "arena/cache_misses")
    assert hits.value + misses.value == 24 + faults[0].value and cache.exists()
