"""Batches shaped as verl's trainer builds them, and the expected constructor output."""

from __future__ import annotations

import numpy as np
import torch

from arenabench import judges, rewards
from arenabench.engine import Engine
from arenabench.trainers.scoring import overlap_quality
from arenabench.types import Group, Trajectory

PROMPTS = ("copy: red green blue", "copy: gold pink")
GROUND_TRUTH = ("red green blue", "gold pink")
# 4 responses per prompt, of different quality against the reference and different lengths
RESPONSES = (
    ("red green blue", "red blue", "black white grey orange", "red green"),
    ("gold pink", "pink", "gold gold gold pink brown", "blue"),
)
PROMPT_LEN, RESPONSE_LEN = 16, 12


def _objects(items) -> np.ndarray:
    """A 1-D object array (np.array would turn a list of lists into a 2-D one)."""
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        arr[i] = x
    return arr


def verl_batch(
    tokenizer,
    uids=("uid-a", "uid-b"),
    n=4,
    prompts_text=PROMPTS,
    responses_text=RESPONSES,
    ground_truth=GROUND_TRUTH,
):
    """A ``DataProto`` of len(uids) prompts × n responses, interleaved as verl repeats them:
    prompts left-padded, responses right-padded, ``attention_mask`` over both, ``uid`` etc.
    Prompt ``p`` is ``prompts_text[p]``; its k-th response ``responses_text[p][k]``."""
    from verl import DataProto

    rows = []
    for p, uid in enumerate(uids):
        for k in range(n):
            rows.append((p, k, uid))
    B = len(rows)
    pad = tokenizer.pad_token_id
    prompts = torch.full((B, PROMPT_LEN), pad, dtype=torch.long)
    responses = torch.full((B, RESPONSE_LEN), pad, dtype=torch.long)
    attn = torch.zeros((B, PROMPT_LEN + RESPONSE_LEN), dtype=torch.long)
    chats = [
        tokenizer.encode(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
        )[-PROMPT_LEN:]
        for text in prompts_text[: len(uids)]
    ]
    for b, (p, k, _) in enumerate(rows):
        pids = chats[p]
        rids = tokenizer.encode(responses_text[p][k])[: RESPONSE_LEN - 1] + [tokenizer.eos_token_id]
        prompts[b, PROMPT_LEN - len(pids) :] = torch.tensor(pids)
        attn[b, PROMPT_LEN - len(pids) : PROMPT_LEN] = 1
        responses[b, : len(rids)] = torch.tensor(rids)
        attn[b, PROMPT_LEN : PROMPT_LEN + len(rids)] = 1
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = torch.clamp(torch.cumsum(attn, dim=1) - 1, min=0)
    non_tensors = {
        "uid": np.array([u for _, _, u in rows], dtype=object),
        "data_source": np.array(["arenabench/tiny_copy"] * B, dtype=object),
        "reward_model": np.array(
            [{"style": "rule", "ground_truth": ground_truth[p]} for p, _, _ in rows], dtype=object
        ),
        "extra_info": np.array([{"split": "train", "index": p} for p, _, _ in rows], dtype=object),
        "raw_prompt": _objects([[{"role": "user", "content": prompts_text[p]}] for p, _, _ in rows]),
    }
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attn,
            "position_ids": position_ids,
            "response_mask": attn[:, PROMPT_LEN:].clone(),
        },
        non_tensors=non_tensors,
    )
    return data, rows


def expected_group(tokenizer, data, rows, p, constructor="seeded_single_elim", judge="calibrated"):
    """The constructor's output for prompt ``p``, computed directly with the engine from the same
    decoded texts, qualities and lengths the reward manager builds."""
    idx = [b for b, (q, _, _) in enumerate(rows) if q == p]
    trajs = []
    for k, b in enumerate(idx):
        valid = int(data.batch["attention_mask"][b, PROMPT_LEN:].sum())
        text = tokenizer.decode(data.batch["responses"][b, :valid], skip_special_tokens=True)
        trajs.append(Trajectory(f"x:{k}", text, valid, {"quality": overlap_quality(text, GROUND_TRUTH[p])}))
    group = Group(PROMPTS[p], tuple(trajs), anchor=0)
    out = Engine(judges.get(judge), seed=0).run(rewards.get(constructor), [group])
    return idx, out.results[0]


def logging_worker(cfg, monkeypatch):
    """verl's real ``RewardLoopWorker`` for ``cfg`` whose reward manager logs into a fresh MLflow
    run (as the launcher hands ``MLFLOW_RUN_ID`` to Ray workers): ``(worker, uri, run_id)``."""
    from verl.experimental.reward_loop import RewardLoopWorker

    from arenabench.trainers.verl import launch

    tracker = launch.start_mlflow_run(cfg, launch.job_tags(cfg, "smoke", []))
    uri, run_id = tracker.uri, tracker.run_id
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    return RewardLoopWorker(cfg), uri, run_id
