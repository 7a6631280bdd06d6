"""A step of 256 prompts × 16 samples (4096) through verl's reward worker, as the Ray actor
that verl creates for training.

The agent loop calls the reward worker once per sample, as each rollout finishes. A sample parked
in the group barrier holds one of the actor's Ray call slots until its group is scored. verl 0.9.1
creates the actor with Ray's default of 1000 slots, and ``reward_workers`` sizes it to the step.
Here verl's own ``RewardLoopManager`` creates the actor, and all 4096 calls are in flight at once,
in a shuffled order, so nearly every group stays incomplete until most of the step has arrived.
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from helpers import verl_batch
from omegaconf import OmegaConf

from arenabench import judges, rewards
from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, mask_unreliable
from arenabench.engine import Engine
from arenabench.tiny_model import WORDS
from arenabench.trainers.scoring import overlap_quality
from arenabench.trainers.verl import launch, reward_workers
from arenabench.types import Group, Trajectory

pytestmark = pytest.mark.slow  # ~25 s each on 2 cores: a Ray actor start and 4096 Ray calls

K, N = 256, 16  # prompts x samples: 4096 in one step, 4x Ray's default 1000 slots


def _config(tmp_path, timeout_s: float, name: str):
    cfg = launch.compose(
        "smoke",
        [
            f"data.train_batch_size={K}",
            f"actor_rollout_ref.rollout.n={N}",
            f"arenabench.timeout_s={timeout_s}",
            "arenabench.log_metrics=false",
            f"arenabench.group_log={tmp_path}/{name}.jsonl",
        ],
    )
    OmegaConf.resolve(cfg)  # the actor has no ARENABENCH_SMOKE_DIR
    return cfg


@pytest.fixture(scope="module")
def step(tokenizer):
    """One step's 4096 samples (global step 1, verl's session ids) and a shuffled arrival order."""
    rng = random.Random(0)
    truths = [" ".join(rng.sample(WORDS, 3)) for _ in range(K)]
    prompts = [f"copy: {t}" for t in truths]
    responses = [[" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(N)] for _ in range(K)]
    uids = [f"uid-{p}" for p in range(K)]
    data, rows = verl_batch(tokenizer, uids, N, prompts, responses, truths)
    data.non_tensor_batch["session_id"] = np.array([k for _, k, _ in rows])
    data.non_tensor_batch["global_steps"] = np.ones(len(rows), dtype=int)
    order = list(range(len(rows)))
    rng.shuffle(order)
    return data, rows, order


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _arrive(ray, worker, data, order, limit_s: float):
    """Every sample's ``compute_score`` call in flight at once, in ``order``; results by row."""
    t0 = time.monotonic()
    refs = [worker.compute_score.remote(data[b : b + 1]) for b in order]
    outs = ray.get(refs, timeout=limit_s)
    return dict(zip(order, outs, strict=True)), time.monotonic() - t0


def test_a_step_of_4096_samples_passes_the_barrier_every_group_scored_once(
    ray_cluster, step, smoke_env, tmp_path, capsys
):
    from verl.experimental.reward_loop import RewardLoopManager

    data, rows, order = step
    cfg = _config(tmp_path, timeout_s=600, name="sized")
    assert reward_workers.slots(cfg) == K * N + reward_workers.RAY_DEFAULT_SLOTS
    manager = RewardLoopManager(cfg)  # verl creates the worker, as in training
    assert f"arenabench: reward worker max_concurrency={K * N + 1000}" in capsys.readouterr().err
    (worker,) = manager.reward_loop_workers
    outs, waited = _arrive(ray_cluster, worker, data, order, limit_s=300)

    # every group scored exactly once, complete, in verl's session order
    groups = [json.loads(line) for line in (tmp_path / "sized.jsonl").read_text().splitlines()]
    assert sorted(g["uid"] for g in groups) == sorted(f"uid-{p}" for p in range(K))
    assert all(g["sessions"] == list(range(N)) for g in groups)
    assert not any(g["timed_out"] or g["late"] for g in groups)
    for out in outs.values():
        info = out["reward_extra_info"]
        assert (info["arena_timed_out"], info["arena_late"], info["arena_group_size"]) == (0.0, 0.0, N)

    # each engine run (a barrier flush) replayed from the logged texts gives the same advantages,
    # and each sample's reward is its group's advantage at its session
    by_run: dict[int, list[dict]] = {}
    for g in groups:
        by_run.setdefault(g["run"], []).append(g)
    assert sorted(by_run) == list(range(len(by_run)))
    for flush in by_run.values():
        flush.sort(key=lambda g: g["position"])
        assert [g["position"] for g in flush] == list(range(flush[0]["flush_groups"]))
        built = [
            Group(
                g["prompt"],
                tuple(
                    Trajectory(f"{g['uid']}:{k}", t, n, {"quality": overlap_quality(t, g["ground_truth"])})
                    for k, (t, n) in enumerate(zip(g["texts"], g["n_tokens"], strict=True))
                ),
                anchor=0,
                meta={"uid": g["uid"], "data_source": g["data_source"], "answer": g["ground_truth"]},
            )
            for g in flush
        ]
        # the training step the worker scored it as (its flush index when the samples carry none)
        step = flush[0]["engine_step"]
        engine = Engine(judges.get("calibrated"), seed=0)
        out = engine.run(rewards.get("seeded_single_elim"), built, step=step)
        advs, masked = mask_unreliable(out.results, DEFAULT_MAX_FAILED_SHARE)
        assert masked == 0
        for g, res, adv in zip(flush, out.results, advs, strict=True):
            assert g["advantages"] == [float(a) for a in adv]
            assert g["judge_calls"] == res.judge_calls > 0
    by_uid = {g["uid"]: g for g in groups}
    for b, (_, k, uid) in enumerate(rows):
        assert outs[b]["reward_score"] == by_uid[uid]["advantages"][k]
        assert outs[b]["reward_extra_info"]["arena_judge_calls"] == by_uid[uid]["judge_calls"]
    print(f"4096 samples: {waited:.1f} s, {len(by_run)} flushes")


def test_the_same_step_stalls_behind_rays_default_concurrency(ray_cluster, step, smoke_env, tmp_path):
    """The control: the worker as verl 0.9.1 creates it (``ray.remote(RewardLoopWorker)``, Ray's
    1000 slots). The first 1000 arrivals park and hold every slot, and their siblings queue behind
    them until the barrier's timeout closes the groups short."""
    from verl.experimental.reward_loop import RewardLoopWorker

    data, _, order = step
    timeout_s = 3.0
    cfg = _config(tmp_path, timeout_s=timeout_s, name="default")
    worker = ray_cluster.remote(RewardLoopWorker).options(name="verl_default_slots").remote(cfg, None)
    outs, waited = _arrive(ray_cluster, worker, data, order, limit_s=300)
    groups = [json.loads(line) for line in (tmp_path / "default.jsonl").read_text().splitlines()]
    timed_out = sum(g["timed_out"] for g in groups)
    late = sum(o["reward_extra_info"]["arena_late"] for o in outs.values())
    print(f"Ray's default slots: {timed_out} of {K} groups timed out, {late:.0f} samples late")
    assert timed_out > K // 2 and late > 0, (timed_out, late)
