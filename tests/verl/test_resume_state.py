"""What a resumed verl run needs from the reward worker (the whole loop, SIGKILLed and resumed:
test_cpu_e2e.py): its cumulative counters continue from the checkpoint's step, and AGR's anchor
pool outlives the process — through verl's real reward worker, one worker per "process"."""

import asyncio
import json

import numpy as np
from helpers import logging_worker, verl_batch

from arenabench.rewards.reference import REFERENCE_POLICIES
from arenabench.trainers.scoring import overlap_quality
from arenabench.trainers.verl import launch
from arenabench.trainers.verl.reward_manager import STATE_FILE, restore_counters
from arenabench.types import Trajectory


class PrefixReference:
    """A reference policy for verl's real groups (the simulator's needs simulated prompts): the
    k-th anchor is the answer's first k + 1 words, its quality their overlap with the answer."""

    def generate(self, group, n, generation=0):
        words = str(group.meta["answer"]).split()
        texts = [" ".join(words[: k + 1]) for k in range(n)]
        return [
            Trajectory(
                f"ref{generation}-{k}",
                t,
                len(t.split()),
                {"quality": overlap_quality(t, group.meta["answer"])},
            )
            for k, t in enumerate(texts)
        ]


REFERENCE_POLICIES.register("test_prefix")(PrefixReference)


def score_step(worker, tokenizer, step: int) -> list[float]:
    """Step ``step``'s batch (verl gives every step's prompts fresh uids) through the worker."""
    data, _ = verl_batch(tokenizer, uids=(f"a{step}", f"b{step}"))
    data.non_tensor_batch["global_steps"] = np.full(len(data), step)
    out = asyncio.run(worker.compute_score_batch(data))
    return [o["reward_score"] for o in out]


def test_a_resumed_worker_continues_the_counters_of_its_checkpoint_step(
    smoke_env, tokenizer, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    state = tmp_path / "state"
    common = [f"arenabench.tracking_uri={uri}", f"arenabench.state_dir={state}"]
    first, _, run1 = logging_worker(launch.compose("smoke", common), monkeypatch)
    for step in (1, 2):
        score_step(first, tokenizer, step)
    lines = [json.loads(x) for x in (state / STATE_FILE).read_text().splitlines()]
    assert [(r["step"], r["counters"]["judge_calls"]) for r in lines] == [(1, 24.0), (2, 48.0)]
    # killed after step 2's point, resumed from the step-1 checkpoint: step 2 is redone
    again, _, run2 = logging_worker(
        launch.compose("smoke", [*common, "arenabench.resume_step=1"]), monkeypatch
    )
    assert again.reward_manager.offsets["judge_calls"] == 24.0
    score_step(again, tokenizer, 2)
    client = MlflowClient(uri)
    # the launcher's new run carries the old one's points up to the checkpoint (tracking.continue_run)
    assert client.get_run(run2).data.tags["resumed_from"] == run1
    assert [(m.step, m.value) for m in client.get_metric_history(run2, "judge_calls")] == [
        (1, 24.0),
        (2, 48.0),
    ]
    assert [(m.step, m.value) for m in client.get_metric_history(run2, "arena/groups")] == [
        (1, 2.0),
        (2, 4.0),
    ]
    # the redone step's line is the later one: a second resume from step 2 starts from it
    assert restore_counters(str(state / STATE_FILE), 2)["judge_calls"] == 48.0
    assert restore_counters(str(state / STATE_FILE), None) == {} and restore_counters(None, 1) == {}


def test_the_agr_anchor_pool_survives_a_restart(smoke_env, tokenizer, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    state = tmp_path / "state"
    overrides = [
        f"arenabench.tracking_uri={uri}",
        f"arenabench.state_dir={state}",
        "reward=rrc_agr",
        "arenabench.reward.reference=test_prefix",
    ]
    first, _, _ = logging_worker(launch.compose("smoke", overrides), monkeypatch)
    before = score_step(first, tokenizer, 1)
    pool = first.reward_manager.scorer.constructor.pool
    assert pool.path == state / "anchor_pool.json" and pool.path.exists()
    assert (len(pool), pool.generated) == (2, 2 * pool.n_anchors)  # two prompts' anchors generated once
    again, _, _ = logging_worker(
        launch.compose("smoke", [*overrides, "arenabench.resume_step=1"]), monkeypatch
    )
    restored = again.reward_manager.scorer.constructor.pool
    assert restored.entries.keys() == pool.entries.keys()
    assert score_step(again, tokenizer, 1) == before  # the same anchors, the same rewards
    assert (restored.generated, restored.hits) == (0, 2)  # nothing regenerated
