"""The local trainer: a tiny policy, a toy task, any registered constructor, GRPO or CISPO.

One step (nanoGPT-style, top to bottom in :func:`train`): K prompts × N samples (index 0 of
each group greedy, the rest at temperature T) → the engine turns the judge's verdicts into
advantages → one policy-gradient update (``epochs`` passes) → metrics. True quality is the
task's hidden score, seen only by the simulated judge and the evaluator.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from arenabench import rewards
from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, mask_unreliable
from arenabench.diagnostics import pointwise_snr
from arenabench.engine import Engine
from arenabench.judges.cache import CachedJudge, JudgmentCache
from arenabench.judges.faults import FaultyJudge
from arenabench.trainers.local.policy import TinyLM, response_logprobs, sample
from arenabench.trainers.local.task import TASKS
from arenabench.trainers.losses import get_policy_loss
from arenabench.types import Group, Trajectory

# what every step logs (eval_win_rate and eval_quality every ``eval_every`` steps)
STEP_METRICS = (
    "quality_mean",
    "quality_max",
    "sigma_group",
    "sigma_noise",
    "snr",
    "zero_adv_share",
    "masked_groups",
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
    "judge_completion_tokens",
    "judge_latency_p50",
    "judge_latency_p90",
    "wall_time",
)
# judge_calls / judge_failures / judge_retries are cumulative (engine requests, retries
# included); cache_*, judge_*_tokens and judge_latency_* are this step's. With fault injection
# on, ``judge_faults`` (cumulative injected faults) is logged too.
STACK_KEYS = ("cache", "faults")  # judge-config keys that wrap the judge rather than build it


def build_judge(cfg: Mapping[str, Any]):
    """A judge from a ``conf/judge`` entry (any ``kind`` of :func:`arenabench.judges.factory.build`).

    ``cache`` and ``faults`` are not the judge's: :class:`JudgeStack` applies them."""
    from arenabench.judges import factory

    return factory.build({k: v for k, v in dict(cfg).items() if k not in STACK_KEYS})


def _percentile(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else 0.0


class JudgeStack:
    """The judge the engine talks to: ``base`` behind optional fault injection (``faults``: a
    mapping of :class:`FaultyJudge` arguments, e.g. ``{rate: 0.2, seed: 0}``) and an optional
    sqlite judgment cache (``cache``: a path; several processes may share it), with per-step
    accounting.

    Order: cache → faults → base, so a cached answer costs no (possibly faulty) call and a fault
    is never cached. Cache keys name the judge's full configuration plus ``key_extra`` (for a
    simulated judge the task's configuration: its verdicts depend on hidden qualities the text
    alone does not fix), so one file can serve a whole sweep. Latency is the wall time of each
    batch the engine sends, cache lookup included.
    """

    def __init__(
        self,
        base,
        cache: str | None = None,
        faults: Mapping[str, Any] | None = None,
        key_extra: Mapping[str, Any] | None = None,
    ):
        self.base = base
        judge = base
        self.faulty = FaultyJudge(base, **dict(faults)) if faults else None
        judge = self.faulty or judge
        self.cached = None
        if cache:
            path = Path(cache).expanduser()
            path = path if path.is_absolute() else Path.cwd() / path  # as the MLflow sqlite URI
            model = getattr(base, "preset", type(base).__name__)
            config = asdict(base.config) if hasattr(base, "config") else repr(base)
            self.cached = CachedJudge(
                judge,
                JudgmentCache(path),
                model=f"{type(base).__name__}:{model}:{json.dumps(config, sort_keys=True, default=str)}",
                rubric=str(getattr(base, "rubric_name", "simulated")),
                key_extra=dict(key_extra or {}),
            )
            judge = self.cached
        self.outer = judge
        self.latencies: list[float] = []
        self._last = self._counters()

    def _timed(self, method: str, requests):
        t0 = time.perf_counter()
        try:
            return getattr(self.outer, method)(requests)
        finally:
            self.latencies.append(time.perf_counter() - t0)

    def judge_pairs(self, requests):
        return self._timed("judge_pairs", requests)

    def score_points(self, requests):
        return self._timed("score_points", requests)

    def _counters(self) -> dict[str, float]:
        stats = getattr(self.base, "stats", None)  # an LLM judge's usage counters, if it keeps any
        stats = stats if isinstance(stats, Mapping) else {}
        return {
            "cache_hits": float(self.cached.hits if self.cached else 0),
            "cache_misses": float(self.cached.misses if self.cached else 0),
            "judge_prompt_tokens": float(stats.get("prompt_tokens", 0)),
            "judge_completion_tokens": float(stats.get("completion_tokens", 0)),
        }

    def step_metrics(self) -> dict[str, float]:
        """This step's cache hits/misses, tokens and batch-latency p50/p90 (0 with no batch)."""
        now = self._counters()
        out = {k: now[k] - self._last[k] for k in now}
        self._last = now
        out["judge_latency_p50"] = _percentile(self.latencies, 50)
        out["judge_latency_p90"] = _percentile(self.latencies, 90)
        self.latencies = []
        if self.faulty is not None:
            out["judge_faults"] = float(self.faulty.faulted)
        return out


def build_constructor(cfg: Mapping[str, Any]):
    cfg = dict(cfg)
    return rewards.get(cfg.pop("name"), **cfg)


class PolicyReference:
    """AGR's fixed reference policy in the local trainer: the frozen initial policy, sampled at
    temperature T (deterministic in prompt and generation)."""

    def __init__(self, model: TinyLM, task, temperature: float, seed: int):
        self.model, self.task, self.temperature, self.seed = model, task, temperature, seed

    def generate(self, group: Group, n: int, generation: int = 0) -> list[Trajectory]:
        pid = int(group.meta["prompt_id"])
        gen = torch.Generator().manual_seed(hash((self.seed, pid, generation)) % 2**31)
        prompts = torch.as_tensor(self.task.prompts[[pid] * n])
        resp = sample(self.model, prompts, self.task.response_len, torch.full((n,), self.temperature), gen)
        g = self.task.group(pid, resp.numpy(), anchor=None)
        return [
            Trajectory(f"ref{generation}-{k}", f"[reference] {t.text}", t.length, dict(t.meta))
            for k, t in enumerate(g.trajectories)
        ]


def _bind_reference(constructor, ref: PolicyReference) -> None:
    for c in (constructor, getattr(constructor, "_inner", None)):
        if c is not None and hasattr(c, "pool") and c.reference == "simulated":
            c.pool.policy = ref  # the trainer's reference policy replaces the simulator's


def greedy_eval(policy: TinyLM, ref_responses: np.ndarray, task) -> dict[str, float]:
    """The policy's greedy answers on every task prompt vs the reference policy's, by true
    quality: ``eval_win_rate`` (ties ½) — the analogue of the papers' judge win rate, which
    saturates once the policy is clearly better — and ``eval_quality``, their mean quality."""
    ids = np.arange(task.n_prompts)
    prompts = torch.as_tensor(task.prompts)
    mine = sample(policy, prompts, task.response_len, torch.zeros(len(ids)), torch.Generator()).numpy()
    qa, qb = task.quality(ids, mine), task.quality(ids, ref_responses)
    return {"eval_win_rate": float(np.mean((qa > qb) + 0.5 * (qa == qb))), "eval_quality": float(qa.mean())}


def train(
    cfg: Mapping[str, Any],
    tracker=None,
    progress: bool = True,
    on_step: Callable[[int, list[Group], Any], None] | None = None,
) -> dict[str, float]:
    """Run ``cfg["steps"]`` steps; log every step's metrics to ``tracker`` (if any); return the
    last step's metrics plus the final eval. ``on_step(step, groups, engine_output)`` sees each
    step's groups and per-group results (tests compare rewards across runs with it)."""
    seed, steps = int(cfg["seed"]), int(cfg["steps"])
    K, N = int(cfg["prompts_per_step"]), int(cfg["group_size"])
    tc = dict(cfg["trainer"])
    if K < 1 or N < 1 or steps < 0:
        raise ValueError(f"need prompts_per_step >= 1, group_size >= 1, steps >= 0; got {K}, {N}, {steps}")
    torch.set_num_threads(int(tc.get("threads", 1)))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)

    task_cfg = dict(cfg["task"])
    task = TASKS.get(task_cfg.pop("name"), **task_cfg)
    constructor = build_constructor(cfg["reward"])
    jcfg = dict(cfg["judge"])
    judge = build_judge(jcfg)  # the bare judge: the SNR probe measures the judge itself
    stack = JudgeStack(judge, jcfg.get("cache"), jcfg.get("faults"), key_extra={"task": dict(cfg["task"])})
    engine = Engine(stack, seed=seed, max_retries=int(tc.get("judge_retries", 2)))
    max_failed = (cfg.get("engine") or {}).get("max_failed_share", DEFAULT_MAX_FAILED_SHARE)
    mask_unreliable([], max_failed)  # a bad threshold fails before the first step
    loss_fn = get_policy_loss(tc["algo"])
    T = float(tc["temperature"])

    policy = TinyLM(
        task.vocab, task.prompt_len + task.response_len, tc["d_model"], tc["n_layer"], tc["n_head"]
    )
    ref = copy.deepcopy(policy).eval().requires_grad_(False)
    _bind_reference(constructor, PolicyReference(ref, task, T, seed))
    opt = torch.optim.AdamW(policy.parameters(), lr=float(tc["lr"]), weight_decay=0.0)
    ref_greedy = sample(
        ref, torch.as_tensor(task.prompts), task.response_len, torch.zeros(task.n_prompts), gen
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
        responses = sample(policy, prompts, task.response_len, temp, gen)
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

        # 3. policy update
        mask = torch.ones_like(responses, dtype=torch.float32)
        with torch.no_grad():
            old_logp = response_logprobs(policy, prompts, responses, T)
            ref_logp = response_logprobs(ref, prompts, responses, T)
        for _ in range(int(tc.get("epochs", 1))):
            logp = response_logprobs(policy, prompts, responses, T)
            loss, st = loss_fn(
                logp,
                old_logp,
                adv,
                mask,
                clip_low=float(tc["clip_low"]),
                clip_high=float(tc["clip_high"]),
                ref_logp=ref_logp,
                kl_coef=float(tc.get("kl_coef", 0.0)),
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), float(tc.get("grad_clip", 1.0)))
            opt.step()

        # 4. metrics
        q = np.array([t.meta["quality"] for g in groups for t in g.trajectories])
        with torch.no_grad():
            kl = float(((old_logp - ref_logp) * mask).sum() / mask.sum())
        probe = pointwise_snr(
            judge, groups, rng, int(cfg.get("probe_size", 8)), int(cfg.get("probe_repeats", 4))
        )
        metrics = {
            "quality_mean": float(q.mean()),
            "quality_max": float(q.max()),
            "sigma_group": probe["sigma_group"],
            "sigma_noise": probe["sigma_noise"],
            "snr": probe["snr"],
            "zero_adv_share": float(np.mean([not np.any(a) for a in advs])),
            "masked_groups": float(masked),
            "adv_std": float(adv.std(unbiased=False)),
            "kl": kl,
            "loss": float(loss.detach()),
            "clipfrac": float(st.get("clipfrac", 0.0)),
            "judge_calls": float(calls),
            "judge_failures": float(failures),
            "judge_retries": float(retries),
            **stack.step_metrics(),
            "wall_time": time.perf_counter() - t_start,
        }
        every = int(cfg.get("eval_every", 0))
        if every and (step % every == 0 or step == steps - 1):
            metrics.update(greedy_eval(policy, ref_greedy, task))
        if tracker is not None:
            tracker.log_metrics(metrics, step=step)
        bar.set_postfix(q=f"{metrics['quality_mean']:.2f}", snr=f"{metrics['snr']:.2f}")
    bar.close()
    final = dict(metrics)
    final.update(greedy_eval(policy, ref_greedy, task))
    final["steps_per_s"] = steps / max(time.perf_counter() - t_start, 1e-9)
    if not math.isfinite(final.get("loss", 0.0)):
        raise FloatingPointError(f"loss became non-finite at step {steps - 1}")
    return final
