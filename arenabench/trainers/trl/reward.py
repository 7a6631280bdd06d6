"""A registered constructor + judge as one group-aware reward function for TRL's ``GRPOTrainer``.

TRL (1.16) calls a reward function with a **flat** batch: ``f(prompts, completions,
completion_ids, trainer_state, log_metric, log_extra, **dataset columns)``, each prompt repeated
``num_generations`` times consecutively (``RepeatSampler``), and it passes neither the group size
nor the group structure. :class:`ArenaReward` recovers the groups (:func:`recover_groups`: every
chunk of ``num_generations`` must share one prompt, or the call raises one
:class:`GroupLayoutError` — a group is never silently mixed), runs **all groups of the call through
one engine run** (one judge batch per wave across groups), and returns one value per completion.

What it returns (``output``) and how TRL turns it into advantages (``GRPOTrainer
._generate_and_score_completions``, ``multi_objective_aggregation="sum_then_normalize"``, the
default): ``A = r − nanmean_group(r)``, then divided by ``nanstd(r) + 1e-4`` over the group
(``scale_rewards="group"``, TRL's default; ``nanstd`` is Bessel-corrected, ddof 1) or over the whole
batch (``"batch"``), or not at all (``"none"``). A completion whose every reward function returned
``None`` is NaN there, left out of the group mean and std, and gets advantage 0.

* ``output="advantage"`` (default) returns the constructor's **group-standardized advantage**
  (population std, ε = 1e-6: :mod:`arenabench.advantages`). Use it with ``scale_rewards="none"``:
  the advantages are already centred, so TRL's centring changes nothing and TRL's advantage equals
  the engine's (to float32) — the equivalent of verl's pass-through ``adv_estimator=arenabench``.
  With ``"group"`` TRL would standardize them again with ddof 1 (every advantage × √((N−1)/N),
  0.866 at N = 4, 0.935 at N = 8); with ``"batch"`` by the batch std (× √((KN−1)/KN) over K
  groups when none is constant).
* ``output="reward"`` returns the constructor's raw reward (ArenaRL's rank reward ``1 − rank/(N−1)``
  for tournaments, the judge score for ``pointwise``): TRL's own GRPO recipe, to be used with
  ``scale_rewards="group"``; the advantages then differ from the paper's by the ddof-1 factor above
  and TRL's ε = 1e-4 (and the masking below still applies).

A group the judge failed — :func:`arenabench.advantages.is_masked`: more than ``max_failed_share``
of its judge requests failed after the engine's retries — returns ``None`` for every member (TRL:
NaN, advantage 0, excluded from its reward statistics), as does a member the constructor left
unranked (NaN rank; the engine gives it advantage 0). Never a fabricated tie. Counts go to TRL's
logs through the ``log_metric`` hook TRL hands reward functions (``arena/*``, averaged over each
logging window like TRL's own metrics; ``*_total`` are cumulative), among them the judge's health
on the call's comparisons (``arena/judge_consistency``, ``_tie_rate``, ``_cycle_rate``,
``_failure_rate`` and their counts: :func:`arenabench.diagnostics.health_metrics`).

Async: ``__call__`` is a coroutine (TRL 1.16 gathers async reward functions on its own event-loop
thread, ``GRPOTrainer.async_loop``); the engine — whose LLM judges block on network or GPU I/O —
runs in a one-thread executor, so the loop stays free for other async reward functions and tools.
:meth:`ArenaReward.score` is the same thing, synchronous.

The constructor, judge stack, engine, masking and the simulated judge's hidden quality are the
adapters' shared kit (:mod:`arenabench.trainers.scoring`, also verl's). No TRL import here: the
module runs (and is tested) without TRL installed.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE
from arenabench.diagnostics import health_metrics
from arenabench.engine import StepStats
from arenabench.judges.stack import JudgeStack
from arenabench.registry import unknown_message
from arenabench.trainers.scoring import GroupScoring, routed
from arenabench.types import ConstructorResult, Group, Trajectory

OUTPUTS = ("advantage", "reward")
# the TRL ``scale_rewards`` each output is meant for (see the module docstring)
RECOMMENDED_SCALE_REWARDS = {"advantage": "none", "reward": "group"}
ANCHORS = ("first", "none")


class GroupLayoutError(ValueError):
    """TRL's batch does not come in chunks of ``num_generations`` completions of one prompt."""


@dataclass
class RewardCall:
    """What one call saw and returned (kept in :attr:`ArenaReward.history`, for tests and notebooks)."""

    step: int  # the engine step (TRL's ``trainer_state.global_step`` when given)
    groups: list[Group]
    results: list[ConstructorResult]
    stats: StepStats
    values: list[float | None]
    masked: list[bool]
    metrics: dict[str, float] = field(default_factory=dict)


def _text(x: Any) -> str:
    """A prompt or completion as text: a string as is, chat messages as ``role: content`` lines."""
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        return str(x.get("content", ""))
    if isinstance(x, Sequence):
        return "\n".join(
            f"{m.get('role', '')}: {m.get('content', '')}" if isinstance(m, Mapping) else str(m) for m in x
        )
    return str(x)


def _completion_text(x: Any) -> str:
    """The completion's text (for chat completions, the messages' contents: what a judge reads)."""
    if isinstance(x, str):
        return x
    if isinstance(x, Sequence) and all(isinstance(m, Mapping) for m in x):
        return "\n".join(str(m.get("content", "")) for m in x)
    return _text(x)


def _prompt_key(p: Any) -> str:
    return p if isinstance(p, str) else json.dumps(p, sort_keys=True, default=str)


def recover_groups(prompts: Sequence[Any], num_generations: int) -> list[range]:
    """The index ranges of TRL's groups: consecutive chunks of ``num_generations``.

    TRL's ``RepeatSampler`` repeats each prompt ``num_generations`` times in a row, so chunk ``k``
    must hold ``num_generations`` copies of one prompt. Anything else — a batch whose length is not
    a multiple, a chunk mixing two prompts (a wrong ``num_generations``, ``num_generations_eval``
    differing in evaluation, a custom sampler, a process holding part of a group) — raises one
    :class:`GroupLayoutError` naming the first bad chunk. Two consecutive chunks may share a
    prompt (a dataset with a repeated prompt): they are two groups, as TRL treats them."""
    g = int(num_generations)
    if g < 1:
        raise ValueError(f"num_generations must be >= 1; got {num_generations!r}")
    n = len(prompts)
    hint = (
        f"TRL repeats each prompt num_generations times in a row; this reward was built with "
        f"num_generations={g}: it must equal GRPOConfig.num_generations (and num_generations_eval, "
        f"when evaluating), with every group of a batch on one process"
    )
    if n == 0 or n % g:
        raise GroupLayoutError(f"a batch of {n} completions is not whole groups of {g}. {hint}")
    out = []
    for k, start in enumerate(range(0, n, g)):
        keys = [_prompt_key(p) for p in prompts[start : start + g]]
        if len(set(keys)) > 1:
            seen = list(dict.fromkeys(keys))
            preview = ", ".join(repr(s[:40]) for s in seen[:3])
            raise GroupLayoutError(
                f"chunk {k} (completions {start}..{start + g - 1}) mixes {len(seen)} prompts "
                f"({preview}); a group must be the {g} completions of one prompt. {hint}"
            )
        out.append(range(start, start + g))
    return out


class ArenaReward:
    """A TRL reward function (async) from a constructor and a judge; see the module docstring.

    ``reward``: a constructor name or a ``reward`` config mapping (:func:`arenabench.rewards.build`).
    ``judge``: a ``judge`` config mapping built like the other trainers'
    (:func:`arenabench.trainers.scoring.judge_stack` → :meth:`JudgeStack.from_config`: any
    ``kind``, ``cache``, ``faults``, and for the simulated judge ``quality`` = ``overlap`` (token F1
    of the completion vs the dataset column ``answer_key``, the hash when the row has none),
    ``hash`` or ``constant``: :func:`~arenabench.trainers.scoring.hidden_quality`), a ready
    :class:`JudgeStack`, or a bare judge object (wrapped in a stack when it keeps ``stats``).
    ``num_generations``: TRL's ``GRPOConfig.num_generations``. ``anchor="first"``: completion 0
    of each group is the anchor of anchor-based constructors (TRL samples every completion, so it
    is not greedy; ``"none"`` refuses those constructors). ``seed`` / ``max_retries`` /
    ``schedule`` / ``max_inflight``: the engine's (``schedule="auto"`` pipelines a served judge);
    ``max_failed_share``: :func:`arenabench.advantages.mask_unreliable`'s threshold (``None``: never).
    """

    def __init__(
        self,
        reward: str | Mapping[str, Any] = "seeded_single_elim",
        judge: Mapping[str, Any] | JudgeStack | Any = None,
        *,
        num_generations: int,
        output: str = "advantage",
        seed: int = 0,
        max_retries: int = 2,
        max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE,
        schedule: str = "auto",
        max_inflight: int | None = None,
        anchor: str = "first",
        answer_key: str = "ground_truth",
        name: str | None = None,
    ):
        if output not in OUTPUTS:
            raise ValueError(unknown_message("output", output, list(OUTPUTS)))
        if anchor not in ANCHORS:
            raise ValueError(unknown_message("anchor rule", anchor, list(ANCHORS)))
        if int(num_generations) < 2:
            raise ValueError(f"num_generations must be >= 2 (a group to compare); got {num_generations!r}")
        # constructor, judge stack and engine (the adapters' shared kit); validates
        # max_failed_share too: here, not at the first call
        self.kit = GroupScoring.build(
            {"name": reward} if isinstance(reward, str) else reward,
            judge,
            seed=seed,
            max_retries=max_retries,
            schedule=schedule,
            max_inflight=max_inflight,
            max_failed_share=max_failed_share,
        )
        self.constructor, self.stack, self.quality = self.kit.constructor, self.kit.stack, self.kit.quality
        self.engine = self.kit.engine
        self.max_failed_share = max_failed_share
        self.num_generations = int(num_generations)
        self.output = output
        self.anchor = anchor
        self.answer_key = answer_key
        # TRL names a reward function by __name__ (metrics rewards/<name>/mean, std)
        self.__name__ = name or f"arena_{self.constructor.name}"
        self.history: list[RewardCall] = []
        self.keep_history = 64  # calls kept in history (the latest)
        self.totals = {"judge_calls": 0.0, "failures": 0.0, "masked_groups": 0.0, "none_rewards": 0.0}
        self.calls = 0
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return (
            f"ArenaReward({self.constructor.name!r}, num_generations={self.num_generations}, "
            f"output={self.output!r}, judge={type(self.stack.base).__name__})"
        )

    # -- TRL's entry point -----------------------------------------------------------------------

    async def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        log_metric = kwargs.pop("log_metric", None)
        log_extra = kwargs.pop("log_extra", None)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-judge")
        loop = asyncio.get_running_loop()
        call = await loop.run_in_executor(self._executor, partial(self._run, prompts, completions, kwargs))
        self._report(call, log_metric, log_extra)
        return call.values

    def score(self, prompts, completions, **kwargs) -> list[float | None]:
        """The synchronous form of ``__call__`` (same arguments, same values, same logging)."""
        log_metric = kwargs.pop("log_metric", None)
        log_extra = kwargs.pop("log_extra", None)
        call = self._run(prompts, completions, kwargs)
        self._report(call, log_metric, log_extra)
        return call.values

    def check_config(self, args) -> None:
        """Check a ``GRPOConfig`` against this reward: ``num_generations`` (and
        ``num_generations_eval`` when set) must equal this reward's (an error), and
        ``scale_rewards`` should be :data:`RECOMMENDED_SCALE_REWARDS` for the output (a warning)."""
        for key in ("num_generations", "num_generations_eval"):
            value = getattr(args, key, None)
            if value is not None and int(value) != self.num_generations:
                raise GroupLayoutError(
                    f"GRPOConfig.{key}={value} but this reward chunks by num_generations="
                    f"{self.num_generations}: build ArenaReward(num_generations={value}) or set {key}"
                )
        scale = getattr(args, "scale_rewards", None)
        scale = {True: "group", False: "none"}.get(scale, scale)
        want = RECOMMENDED_SCALE_REWARDS[self.output]
        if scale is not None and scale != want:
            warnings.warn(
                f"ArenaReward(output={self.output!r}) is meant for scale_rewards={want!r}; with "
                f"{scale!r} TRL rescales the constructor's rewards (see arenabench.trainers.trl.reward)",
                stacklevel=2,
            )
        if getattr(args, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
            warnings.warn(
                "multi_objective_aggregation='normalize_then_sum' standardizes each reward per group "
                "(ddof 1) and the sum again over the batch: the constructor's advantages are rescaled",
                stacklevel=2,
            )

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- one call --------------------------------------------------------------------------------

    def groups(self, prompts, completions, **kwargs) -> list[Group]:
        """The checked :class:`Group` s of one TRL batch (what the engine judges)."""
        if len(completions) != len(prompts):
            raise GroupLayoutError(f"{len(prompts)} prompts but {len(completions)} completions")
        answers = kwargs.get(self.answer_key)
        ids = kwargs.get("completion_ids")
        out = []
        for k, rows in enumerate(recover_groups(prompts, self.num_generations)):
            prompt = _text(prompts[rows[0]])
            answer = None if answers is None else answers[rows[0]]
            trajs = []
            for m, i in enumerate(rows):
                text = _completion_text(completions[i])
                meta = self.kit.meta(text, answer)
                n_tokens = len(ids[i]) if ids is not None else len(text.split())
                trajs.append(Trajectory(f"{k}:{m}", text, int(n_tokens), meta))
            gmeta = {} if answer is None else {"answer": str(answer)}  # what verifiers (adaptive) read
            out.append(Group(prompt, tuple(trajs), anchor=0 if self.anchor == "first" else None, meta=gmeta))
        return out

    def _run(self, prompts, completions, kwargs) -> RewardCall:
        state = kwargs.get("trainer_state")
        groups = self.groups(prompts, completions, **kwargs)
        with self._lock:  # one engine run at a time: the stack's per-step counters belong to it
            step = int(state.global_step) if state is not None else self.calls
            out = self.engine.run(self.constructor, groups, step=step)
            stack_metrics = self.stack.step_metrics()
            self.calls += 1
            call = self._record(step, groups, out, stack_metrics)
        return call

    def _record(self, step: int, groups: list[Group], out, stack_metrics: dict[str, float]) -> RewardCall:
        values: list[float | None] = []
        masked = []
        was_routed = []
        for res in out.results:
            bad = self.kit.masked(res)
            masked.append(bad)
            was_routed.append(routed(res))
            src = res.advantage if self.output == "advantage" else res.reward
            for i in range(len(res.advantage)):
                if bad or math.isnan(float(res.rank[i])) or not math.isfinite(float(src[i])):
                    values.append(None)  # no information: TRL leaves it out (advantage 0)
                else:
                    values.append(float(src[i]))
        n_none = sum(v is None for v in values)
        self.totals["judge_calls"] += out.stats.judge_calls
        self.totals["failures"] += out.stats.failures
        self.totals["masked_groups"] += sum(masked)
        self.totals["none_rewards"] += n_none
        metrics = {
            "arena/groups": float(len(groups)),
            "arena/judge_calls": float(out.stats.judge_calls),
            "arena/failures": float(out.stats.failures),
            "arena/retries": float(out.stats.retries),
            "arena/waves": float(out.stats.waves),
            "arena/judge_batches": float(out.stats.judge_batches),
            "arena/routed_share": float(np.mean(was_routed)) if was_routed else 0.0,
            "arena/masked_groups": float(sum(masked)),
            "arena/none_rewards": float(n_none),
            "arena/judge_calls_total": self.totals["judge_calls"],
            "arena/failures_total": self.totals["failures"],
            "arena/masked_groups_total": self.totals["masked_groups"],
        }
        if self.quality is not None:  # the simulated judge's hidden quality: is the policy improving?
            q = [t.meta["quality"] for g in groups for t in g.trajectories]
            metrics["arena/true_quality"] = float(np.mean(q))
        metrics.update({f"arena/{k}": float(v) for k, v in stack_metrics.items()})
        metrics.update({f"arena/{k}": v for k, v in health_metrics(out.stats).items()})
        call = RewardCall(step, groups, list(out.results), out.stats, values, masked, metrics)
        self.history.append(call)
        del self.history[: -self.keep_history]
        return call

    def _report(self, call: RewardCall, log_metric, log_extra) -> None:
        if log_metric is not None:
            for name, value in call.metrics.items():
                log_metric(name, value)
        if log_extra is not None:
            ranks, flags = [], []
            for res, bad in zip(call.results, call.masked, strict=True):
                ranks += [-1.0 if math.isnan(float(r)) else float(r) for r in res.rank]
                flags += [float(bad)] * len(res.rank)
            log_extra("arena_rank", ranks)
            log_extra("arena_masked", flags)


__all__ = [
    "ArenaReward",
    "GroupLayoutError",
    "OUTPUTS",
    "RECOMMENDED_SCALE_REWARDS",
    "RewardCall",
    "recover_groups",
]
