"""Reasoning Arena's router: verifier rewards where they discriminate, a tournament where not."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from arenabench import verifiers
from arenabench.rewards.base import REGISTRY, Constructor, Outcome, register, trivial_outcome
from arenabench.types import Group

_ROUTED = "adaptive_routed"


@register("adaptive")
@dataclass
class Adaptive(Constructor):
    """A group whose ``verifier`` rewards differ keeps them (plain GRPO: no judge call); a
    group whose rewards are all equal — zero advantage under GRPO — goes to ``tournament``
    (any registered constructor, built with ``tournament_params``). ``extra["summary"]``
    records ``routed`` and ``zero_adv_before`` per group; :func:`routing_report` sums them.
    ``votes``/``ddof`` of this wrapper apply to the verifier path; the tournament has its own.
    ``order`` (the slot-order policy) is this wrapper's and applies to the tournament's matches
    (the engine reads it from the constructor it runs); ``tournament_params`` cannot set it.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Equal verifier rewards carry none and are routed to the
    tournament, whose own tie/failure rule then applies (all ties or all failures: advantage 0).
    """

    verifier: str = "exact_match"
    tournament: str = "reasoning_arena_live"
    tournament_params: dict[str, Any] = field(default_factory=dict)
    route: bool = True  # False: verifier rewards for every group (plain RLVR, the baseline)
    _verify: Any = field(init=False, repr=False, compare=False)
    _inner: Constructor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tournament == self.name:
            raise ValueError("adaptive cannot route to itself; pick a tournament constructor")
        if "order" in self.tournament_params:
            raise ValueError(
                "adaptive: set order on adaptive itself (it orders the tournament's matches), "
                "not in tournament_params"
            )
        self._verify = verifiers.get(self.verifier)
        self._inner = REGISTRY.get(self.tournament, **dict(self.tournament_params))

    def prepare(self, group: Group, step: int) -> Group:
        r = self._verify(group)
        routed = self.route and len(group) > 1 and bool(np.all(r == r[0]))
        inner = self._inner.prepare(group, step) if routed else group
        return replace(inner, meta={**inner.meta, _ROUTED: routed, "verifier_reward": r})

    def bind_reference(self, policy) -> None:
        self._inner.bind_reference(policy)

    def bind_judge(self, traits) -> None:
        self._inner.bind_judge(traits)

    def validate_group(self, group: Group) -> None:
        if group.meta.get(_ROUTED):
            self._inner.validate_group(group)

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        r = group.meta["verifier_reward"]
        routed = group.meta[_ROUTED]
        summary = {
            "routed": float(routed),
            "zero_adv_before": float(len(group) < 2 or bool(np.all(r == r[0]))),
        }
        if not routed:
            return Outcome(reward=r, extra={"verifier_reward": r, "summary": summary})
        out = yield from self._inner.play(group, rng)
        out.extra = {
            **out.extra,
            "verifier_reward": r,
            "summary": {**out.extra.get("summary", {}), **summary},
        }
        return out


def routing_report(results) -> dict[str, float]:
    """Share of groups routed to the tournament, and of zero-advantage groups before/after."""
    summ = [r.extra.get("summary", {}) for r in results]
    n = max(len(results), 1)
    return {
        "routed": sum(s.get("routed", 0.0) for s in summ) / n,
        "zero_adv_before": sum(s.get("zero_adv_before", 0.0) for s in summ) / n,
        "zero_adv_after": sum(not np.any(r.advantage) for r in results) / n,
    }
