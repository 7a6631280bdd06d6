"""The local trainer: a tiny policy, a toy task, any registered constructor, GRPO or CISPO.

One step (nanoGPT-style, top to bottom in :func:`train`): K prompts × N samples (index 0 of
each group greedy, the rest at temperature T) → the engine turns the judge's verdicts into
advantages → one policy-gradient update (``epochs`` passes) → metrics. True quality is the
task's hidden score, seen only by the simulated judge and the evaluator.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from arenabench import judges, rewards
from arenabench.advantages import mask_unreliable
from arenabench.diagnostics import HEALTH_COUNTS, HEALTH_METRICS, health_metrics, pointwise_snr
from arenabench.engine import build_engine
from arenabench.judges.stack import TOKEN_METRICS, JudgeStack
from arenabench.trainers.local.config import RunConfig
from arenabench.trainers.local.judge_map import map_judge_to_start
from arenabench.trainers.local.policy import (
    TinyLM,
    response_logits,
    response_logprobs,
    sample,
    token_logprobs,
)
from arenabench.trainers.local.sft import load_init
from arenabench.trainers.local.step_metrics import (
    EXTRA_STEP_METRICS,
    logits_entropy,
    sampled_eval,
    step_extras,
)
from arenabench.trainers.local.task import TASKS
from arenabench.trainers.losses import get_policy_loss
from arenabench.types import Group, Trajectory

log = logging.getLogger(__name__)

# what every step logs (eval_win_rate, eval_quality, eval_sampled_quality every ``eval_every`` steps)
STEP_METRICS = (
    "quality_mean",
    "quality_max",
    "sigma_group",
    "sigma_noise",
    "snr",
    "zero_adv_share",
    "masked_groups",
    "outage_groups",
    "adv_std",
    "kl",
    "loss",
    "clipfrac",
    "judge_calls",
    "judge_failures",
    "judge_retries",
    "cache_hits",
    "cache_misses",
    "judge_prompt_tokens",
    "judge_cached_prompt_tokens",
    "judge_completion_tokens",
    "judge_backend_calls",
    "judge_answered",
    "judge_resent",
    "judge_outage_s",
    "judge_lost",
    *(f"{m}_total" for m in TOKEN_METRICS),  # the run's token bill so far (docs/tokens.md)
    "judge_latency_p50",
    "judge_latency_p90",
    "wall_time",
    *EXTRA_STEP_METRICS,  # entropy, distinct_share, adv_oracle_{pearson,kendall,groups}: step_metrics.py
    # the judge's health on this step's comparisons (diagnostics.health_metrics): position
    # consistency, tie, cycle and failure rates (0.0 when nothing was counted), and the counts
    # behind the first three (judge_bidirectional, judge_matches, judge_triangles)
    *HEALTH_METRICS,
    *HEALTH_COUNTS,
)
# judge_calls / judge_failures / judge_retries are cumulative (engine requests, retries
# included); cache_*, judge_*_tokens, judge_latency_* and a served judge's outage counters
# (judge_backend_calls = judge_answered + judge_resent + judge_lost, and judge_outage_s;
# docs/faults.md) are this step's, judge_*_tokens_total the run's; outage_groups: this step's
# groups that lost a request to an outage (all masked: within masked_groups). With fault
# injection on, ``judge_faults`` (cumulative injected faults) is logged too.


class PolicyReference:
    """AGR's fixed reference policy in the local trainer: the frozen initial policy, sampled at
    temperature T (deterministic in prompt and generation)."""

    def __init__(self, model: TinyLM, task, temperature: float, seed: int, kv_cache: bool = False):
        self.model, self.task, self.temperature, self.seed = model, task, temperature, seed
        self.kv_cache = kv_cache

    def generate(self, group: Group, n: int, generation: int = 0) -> list[Trajectory]:
        pid = int(group.meta["prompt_id"])
        gen = torch.Generator().manual_seed(hash((self.seed, pid, generation)) % 2**31)
        prompts = torch.as_tensor(self.task.prompts[[pid] * n])
        temp = torch.full((n,), self.temperature)
        resp = sample(self.model, prompts, self.task.response_len, temp, gen, self.kv_cache)
        g = self.task.group(pid, resp.numpy(), anchor=None)
        return [
            Trajectory(f"ref{generation}-{k}", f"[reference] {t.text}", t.length, dict(t.meta))
            for k, t in enumerate(g.trajectories)
        ]


def greedy_eval(policy: TinyLM, ref_responses: np.ndarray, task, kv_cache: bool = False) -> dict[str, float]:
    """The policy's greedy answers on every task prompt vs the reference policy's, by true
    quality: ``eval_win_rate`` (ties ½) — the analogue of the papers' judge win rate, which
    saturates once the policy is clearly better — and ``eval_quality``, their mean quality."""
    ids = np.arange(task.n_prompts)
    prompts = torch.as_tensor(task.prompts)
    greedy = torch.zeros(len(ids))
    mine = sample(policy, prompts, task.response_len, greedy, torch.Generator(), kv_cache).numpy()
    qa, qb = task.quality(ids, mine), task.quality(ids, ref_responses)
    out = {"eval_win_rate": float(np.mean((qa > qb) + 0.5 * (qa == qb))), "eval_quality": float(qa.mean())}
    if getattr(task, "verifiable", False):
        out["eval_greedy_pass_rate"] = float(task.correct(ids, mine).mean())
    return out


def train(
    cfg: Mapping[str, Any] | RunConfig,
    tracker=None,
    progress: bool = True,
    on_step: Callable[[int, list[Group], Any], None] | None = None,
) -> dict[str, float]:
    """Run ``cfg["steps"]`` steps; log every step's metrics to ``tracker`` (if any); return the
    last step's metrics plus the final eval. ``on_step(step, groups, engine_output)`` sees each
    step's groups and per-group results (tests compare rewards across runs with it)."""
    rc = RunConfig.from_mapping(cfg)  # typed, defaults filled; an unknown key fails here
    log.info("run config:\n%s", rc.to_yaml())
    cfg, tc = rc.to_dict(), rc.trainer
    seed, steps = rc.seed, rc.steps
    K, N = rc.prompts_per_step, rc.group_size
    if K < 1 or N < 1 or steps < 0:
        raise ValueError(f"need prompts_per_step >= 1, group_size >= 1, steps >= 0; got {K}, {N}, {steps}")
    torch.set_num_threads(tc.threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)

    task_cfg = dict(cfg["task"])
    task = TASKS.get(task_cfg.pop("name"), **task_cfg)
    constructor = rewards.build(cfg["reward"])
    loss_fn = get_policy_loss(tc.algo)
    T = tc.temperature
    kv = tc.kv_cache  # the sampler (policy.py): KV cache or full re-forward per token

    policy = TinyLM(
        task.vocab, task.prompt_len + task.response_len, tc.d_model, tc.n_layer, tc.n_head, tc.tie_head
    )
    # conf/init: random (as built) or the SFT checkpoint; its tags (init_sha256, init_source) say
    # which start this run's numbers rest on
    tags = load_init(policy, task, cfg["init"])
    # a fitted judge's latent scale is placed on this start's responses (judge_map.py)
    jcfg = map_judge_to_start(cfg["judge"], policy, task, T, kv)
    if jcfg.get("kind") == "ordinal":
        tags |= {f"judge_{k}": str(jcfg[k]) for k in ("quality_loc", "quality_scale")}
        log.info("fitted judge mapped: %s", tags)
    if tracker is not None and hasattr(tracker, "set_tags"):
        tracker.set_tags(tags)
    judge = judges.build(jcfg)  # the bare judge: the SNR probe measures the judge itself
    stack = JudgeStack(judge, jcfg.get("cache"), jcfg.get("faults"), key_extra={"task": dict(cfg["task"])})
    engine = build_engine(
        stack,
        seed=seed,
        max_retries=rc.engine.max_retries,
        schedule=rc.engine.schedule,
        max_inflight=rc.engine.max_inflight,
        max_failed_share=rc.engine.max_failed_share,
    )
    max_failed = rc.engine.max_failed_share
    ref = copy.deepcopy(policy).eval().requires_grad_(False)
    constructor.bind_reference(PolicyReference(ref, task, T, seed, kv))
    opt = torch.optim.AdamW(policy.parameters(), lr=tc.lr, weight_decay=0.0)
    ref_greedy = sample(
        ref, torch.as_tensor(task.prompts), task.response_len, torch.zeros(task.n_prompts), gen, kv
    )
    ref_greedy = ref_greedy.numpy()

    calls = failures = retries = 0
    t_start = time.perf_counter()
    metrics: dict[str, float] = {}
    bar = tqdm(range(steps), desc=f"train {constructor.name}", unit="step", disable=not progress)
    for step in bar:
        # 1. rollouts: K prompts × N samples, sample 0 of each group greedy (the anchor)
        pid = rng.choice(task.n_prompts, size=K, replace=task.n_prompts < K)
        prompts = torch.as_tensor(task.prompts[np.repeat(pid, N)])
        temp = torch.full((K * N,), T)
        temp[::N] = 0.0
        responses = sample(policy, prompts, task.response_len, temp, gen, kv)
        resp = responses.numpy().reshape(K, N, -1)
        groups = [task.group(int(p), resp[k]) for k, p in enumerate(pid)]

        # 2. rewards → advantages through the engine (all groups' judge calls batched per wave)
        out = engine.run(constructor, groups, step=step)
        advs, masked = mask_unreliable(out.results, max_failed)  # groups the judge mostly failed: 0
        adv = torch.tensor(np.concatenate(advs), dtype=torch.float32)
        calls += out.stats.judge_calls
        failures += out.stats.failures
        retries += out.stats.retries
        if on_step is not None:
            on_step(step, groups, out)

        # 3. policy update. The first pass's forward (pre-update) also gives old_logp and the
        # sampling policy's entropy: the same numbers a separate no-grad pass computes
        # (tests/trainers/local/test_sampler.py), one forward fewer per step.
        mask = torch.ones_like(responses, dtype=torch.float32)
        with torch.no_grad():
            ref_logp = response_logprobs(ref, prompts, responses, T)
        for epoch in range(tc.epochs):
            logits = response_logits(policy, prompts, responses, T)
            logp = token_logprobs(logits, responses)
            if epoch == 0:
                old_logp = logp.detach()
                entropy = logits_entropy(logits.detach())
            loss, st = loss_fn(
                logp,
                old_logp,
                adv,
                mask,
                clip_low=tc.clip_low,
                clip_high=tc.clip_high,
                ref_logp=ref_logp,
                kl_coef=tc.kl_coef,
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), tc.grad_clip)
            opt.step()

        # 4. metrics
        q = np.array([t.meta["quality"] for g in groups for t in g.trajectories])
        with torch.no_grad():
            kl = float(((old_logp - ref_logp) * mask).sum() / mask.sum())
        probe = pointwise_snr(judge, groups, rng, rc.probe_size, rc.probe_repeats)
        metrics = {
            "quality_mean": float(q.mean()),
            "quality_max": float(q.max()),
            "sigma_group": probe["sigma_group"],
            "sigma_noise": probe["sigma_noise"],
            "snr": probe["snr"],
            "zero_adv_share": float(np.mean([not np.any(a) for a in advs])),
            "masked_groups": float(masked),
            "outage_groups": float(sum(r.lost > 0 for r in out.results)),
            "adv_std": float(adv.std(unbiased=False)),
            "kl": kl,
            "loss": float(loss.detach()),
            "clipfrac": float(st.get("clipfrac", 0.0)),
            "judge_calls": float(calls),
            "judge_failures": float(failures),
            "judge_retries": float(retries),
            **stack.step_metrics(),
            "wall_time": time.perf_counter() - t_start,
            **step_extras(groups, [r.advantage for r in out.results], entropy),
            **health_metrics(out.stats),
        }
        every = rc.eval_every
        if every and (step % every == 0 or step == steps - 1):
            metrics.update(greedy_eval(policy, ref_greedy, task, kv))
            metrics.update(sampled_eval(policy, task, kv_cache=kv))
        if tracker is not None:
            tracker.log_metrics(metrics, step=step)
        bar.set_postfix(q=f"{metrics['quality_mean']:.2f}", snr=f"{metrics['snr']:.2f}")
    bar.close()
    final = dict(metrics)
    if not (rc.eval_every and steps):  # else the last step evaluated this very policy: the same numbers
        final.update(greedy_eval(policy, ref_greedy, task, kv))
        final.update(sampled_eval(policy, task, kv_cache=kv))
    final["steps_per_s"] = steps / max(time.perf_counter() - t_start, 1e-9)
    if not math.isfinite(final.get("loss", 0.0)):
        raise FloatingPointError(f"loss became non-finite at step {steps - 1}")
    return final
