"""``ArenaRewardManager``: verl 0.9's reward-loop manager that scores whole groups.

Wiring (set by ``conf/verl/base.yaml``; the launcher checks it)::

    reward.num_workers=1                         # every sibling must reach the same barrier
    reward.reward_manager.source=importlib
    reward.reward_manager.name=ArenaRewardManager
    reward.reward_manager.module.path=pkg://arenabench.trainers.verl.reward_manager

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
:func:`arenabench.advantages.mask_unreliable`; null never masks), ``seed``, ``log_metrics``
(write per-step judge accounting into the MLflow run named by ``$MLFLOW_RUN_ID``). ``judge.cache``
and ``judge.faults`` work as in the local trainer (:class:`~arenabench.judges.stack.JudgeStack`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE
from arenabench.trainers.verl.barrier import GroupBarrier
from arenabench.trainers.verl.scoring import ArenaScorer, Response, expected_group_size, flush_summary

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "reward": {"name": "seeded_single_elim"},
    "judge": {"kind": "simulated", "preset": "calibrated", "seed": 0},
    "timeout_s": 900.0,
    "group_size": None,
    "anchor": "first",
    "max_retries": 2,
    "max_failed_share": DEFAULT_MAX_FAILED_SHARE,
    "seed": 0,
    "log_metrics": True,
}


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
        )
        self.barrier = GroupBarrier(self._score, timeout_s=float(opts["timeout_s"]))
        self.sink = None
        run_id = os.environ.get("MLFLOW_RUN_ID")
        if opts.get("log_metrics") and run_id:
            try:
                self.sink = _MlflowSink(run_id, os.environ.get("MLFLOW_TRACKING_URI"))
            except Exception as exc:
                log.warning("arenabench: no MLflow logging from the reward worker: %r", exc)

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
            meta={"global_steps": nt.get("global_steps")},
        )
        expected = expected_group_size(self.config, nt)
        return await self.barrier.submit(
            uid, expected, response, order=None if order is None else float(order)
        )

    # -- the barrier's scorer (runs in a worker thread) ----------------------------------------

    def _score(self, groups):
        results = self.scorer(groups)
        if self.sink is not None:
            steps = [
                int(p.meta["global_steps"])
                for g in groups
                for p in g.payloads
                if p.meta.get("global_steps") is not None
            ]
            step = max(steps) if steps else self.scorer.runs
            totals = self.scorer.totals
            metrics = {
                "judge_calls": totals["judge_calls"],  # cumulative, as the local trainer logs it
                "judge_failures": totals["failures"],
                "arena/groups": totals["groups"],
                "arena/masked_groups": self.scorer.masked_groups,  # cumulative, mask_unreliable
                "arena/flush_groups": len(groups),
                "arena/timed_out_groups": self.barrier.stats.timed_out,
                "arena/late_samples": self.barrier.stats.late,
            }
            metrics.update({f"arena/{k}": v for k, v in flush_summary(results).items()})
            stack = self.scorer.stack
            if stack.faulty is not None:  # cumulative, as the local trainer logs it
                metrics["judge_faults"] = stack.stats["faults"]
            if stack.cached is not None:
                metrics["arena/cache_hits"] = stack.stats["cache_hits"]
                metrics["arena/cache_misses"] = stack.stats["cache_misses"]
            self.sink.log(metrics, step)
        return results
