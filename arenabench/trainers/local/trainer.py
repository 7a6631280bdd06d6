"""The local trainer: a tiny policy, a toy task, any registered constructor, GRPO or CISPO.

One step (nanoGPT-style, top to bottom in :func:`train_seeds`): K prompts × N samples (index 0 of
each group greedy, the rest at temperature T) → the engine turns the judge's verdicts into
advantages → one policy-gradient update (``epochs`` passes) → metrics. True quality is the
task's hidden score, seen only by the simulated judge and the evaluator.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from arenabench import judges, rewards
from arenabench.advantages import mask_unreliable
from arenabench.diagnostics import HEALTH_COUNTS, HEALTH_METRICS, health_metrics, pointwise_snr
from arenabench.engine import build_engine
from arenabench.judges.stack import TOKEN_METRICS, JudgeStack
from arenabench.rewards.adaptive import routing_metrics
from arenabench.trainers.local import stacked
from arenabench.trainers.local.config import RunConfig
from arenabench.trainers.local.judge_map import map_judge_to_start
from arenabench.trainers.local.policy import TinyLM, response_logits, sample, token_logprobs
from arenabench.trainers.local.sft import load_init
from arenabench.trainers.local.stacked import StackedLM
from arenabench.trainers.local.step_metrics import (
    EXTRA_STEP_METRICS,
    has_surface,
    judge_view_eval,
    logits_entropy,
    sampled_eval,
    step_extras,
    surface_step,
    surface_weight,
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
# injection on, ``judge_faults`` (cumulative injected faults) is logged too. A task with a surface
# feature (task=hackable) also logs step_metrics.SURFACE_STEP_METRICS every step and
# SURFACE_EVAL_METRICS at every eval (judge-view ones only for a judge with a surface term).


class JudgeHealthError(RuntimeError):
    """The judge failed too many of a step's requests: the run stops FAILED (:func:`judge_health`)."""


def judge_health(step: int, stats, max_share: float | None) -> str | None:
    """Why a step's judge failures end the run, or None: more than ``max_share`` of the step's
    requests (``trainer.max_judge_failure_share``; retries not counted as requests) still failed
    after retries, or -- whatever ``max_share`` -- every request of the first step did (a dead or
    misconfigured judge: refused connections, a wrong key, garbage replies). The reason names
    the counts, the option and the judge's last error (a backend's reasons carry no secret)."""
    sent = stats.judge_calls - stats.retries
    failed = stats.failures
    if sent <= 0 or failed <= 0:
        return None
    last = next(reversed(stats.failure_reasons), "unknown") if stats.failure_reasons else "unknown"
    if step == 0 and failed >= sent:
        return f"every judge request of the first step failed ({failed} of {sent}); last error: {last}"
    if max_share is not None and failed > max_share * sent:
        return (
            f"{failed} of {sent} judge requests failed at step {step} "
            f"(> trainer.max_judge_failure_share={max_share:g}); last error: {last}"
        )
    return None


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


def greedy_eval(policy, ref_responses: np.ndarray, task) -> dict[str, float] | list[dict[str, float]]:
    """The policy's greedy answers on every task prompt vs the reference policy's, by true
    quality: ``eval_win_rate`` (ties ½) — the analogue of the papers' judge win rate, which
    saturates once the policy is clearly better — and ``eval_quality``, their mean quality.
    A :class:`StackedLM` (``ref_responses`` [S, prompts, L]) gives one dict per seed."""
    single = isinstance(policy, TinyLM)
    model = StackedLM.from_models([policy]) if single else policy
    ref_responses = ref_responses[None] if single else ref_responses
    ids = np.arange(task.n_prompts)
    greedy = torch.zeros(len(ids))
    mine = stacked.sample(model, torch.as_tensor(task.prompts), task.response_len, greedy, torch.Generator())
    out = []
    for s, resp in enumerate(mine.numpy()):
        qa, qb = task.quality(ids, resp), task.quality(ids, ref_responses[s])
        res = {
            "eval_win_rate": float(np.mean((qa > qb) + 0.5 * (qa == qb))),
            "eval_quality": float(qa.mean()),
        }
        if getattr(task, "verifiable", False):
            res["eval_greedy_pass_rate"] = float(task.correct(ids, resp).mean())
        if has_surface(task):
            res["eval_surface"] = float(task.surface(ids, resp).mean())
        out.append(res)
    return out[0] if single else out


class _Seed:
    """One seed's run inside a stacked batch: everything but the weights is its own (config,
    random streams, constructor, judge, engine, counters, tracker)."""

    def __init__(self, rc: RunConfig, task, tracker):
        cfg, tc = rc.to_dict(), rc.trainer
        self.rc, self.seed, self.tracker = rc, rc.seed, tracker
        torch.manual_seed(rc.seed)  # the random init (init=random) is drawn from the run's seed
        self.rng = np.random.default_rng(rc.seed)
        self.gen = torch.Generator().manual_seed(rc.seed)
        self.constructor = rewards.build(cfg["reward"])
        self.policy = TinyLM(
            task.vocab,
            task.prompt_len + task.response_len,
            tc.d_model,
            tc.n_layer,
            tc.n_head,
            tc.tie_head,
        )
        # conf/init: random (as built) or the SFT checkpoint; its tags (init_sha256, init_source)
        # say which start this run's numbers rest on
        tags = load_init(self.policy, task, cfg["init"])
        # a fitted judge's latent scale is placed on this start's responses (judge_map.py)
        jcfg = map_judge_to_start(cfg["judge"], self.policy, task, tc.temperature, True)
        if jcfg.get("kind") == "ordinal":
            tags |= {f"judge_{k}": str(jcfg[k]) for k in ("quality_loc", "quality_scale")}
            log.info("fitted judge mapped: %s", tags)
        if tracker is not None and hasattr(tracker, "set_tags"):
            tracker.set_tags(tags)
        self.judge = judges.build(jcfg)  # the bare judge: the SNR probe measures the judge itself
        self.surface_weight = surface_weight(self.judge)  # task=hackable's judge view (step_metrics.py)
        self.stack = JudgeStack(
            self.judge, jcfg.get("cache"), jcfg.get("faults"), key_extra={"task": dict(cfg["task"])}
        )
        self.engine = build_engine(
            self.stack,
            seed=rc.seed,
            max_retries=rc.engine.max_retries,
            schedule=rc.engine.schedule,
            max_inflight=rc.engine.max_inflight,
            max_failed_share=rc.engine.max_failed_share,
        )
        self.ref = copy.deepcopy(self.policy).eval().requires_grad_(False)
        self.constructor.bind_reference(PolicyReference(self.ref, task, tc.temperature, rc.seed, True))
        self.calls = self.failures = self.retries = 0
        self.metrics: dict[str, float] = {}


def seed_metrics(
    r: _Seed,
    task,
    groups: list[Group],
    out,
    advs: list[np.ndarray],
    masked: int,
    adv: torch.Tensor,
    kl: float,
    loss: tuple[torch.Tensor, dict],
    entropy: float,
    wall: float,
) -> dict[str, float]:
    """One seed's metrics of a step (:data:`STEP_METRICS`, in that order; a surface task's too):
    true quality of ``groups``, the SNR probe (the bare judge re-judging a few of their
    trajectories, drawn from the seed's ``rng``), its advantages (``advs`` after masking, ``masked``
    groups, ``adv`` its row of the update), the update (``kl``, ``loss``: the loss function's
    (loss, stats)), the seed's cumulative judge counters, the stack's and the engine output's
    (``out``) counts of this step, the sampling policy's ``entropy`` and ``wall`` time."""
    q = np.array([t.meta["quality"] for g in groups for t in g.trajectories])
    with r.stack.unbilled():  # the probe's requests are no part of the rewards' cost
        probe = pointwise_snr(r.judge, groups, r.rng, r.rc.probe_size, r.rc.probe_repeats)
    value, stats = loss
    metrics = {
        "quality_mean": float(q.mean()),
        "quality_max": float(q.max()),
        "sigma_group": probe["sigma_group"],
        "sigma_noise": probe["sigma_noise"],
        "snr": probe["snr"],
        "zero_adv_share": float(np.mean([not np.any(a) for a in advs])),
        "masked_groups": float(masked),
        "outage_groups": float(sum(res.lost > 0 for res in out.results)),
        "adv_std": float(adv.std(unbiased=False)),
        "kl": kl,
        "loss": float(value.detach()),
        "clipfrac": float(stats.get("clipfrac", 0.0)),
        "judge_calls": float(r.calls),
        "judge_failures": float(r.failures),
        "judge_retries": float(r.retries),
        **r.stack.step_metrics(),
        "wall_time": wall,
        **step_extras(groups, [res.advantage for res in out.results], entropy),
        **health_metrics(out.stats),
        **routing_metrics(out.results),  # adaptive arms only (issue 42)
    }
    if has_surface(task):
        metrics.update(surface_step(groups, r.surface_weight))
    return metrics


# what the runs of one stacked batch share: the loop's shape, the task and the model (everything
# else — seed, init, reward, judge, engine, probe — each run builds for itself)
SHARED = ("steps", "prompts_per_step", "group_size", "eval_every", "trainer", "task")


def _stackable(rcs: list[RunConfig]) -> None:
    """The runs of a stacked batch must share :data:`SHARED` and have distinct seeds (a sweep's
    jobs that differ in their seed only, including what the seed interpolates, e.g. the imperfect
    teacher's ``init.seed: ${seed}``)."""
    first = rcs[0].to_dict()
    for rc in rcs[1:]:
        d = rc.to_dict()
        diff = [k for k in SHARED if d[k] != first[k]]
        if diff:
            shared = ", ".join(SHARED)
            raise ValueError(
                f"train_seeds: runs of one batch must share {shared}; they differ in {', '.join(diff)}"
            )
    seeds = [rc.seed for rc in rcs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"train_seeds: seeds must be distinct; got {seeds}")


def train(
    cfg: Mapping[str, Any] | RunConfig,
    tracker=None,
    progress: bool = True,
    on_step: Callable[[int, list[Group], Any], None] | None = None,
) -> dict[str, float]:
    """Run ``cfg["steps"]`` steps of one seed; log every step's metrics to ``tracker`` (if any);
    return the last step's metrics plus the final eval. ``on_step(step, groups, engine_output)``
    sees each step's groups and per-group results (tests compare rewards across runs with it).
    The same numbers as that seed inside :func:`train_seeds`."""
    hook = None if on_step is None else (lambda s, step, groups, out: on_step(step, groups, out))
    return train_seeds([cfg], [tracker], progress=progress, on_step=hook)[0]


def train_seeds(
    cfgs: Sequence[Mapping[str, Any] | RunConfig],
    trackers: Sequence[Any] | None = None,
    progress: bool = True,
    on_step: Callable[[int, int, list[Group], Any], None] | None = None,
) -> list[dict[str, float]]:
    """Train S runs of one setting (configs that share :data:`SHARED`: a sweep's seeds) as one stacked batch
    (:mod:`.stacked`); each run logs to its own tracker and returns its own final metrics, and
    each is the run :func:`train` gives for its config alone. ``on_step(s, step, groups, out)``."""
    rcs = [RunConfig.from_mapping(c) for c in cfgs]  # typed, defaults filled; an unknown key fails here
    if not rcs:
        return []
    _stackable(rcs)
    trackers = list(trackers) if trackers is not None else [None] * len(rcs)
    rc0 = rcs[0]
    for rc in rcs:
        log.info("run config:\n%s", rc.to_yaml())
    cfg, tc = rc0.to_dict(), rc0.trainer
    steps, K, N = rc0.steps, rc0.prompts_per_step, rc0.group_size
    if K < 1 or N < 1 or steps < 0:
        raise ValueError(f"need prompts_per_step >= 1, group_size >= 1, steps >= 0; got {K}, {N}, {steps}")
    torch.set_num_threads(tc.threads)
    task_cfg = dict(cfg["task"])
    task = TASKS.get(task_cfg.pop("name"), **task_cfg)
    loss_fn = get_policy_loss(tc.algo)
    T = tc.temperature

    runs = [_Seed(rc, task, tr) for rc, tr in zip(rcs, trackers, strict=True)]
    S = len(runs)
    policy = StackedLM.from_models([r.policy for r in runs])
    ref = StackedLM.from_models([r.ref for r in runs]).requires_grad_(False)
    # AdamW is elementwise, so one optimizer over the stacked weights is S independent ones
    opt = torch.optim.AdamW(policy.parameters(), lr=tc.lr, weight_decay=0.0)
    all_prompts = torch.as_tensor(task.prompts)
    ref_greedy = stacked.sample(
        ref, all_prompts, task.response_len, torch.zeros(task.n_prompts), [r.gen for r in runs]
    ).numpy()
    every = rc0.eval_every
    mask = torch.ones((K * N, task.response_len), dtype=torch.float32)
    temp = torch.full((K * N,), T)
    temp[::N] = 0.0  # sample 0 of each group greedy (the anchor)

    t_start = time.perf_counter()
    name = runs[0].constructor.name + (f" ×{S} seeds" if S > 1 else "")
    bar = tqdm(range(steps), desc=f"train {name}", unit="step", disable=not progress)
    for step in bar:
        # 1. rollouts: K prompts × N samples per seed, each seed's prompts from its own stream
        pids = [r.rng.choice(task.n_prompts, size=K, replace=task.n_prompts < K) for r in runs]
        prompts = torch.stack([torch.as_tensor(task.prompts[np.repeat(pid, N)]) for pid in pids])
        responses = stacked.sample(policy, prompts, task.response_len, temp, [r.gen for r in runs])
        resp = responses.numpy().reshape(S, K, N, -1)

        # 2. rewards → advantages through each seed's engine (its groups' judge calls batched per wave)
        per_seed = []
        for s, r in enumerate(runs):
            groups = [task.group(int(p), resp[s, k]) for k, p in enumerate(pids[s])]
            out = r.engine.run(r.constructor, groups, step=step)
            why = judge_health(step, out.stats, tc.max_judge_failure_share)
            if why is not None:  # a dead judge is a FAILED run, not a FINISHED one on no signal
                if r.tracker is not None and hasattr(r.tracker, "set_tags"):
                    r.tracker.set_tags({"judge_error": why[:5000]})
                raise JudgeHealthError(f"seed {r.seed}: {why}" if S > 1 else why)
            # groups the judge mostly failed: advantage 0
            advs, masked = mask_unreliable(out.results, r.rc.engine.max_failed_share)
            r.calls += out.stats.judge_calls
            r.failures += out.stats.failures
            r.retries += out.stats.retries
            if on_step is not None:
                on_step(s, step, groups, out)
            per_seed.append((groups, out, advs, masked))
        adv = torch.tensor(np.stack([np.concatenate(a) for _, _, a, _ in per_seed]), dtype=torch.float32)

        # 3. policy update: each seed's loss on its own rows; their sum's gradient is each
        # seed's own. The first pass's forward (pre-update) also gives old_logp and the sampling
        # policy's entropy, one forward fewer per step.
        with torch.no_grad():
            ref_logp = token_logprobs(response_logits(ref, prompts, responses, T), responses)
        for epoch in range(tc.epochs):
            logits = response_logits(policy, prompts, responses, T)
            logp = token_logprobs(logits, responses)
            if epoch == 0:
                old_logp = logp.detach()
                entropy = [logits_entropy(logits[s].detach()) for s in range(S)]
            losses = [
                loss_fn(
                    logp[s],
                    old_logp[s],
                    adv[s],
                    mask,
                    clip_low=tc.clip_low,
                    clip_high=tc.clip_high,
                    ref_logp=ref_logp[s],
                    kl_coef=tc.kl_coef,
                )
                for s in range(S)
            ]
            opt.zero_grad(set_to_none=True)
            torch.stack([loss for loss, _ in losses]).sum().backward()
            stacked.clip_grad_norm(policy, tc.grad_clip)
            opt.step()

        # 4. metrics, per seed
        evals = None
        if every and (step % every == 0 or step == steps - 1):
            evals = _evaluate(policy, ref_greedy, task, [r.surface_weight for r in runs])
        wall = time.perf_counter() - t_start
        for s, (r, (groups, out, advs, masked)) in enumerate(zip(runs, per_seed, strict=True)):
            with torch.no_grad():
                kl = float(((old_logp[s] - ref_logp[s]) * mask).sum() / mask.sum())
            r.metrics = seed_metrics(
                r, task, groups, out, advs, masked, adv[s], kl, losses[s], entropy[s], wall
            )
            if evals is not None:
                r.metrics.update(evals[s])
            if r.tracker is not None:
                r.tracker.log_metrics(r.metrics, step=step)
        bar.set_postfix(q=f"{runs[0].metrics['quality_mean']:.2f}", snr=f"{runs[0].metrics['snr']:.2f}")
    bar.close()
    finals = [dict(r.metrics) for r in runs]
    if not (every and steps):  # else the last step evaluated this very policy: the same numbers
        weights = [r.surface_weight for r in runs]
        for f, e in zip(finals, _evaluate(policy, ref_greedy, task, weights), strict=True):
            f.update(e)
    sps = steps / max(time.perf_counter() - t_start, 1e-9)
    for r, f in zip(runs, finals, strict=True):
        f["steps_per_s"] = sps  # the batch's: its S seeds step together
        if not math.isfinite(f.get("loss", 0.0)):
            raise FloatingPointError(f"loss of seed {r.seed} became non-finite at step {steps - 1}")
    return finals


def _evaluate(
    policy: StackedLM, ref_greedy: np.ndarray, task, weights: Sequence[float | None] | None = None
) -> list[dict[str, float]]:
    """Every seed's greedy and sampled eval (step_metrics.sampled_eval), one dict per seed; with a
    surface task, each seed's judge view too (``weights``: its judge's surface weight)."""
    out = [
        g | e for g, e in zip(greedy_eval(policy, ref_greedy, task), sampled_eval(policy, task), strict=True)
    ]
    for e, w in zip(out, weights or [None] * len(out), strict=True):
        e.update(judge_view_eval(e, w))
    return out
