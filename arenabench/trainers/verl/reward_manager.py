"""``ArenaRewardManager``: verl 0.9's reward-loop manager that scores whole groups.

Wiring (set by ``conf/verl/base.yaml``; the launcher checks it)::

    reward.num_workers=1                         # every sibling must reach the same barrier
    reward.reward_manager.source=importlib
    reward.reward_manager.name=ArenaRewardManager
    reward.reward_manager.module.path=pkg://arenabench.trainers.verl.reward_manager

The one worker holds every sample of a step while its group fills: :mod:`.reward_workers` sizes
its Ray concurrency to ``train_batch_size × n`` (and the validation batch) when this module is
imported, where Ray's default (1000) would stall larger steps.

verl calls ``run_single`` once per response (from the agent loop as each rollout finishes, or in
one batch for a colocated reward model). Each call decodes its response and waits in a
:class:`~arenabench.trainers.verl.barrier.GroupBarrier` keyed by ``uid``; the barrier hands every
group that is complete at that moment to :class:`~arenabench.trainers.verl.scoring.ArenaScorer`
(one engine run → one judge batch per wave across groups). ``reward_score`` is the constructor's
**advantage**; pair it with ``algorithm.adv_estimator=arenabench`` (pass-through, see
``advantage.py``) so verl does not standardize it again.

Options (``arenabench.*`` in the composed config): ``reward`` / ``judge`` (the conf groups),
``timeout_s`` (barrier timeout from a group's first arrival), ``group_size`` (force N),
``anchor`` (``first`` | ``none``), ``max_retries``, ``max_failed_share`` (a group with a larger
share of failed judge requests gets reward 0 for every member, see
:func:`arenabench.advantages.mask_unreliable`; null never masks), ``schedule`` / ``max_inflight``
(the engine's: ``auto`` pipelines a served judge, see :mod:`arenabench.engine`), ``seed``, ``log_metrics``
(write judge accounting into the MLflow run named by ``$MLFLOW_RUN_ID``, one point per global
step: :class:`StepLog`), ``group_log`` (a JSONL file: one line per scored group, with its texts
and advantages, its judge failures, lost requests and masked flag: what verl trained on,
checkable against the engine). ``judge.cache`` and
``judge.faults`` work as in the local trainer (:class:`~arenabench.judges.stack.JudgeStack`).

Resuming (verl's ``trainer.resume_mode``): the launcher sets ``state_dir`` (beside verl's
checkpoints) and ``resume_step`` (the checkpoint verl resumes from). The worker appends its
cumulative counters to ``state_dir/reward_state.jsonl`` as each step's point is logged, and a
resumed worker starts its counters from the line of ``resume_step``, so ``judge_calls`` and the
other cumulative metrics continue where the checkpoint left them; AGR's anchor pool is kept in
``state_dir`` too (:func:`~arenabench.trainers.verl.scoring.keep_state`). Each engine run's step
is the training step of its groups, so a resumed run scores a step as the uninterrupted one did;
with ``judge.cache`` it re-pays no judge call answered before the restart.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE
from arenabench.diagnostics import ComparisonHealth, health_metrics
from arenabench.judges.accounting import percentiles
from arenabench.judges.stack import TOKEN_METRICS
from arenabench.trainers.verl import reward_workers
from arenabench.trainers.verl.barrier import GroupBarrier
from arenabench.trainers.verl.scoring import FLUSH_METRICS, ArenaScorer, Response, expected_group_size

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "reward": {"name": "seeded_single_elim"},
    "judge": {"kind": "simulated", "preset": "calibrated", "seed": 0},
    "timeout_s": 900.0,
    "group_size": None,
    "anchor": "first",
    "max_retries": 2,
    "max_failed_share": DEFAULT_MAX_FAILED_SHARE,
    "schedule": "auto",
    "max_inflight": None,
    "seed": 0,
    "log_metrics": True,
    "group_log": None,
    "state_dir": None,
    "resume_step": None,
}
# per-group judge outcomes in the group log (from the samples' ``arena_*`` extra info)
GROUP_FLAGS = ("failures", "lost", "masked")
STATE_FILE = "reward_state.jsonl"  # in arenabench.state_dir: the cumulative counters after each step


def arena_options(config: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """``DEFAULTS`` overlaid with the config's ``arenabench`` section, as plain containers."""
    section = config.get("arenabench") if hasattr(config, "get") else None
    if isinstance(section, DictConfig):
        section = OmegaConf.to_container(section, resolve=True)
    out = dict(DEFAULTS)
    out.update(dict(section or {}))
    return out


def _text_of_prompt(non_tensor: Mapping[str, Any]) -> str | None:
    """The prompt as text from ``raw_prompt`` (chat messages), so siblings share one key."""
    raw = non_tensor.get("raw_prompt")
    if raw is None:
        return None
    try:
        msgs = list(raw)
    except TypeError:
        return str(raw)
    parts = [str(m.get("content", "")) if isinstance(m, Mapping) else str(m) for m in msgs]
    return "\n".join(parts)


class _MlflowSink:
    """Appends the reward worker's per-step judge accounting to the run verl logs into; the
    first failure disables it, since logging must never stop training."""

    def __init__(self, run_id: str, uri: str | None):
        from arenabench.tracking import RunLogger

        self.run = RunLogger(run_id, uri, flush_every=1)
        self.broken = False

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        if self.broken:
            return
        try:
            self.run.log_metrics(metrics, step)
        except Exception as exc:  # logging must never stop training
            log.warning("arenabench: MLflow logging from the reward worker failed, disabled: %r", exc)
            self.broken = True


@dataclass
class _Step:
    flushes: int = 0
    groups: int = 0
    advantages: list[np.ndarray] = field(default_factory=list)
    cumulative: dict[str, float] = field(default_factory=dict)
    # the step's engine stats summed over its flushes, for diagnostics.health_metrics
    health: ComparisonHealth = field(default_factory=ComparisonHealth)
    judge_calls: int = 0
    retries: int = 0
    failures: int = 0
    # the judge stack's counters summed over the step's flushes (scoring.FLUSH_METRICS and
    # outage_groups) and its batch latencies
    judge: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)

    def add_stats(self, stats) -> None:
        self.health = self.health + stats.health
        self.judge_calls += stats.judge_calls
        self.retries += stats.retries
        self.failures += stats.failures

    def add_judge(self, judge: Mapping[str, float], latencies: Sequence[float]) -> None:
        for k, v in judge.items():
            self.judge[k] = self.judge.get(k, 0.0) + float(v)
        self.latencies.extend(float(x) for x in latencies)

    def absorb(self, other: _Step) -> None:
        self.flushes += other.flushes
        self.groups += other.groups
        self.advantages.extend(other.advantages)
        self.add_stats(other)
        self.add_judge(other.judge, other.latencies)


class StepLog:
    """The reward worker's metrics as ONE point per global step, however many barrier flushes
    scored that step's groups (groups finish apart: a small batch often takes one flush each).

    Each flush adds its groups to their step's record; a record is logged when it holds
    ``expected`` groups (``data.train_batch_size``), or when a flush of a later step arrives (a
    step that ended short). Groups of a step already logged (validation after it, a straggler)
    are carried into the next point; the cumulative counters include them anyway. Logged:
    the cumulative counters as after the step's last flush, plus ``arena/flushes``,
    ``arena/step_groups``, ``arena/flush_groups`` (mean groups per flush), ``arena/zero_adv_share``
    and ``arena/adv_std`` over the step's groups, the judge's health on the step's comparisons
    (``arena/judge_consistency``, ``_tie_rate``, ``_cycle_rate``, ``_failure_rate`` and their counts:
    :func:`arenabench.diagnostics.health_metrics`, as the other trainers log it), and the judge
    stack's counters of the step under the local trainer's names: outages (``judge_outage_s``,
    ``judge_resent``, ``judge_lost``, ``outage_groups``), backend calls (``judge_backend_calls``,
    ``judge_answered``), tokens (``judge_prompt_tokens``, ``judge_cached_prompt_tokens``,
    ``judge_completion_tokens``) and batch latency ``judge_latency_p50`` / ``_p90`` (0 with no
    batch, as :meth:`~arenabench.judges.stack.JudgeStack.step_metrics`)."""

    def __init__(self, log: Callable[[Mapping[str, float], int], None], expected: int):
        if expected < 1:
            raise ValueError(f"a step holds at least one group; expected={expected}")
        self.log = log
        self.expected = int(expected)
        self.open: dict[int, _Step] = {}
        self.carry = _Step()
        self.last_logged: int | None = None
        self._lock = threading.Lock()

    def add(
        self,
        step: int,
        advantages: Sequence[np.ndarray],
        cumulative: Mapping[str, float],
        stats=None,
        judge: Mapping[str, float] | None = None,
        latencies: Sequence[float] = (),
    ) -> None:
        """One flush's groups of ``step`` (one advantage array per group), the counters after it,
        the flush's engine ``StepStats`` (its health, calls, retries, failures; None: nothing) and
        its judge-stack counters and batch latencies (:class:`.scoring.ScoredRun`)."""
        with self._lock:
            for earlier in sorted(s for s in self.open if s < step):
                self._emit(earlier)
            if self.last_logged is not None and step <= self.last_logged:
                rec = self.carry  # that step already has its point
            else:
                rec = self.open.setdefault(step, _Step())
            rec.flushes += 1
            rec.groups += len(advantages)
            rec.advantages.extend(np.asarray(a, dtype=float) for a in advantages)
            rec.cumulative = dict(cumulative)
            if stats is not None:
                rec.add_stats(stats)
            rec.add_judge(judge or {}, latencies)
            if rec is not self.carry and rec.groups >= self.expected:
                self._emit(step)

    def _emit(self, step: int) -> None:
        rec = self.open.pop(step)
        cumulative = rec.cumulative
        if self.carry.flushes:
            rec.absorb(self.carry)
            self.carry = _Step()
        metrics = dict(cumulative)
        metrics["arena/flushes"] = float(rec.flushes)
        metrics["arena/step_groups"] = float(rec.groups)
        metrics["arena/flush_groups"] = rec.groups / rec.flushes
        groups = [a for a in rec.advantages if a.size]
        if groups:
            metrics["arena/zero_adv_share"] = float(np.mean([not np.any(a) for a in groups]))
            metrics["arena/adv_std"] = float(np.concatenate(groups).std())
        metrics.update({f"arena/{k}": v for k, v in health_metrics(rec).items()})
        metrics.update({k: 0.0 for k in (*FLUSH_METRICS, "outage_groups")})
        metrics.update(rec.judge)
        lat = percentiles(rec.latencies, (50, 90), empty=0.0)
        metrics["judge_latency_p50"] = float(lat["p50"])
        metrics["judge_latency_p90"] = float(lat["p90"])
        self.log(metrics, step)
        self.last_logged = step


@register("arenabench")
class ArenaRewardManager(RewardManagerBase):
    """Group-level tournament rewards in verl's reward loop (see the module docstring)."""

    def __init__(
        self,
        config,
        tokenizer,
        compute_score=None,
        reward_router_address=None,
        reward_model_tokenizer=None,
        **kwargs,
    ):
        super().__init__(config, tokenizer, compute_score)
        self.options = opts = arena_options(config)
        self.scorer = ArenaScorer(
            opts["reward"],
            opts["judge"],
            seed=int(opts["seed"]),
            anchor=str(opts["anchor"]),
            max_retries=int(opts["max_retries"]),
            max_failed_share=opts["max_failed_share"],
            schedule=str(opts["schedule"]),
            max_inflight=None if opts["max_inflight"] is None else int(opts["max_inflight"]),
            state_dir=opts.get("state_dir"),
        )
        self.barrier = GroupBarrier(self._score, timeout_s=float(opts["timeout_s"]))
        self.state_file = os.path.join(opts["state_dir"], STATE_FILE) if opts.get("state_dir") else None
        self.offsets = restore_counters(self.state_file, opts.get("resume_step"))
        self.sink = None
        self.steps: StepLog | None = None
        run_id = os.environ.get("MLFLOW_RUN_ID")
        if opts.get("log_metrics") and run_id:
            try:
                self.sink = _MlflowSink(run_id, os.environ.get("MLFLOW_TRACKING_URI"))
            except Exception as exc:
                log.warning("arenabench: no MLflow logging from the reward worker: %r", exc)
        if self.sink is not None or self.state_file:
            self.steps = StepLog(self._log_step, expected=int(config["data"]["train_batch_size"]))
        self.group_log = opts.get("group_log")

    # -- verl's per-sample entry point ---------------------------------------------------------

    async def run_single(self, data: DataProto) -> dict:
        item = data[len(data) - 1]  # multi-output agent loops: the last output carries the reward
        nt = item.non_tensor_batch
        response_ids = item.batch["responses"]
        response_len = response_ids.shape[-1]
        valid = int(item.batch["attention_mask"][-response_len:].sum())
        text = self.tokenizer.decode(response_ids[:valid], skip_special_tokens=True)
        prompt = _text_of_prompt(nt)
        if prompt is None:
            prompt_ids = item.batch["prompts"]
            mask = item.batch["attention_mask"][: prompt_ids.shape[-1]].bool()
            prompt = self.tokenizer.decode(prompt_ids[mask], skip_special_tokens=True)
        reward_model = nt.get("reward_model") or {}
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
        uid = str(nt["uid"])
        order = nt.get("session_id")
        response = Response(
            text=text,
            prompt=prompt,
            n_tokens=valid,
            ground_truth=ground_truth,
            data_source=str(nt.get("data_source", "")),
            meta={
                "global_steps": nt.get("global_steps"),
                "session_id": None if order is None else int(order),
            },
        )
        expected = expected_group_size(self.config, nt)
        return await self.barrier.submit(
            uid, expected, response, order=None if order is None else float(order)
        )

    # -- the barrier's scorer (runs in a worker thread) ----------------------------------------

    def _score(self, groups):
        steps = [_global_step(g) for g in groups]
        known = [s for s in steps if s is not None]
        engine_step = max(known) if known else None  # a flush holds one step's groups but stragglers
        results = self.scorer(groups, step=engine_step)
        scored = self.scorer.last  # this flush's engine run (this thread's)
        run = scored.index
        if self.group_log:
            self._write_groups(groups, results, steps, run, engine_step)
        if self.steps is not None:
            # the flush's engine stats and judge counters; a flush that spans two steps: the first
            stats, judge, latencies = scored.stats, scored.judge, scored.latencies
            for step in sorted({s for s in steps if s is not None}) or [None]:
                advs = [
                    np.array([m["reward_score"] for m in res])
                    for res, s in zip(results, steps, strict=True)
                    if s == step
                ]
                self.steps.add(
                    run if step is None else step, advs, self._cumulative(), stats, judge, latencies
                )
                stats, judge, latencies = None, None, ()
        return results

    def _log_step(self, metrics: Mapping[str, float], step: int) -> None:
        """A step's point: into the MLflow run, and its cumulative counters into the state file
        (what a worker resumed from this step's checkpoint starts from)."""
        if self.sink is not None:
            self.sink.log(metrics, step)
        if self.state_file:
            keys = self._cumulative().keys()
            line = json.dumps({"step": int(step), "counters": {k: metrics[k] for k in keys if k in metrics}})
            try:
                os.makedirs(os.path.dirname(self.state_file), exist_ok=True)
                with open(self.state_file, "a") as f:
                    f.write(line + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:  # like logging, never stops training; a resume then starts at 0
                log.warning("arenabench: could not write the reward worker's state: %r", exc)

    def _cumulative(self) -> dict[str, float]:
        totals = self.scorer.totals
        metrics = {
            "judge_calls": totals["judge_calls"],  # cumulative, as the local trainer logs it
            "judge_failures": totals["failures"],
            "arena/groups": totals["groups"],
            "arena/masked_groups": self.scorer.masked_groups,  # cumulative, mask_unreliable
            "arena/timed_out_groups": self.barrier.stats.timed_out,
            "arena/late_samples": self.barrier.stats.late,
        }
        stack = self.scorer.stack
        for name in TOKEN_METRICS:  # the run's token bill so far, as the local trainer logs it
            metrics[f"{name}_total"] = stack.stats[name.removeprefix("judge_")]
        if stack.faulty is not None:  # cumulative, as the local trainer logs it
            metrics["judge_faults"] = stack.stats["faults"]
        if stack.cached is not None:
            metrics["arena/cache_hits"] = stack.stats["cache_hits"]
            metrics["arena/cache_misses"] = stack.stats["cache_misses"]
        return {k: float(v) + self.offsets.get(k, 0.0) for k, v in metrics.items()}

    def _write_groups(self, groups, results, steps, run: int, engine_step: int | None) -> None:
        """One JSON line per group: enough to rebuild the engine run that scored it."""
        lines = []
        for pos, (group, res, step) in enumerate(zip(groups, results, steps, strict=True)):
            first = group.payloads[0]
            lines.append(
                json.dumps(
                    {
                        "run": run,
                        "engine_step": run if engine_step is None else engine_step,
                        "position": pos,
                        "flush_groups": len(groups),
                        "global_steps": step,
                        "uid": group.uid,
                        "prompt": first.prompt,
                        "ground_truth": None if first.ground_truth is None else str(first.ground_truth),
                        "data_source": first.data_source,
                        "texts": [p.text for p in group.payloads],
                        "n_tokens": [int(p.n_tokens) for p in group.payloads],
                        "sessions": [p.meta.get("session_id") for p in group.payloads],
                        "advantages": [m["reward_score"] for m in res],
                        "rank_rewards": [m["reward_extra_info"]["arena_rank_reward"] for m in res],
                        "judge_calls": res[0]["reward_extra_info"]["arena_judge_calls"] if res else 0.0,
                        **{k: res[0]["reward_extra_info"][f"arena_{k}"] if res else 0.0 for k in GROUP_FLAGS},
                        "timed_out": group.timed_out,
                        "late": group.late,
                    }
                )
            )
        with open(self.group_log, "a") as f:
            f.write("".join(line + "\n" for line in lines))


def restore_counters(state_file: str | None, step: int | None) -> dict[str, float]:
    """The cumulative counters as logged at training step ``step`` (the checkpoint a resumed run
    starts from), from the state file's last line for that step; {} when not resuming. A missing
    line (the step's point was never logged) falls back to the latest earlier step, with a
    warning: the cumulative metrics then undercount what the lost steps paid."""
    if step is None or not state_file or not os.path.exists(state_file):
        return {}
    best: dict | None = None
    with open(state_file) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut by the kill
                continue
            if int(rec["step"]) <= int(step) and (best is None or int(rec["step"]) >= int(best["step"])):
                best = rec
    if best is None:
        log.warning(
            "arenabench: no reward-worker state up to step %s in %s: counters start at 0", step, state_file
        )
        return {}
    if int(best["step"]) != int(step):
        log.warning(
            "arenabench: resuming at step %s from the reward worker's state of step %s", step, best["step"]
        )
    return {k: float(v) for k, v in best["counters"].items()}


def _global_step(group) -> int | None:
    steps = [int(p.meta["global_steps"]) for p in group.payloads if p.meta.get("global_steps") is not None]
    return max(steps) if steps else None


# verl imports this module in the trainer process right before it creates the reward worker
reward_workers.install()
