"""Turn closed groups of decoded responses into constructor advantages (no verl import).

The constructor, judge stack, engine, masking and the simulated judge's hidden quality are the
adapters' shared kit (:mod:`arenabench.trainers.scoring`); this module adds verl's side: the
barrier's groups in, ``reward_score`` and ``reward_extra_info`` out.

:class:`ArenaScorer` is the barrier's scorer: it builds one :class:`~arenabench.types.Group` per
ready group and runs the engine **once** over all of them, so every wave of every group goes to
the judge as one batch. Each member gets its constructor advantage as ``reward_score`` (0 for all
of a group whose judge requests mostly failed: :func:`arenabench.advantages.mask_unreliable`), the
same ``reward_extra_info`` keys (:data:`EXTRA_KEYS`) — verl stacks those per key across samples
and fails on a key that one sample lacks.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE
from arenabench.judges.stack import TOKEN_METRICS
from arenabench.registry import unknown_message
from arenabench.trainers.scoring import GroupScoring, routed
from arenabench.types import Group, Trajectory

# every sample's reward_extra_info carries exactly these keys (floats)
EXTRA_KEYS = (
    "arena_rank_reward",  # the constructor's reward before standardization (rank quantile for tournaments)
    "arena_rank",  # 0 = best; -1 = unranked
    "arena_group_size",  # members scored together (< rollout.n after a timeout)
    "arena_judge_calls",  # the group's judge calls (retries included)
    "arena_failures",  # the group's judge requests that failed after retries
    "arena_waves",  # the group's waves
    "arena_routed",  # 1 when a judge ranked the group (adaptive: routed to the tournament)
    "arena_timed_out",  # 1 when the group was closed by the barrier's timeout
    "arena_late",  # 1 for a straggler scored alone after its group closed
    "arena_flush_groups",  # groups in the same engine run (how well waves batch across groups)
    "arena_masked",  # 1 when too many of the group's judge requests failed: reward_score 0 (mask_unreliable)
    "arena_lost",  # the group's judge requests lost to an outage (any: masked; docs/faults.md)
)

# the judge stack's per-run counters the reward manager sums into each training step's point,
# under the local trainer's names (arenabench.judges.stack; docs/faults.md, docs/tokens.md):
# judge_backend_calls = judge_answered + judge_resent + judge_lost for a served judge, plus
# outage_groups (groups that lost a request to an outage: all masked)
FLUSH_METRICS = (
    "judge_backend_calls",
    "judge_answered",
    "judge_resent",
    "judge_outage_s",
    "judge_lost",
    *TOKEN_METRICS,
)


@dataclass
class Response:
    """One decoded rollout, as the reward manager hands it to the barrier."""

    text: str
    prompt: str
    n_tokens: int
    ground_truth: Any = None
    data_source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredRun:
    """One engine run of :class:`ArenaScorer`: its index, its engine ``StepStats`` (the judge's
    health on its comparisons), its judge-stack counters (:data:`FLUSH_METRICS` and
    ``outage_groups``; this run's, not cumulative) and its batch latencies in seconds."""

    index: int
    stats: Any
    judge: dict[str, float]
    latencies: list[float]


class ArenaScorer:
    """Scores lists of :class:`~arenabench.trainers.verl.barrier.ReadyGroup` of
    :class:`Response` (see the module docstring). Thread-safe: one engine run at a time.

    ``anchor="first"`` marks member 0 (verl's ``session_id`` 0) as the group's anchor. verl
    samples all N rollouts at the rollout temperature, so unlike the local trainer this anchor is
    *not* greedy; anchor-based constructors (``anchor``, ``seeded_single_elim``, ``prc``) then
    seed against a sampled peer. ``anchor="none"`` refuses those constructors.
    """

    def __init__(
        self,
        reward: Mapping[str, Any],
        judge: Mapping[str, Any],
        *,
        seed: int = 0,
        anchor: str = "first",
        max_retries: int = 2,
        max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE,
        schedule: str = "auto",
        max_inflight: int | None = None,
        state_dir: str | None = None,
    ):
        if anchor not in ("first", "none"):
            raise ValueError(unknown_message("anchor rule", anchor, ["first", "none"]))
        # constructor, judge stack and engine (the adapters' shared kit); validates
        # max_failed_share too: here, not at the first flush
        self.kit = GroupScoring.build(
            reward,
            dict(judge),
            seed=seed,
            max_retries=max_retries,
            schedule=schedule,
            max_inflight=max_inflight,
            max_failed_share=max_failed_share,
        )
        self.constructor, self.stack, self.quality = self.kit.constructor, self.kit.stack, self.kit.quality
        self.engine = self.kit.engine
        if state_dir:
            keep_state(self.constructor, Path(state_dir))
        self.judge = self.stack.base
        self.anchor = anchor
        self.max_failed_share = max_failed_share
        self.masked_groups = 0  # cumulative groups masked (advantage 0: the judge mostly failed)
        self.runs = 0
        self.totals = {"judge_calls": 0, "failures": 0, "groups": 0, "waves": 0}
        # what the latest engine run *of the calling thread* left (:attr:`last`): the barrier
        # scores each flush in an executor thread and reads it there after the call, while
        # another flush may already run the engine
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def last(self) -> ScoredRun | None:
        """The latest engine run of the calling thread (None before its first)."""
        return getattr(self._local, "last", None)

    def _group(self, ready) -> Group:
        items: list[Response] = list(ready.payloads)
        first = items[0]
        trajs = []
        for k, r in enumerate(items):
            meta = self.kit.meta(r.text, r.ground_truth, r.meta)
            trajs.append(Trajectory(f"{ready.uid}:{k}", r.text, int(r.n_tokens), meta))
        gmeta = {"uid": ready.uid, "data_source": first.data_source}
        if first.ground_truth is not None:
            gmeta["answer"] = str(first.ground_truth)  # what verifiers (adaptive) compare against
        return Group(
            prompt=first.prompt,
            trajectories=tuple(trajs),
            anchor=0 if self.anchor == "first" else None,
            meta=gmeta,
        )

    def __call__(self, ready_groups: Sequence, step: int | None = None) -> list[list[dict[str, Any]]]:
        """Score ``ready_groups`` in one engine run. ``step``: the engine's step (its random
        streams, AGR's refresh clock) — the training step the groups belong to, so that a resumed
        run scores a step as the uninterrupted run did; None: the count of engine runs so far."""
        groups = [self._group(g) for g in ready_groups]
        with self._lock:
            out = self.engine.run(self.constructor, groups, step=self.runs if step is None else int(step))
            latencies = list(self.stack.latencies)  # step_metrics() empties them
            stack = self.stack.step_metrics()  # since the previous run: this run's
            judge = {k: float(stack[k]) for k in FLUSH_METRICS if k in stack}
            judge["outage_groups"] = float(sum(r.lost > 0 for r in out.results))
            self._local.last = ScoredRun(self.runs, out.stats, judge, latencies)
            self.runs += 1
            self.totals["judge_calls"] += out.stats.judge_calls
            self.totals["failures"] += out.stats.failures
            self.totals["groups"] += len(groups)
            self.totals["waves"] += out.stats.waves
            advs, masked = self.kit.advantages(out.results)
            self.masked_groups += masked
        results = []
        for ready, res, adv in zip(ready_groups, out.results, advs, strict=True):
            masked_flag = float(self.kit.masked(res))
            was_routed = routed(res)
            per = []
            for i in range(len(ready.payloads)):
                rank = float(res.rank[i])
                per.append(
                    {
                        "reward_score": float(adv[i]),
                        "reward_extra_info": {
                            "arena_rank_reward": float(res.reward[i]),
                            "arena_rank": -1.0 if math.isnan(rank) else rank,
                            "arena_group_size": float(len(ready.payloads)),
                            "arena_judge_calls": float(res.judge_calls),
                            "arena_failures": float(res.failures),
                            "arena_waves": float(res.waves),
                            "arena_routed": was_routed,
                            "arena_timed_out": float(ready.timed_out),
                            "arena_late": float(ready.late),
                            "arena_flush_groups": float(len(ready_groups)),
                            "arena_masked": masked_flag,
                            "arena_lost": float(res.lost),
                        },
                    }
                )
            results.append(per)
        return results


def keep_state(constructor, state_dir: Path) -> None:
    """Keep the constructor state that must survive a restart in ``state_dir``: RRC-AGR's anchor
    pool (``anchor_pool.json``, unless ``pool_path`` names a file), loaded if it exists, so a
    resumed run reuses the anchors already generated and judged."""
    from arenabench.rewards.reference import AnchorPool

    pool = getattr(constructor, "pool", None)
    if isinstance(pool, AnchorPool) and pool.path is None:
        pool.path = state_dir / "anchor_pool.json"
        if pool.path.exists():
            pool.load(pool.path)


def expected_group_size(config: Mapping[str, Any], non_tensor: Mapping[str, Any]) -> int:
    """How many siblings to wait for.

    verl sends no "this is validation" marker with a sample, so: ``extra_info.group_size`` when
    the dataset sets it; else ``arenabench.group_size`` when set; else ``rollout.n`` when it
    equals ``val_kwargs.n`` (our example configs make them equal); else ``val_kwargs.n`` for
    samples whose ``extra_info.split`` names a held-out split (verl's preprocessing scripts set
    it) and ``rollout.n`` for the rest."""
    rollout = config["actor_rollout_ref"]["rollout"]
    n_train = int(rollout["n"])
    n_val = int(rollout["val_kwargs"]["n"])
    extra = non_tensor.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    if extra.get("group_size") is not None:
        return int(extra["group_size"])
    arena = config.get("arenabench") or {}
    if arena.get("group_size") is not None:
        return int(arena["group_size"])
    if n_train == n_val:
        return n_train
    split = str(extra.get("split", "")).lower()
    return n_val if split in ("test", "val", "valid", "validation", "eval", "dev") else n_train
