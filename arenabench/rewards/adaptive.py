"""Reasoning Arena's router: verifier rewards where they discriminate, a tournament where not."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from arenabench import verifiers
from arenabench.rewards.base import REGISTRY, Constructor, Outcome, register, trivial_outcome
from arenabench.types import Group

_ROUTED = "adaptive_routed"
# which all-equal verifier groups go to the tournament (``route_when``)
ROUTE_WHEN = ("all_equal", "all_correct", "all_wrong")
# how a routed group's tournament rewards become advantages (``tournament_scale``)
TOURNAMENT_SCALES = ("group", "reward")
# ``tournament_scale: reward``: the std of the most informative 0/1 verifier group (half right), the
# unit one reward step is divided by in a routed group
VERIFIER_UNIT = 0.5


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

    ``route_when`` picks which all-equal groups are routed (issue 42; the others keep their zero
    verifier advantage): ``all_equal`` (the paper: all correct and all wrong alike),
    ``all_correct`` (every verifier reward 1: rigour among right answers only) or ``all_wrong``
    (every reward 0: partial reasoning among wrong answers only). A group whose equal rewards are
    neither 0 nor 1 (a graded verifier) is routed only under ``all_equal``.

    ``tournament_scale`` says how a routed group's tournament rewards (min-max [0, 1] for the
    Reasoning Arena tournaments) become advantages next to the verifier groups' of the same
    batch: ``group`` (the paper's rule, GRPO): standardized within the group like a verifier
    group, so every routed group carries unit-std advantages whatever the size of its judged
    differences; ``reward``: on the verifier's reward scale, ``(r − mean) / 0.5`` — a tournament
    reward step of 1 counts as a right-vs-wrong step of 1 in a half-right verifier group (whose
    GRPO advantages are exactly ±1), and a routed group is never renormalized to unit std.
    Verifier groups keep GRPO's advantages under both.
    """

    verifier: str = "exact_match"
    tournament: str = "reasoning_arena_live"
    tournament_params: dict[str, Any] = field(default_factory=dict)
    route: bool = True  # False: verifier rewards for every group (plain RLVR, the baseline)
    route_when: str = "all_equal"  # which all-equal groups are routed: ROUTE_WHEN
    tournament_scale: str = "group"  # routed groups' advantages: TOURNAMENT_SCALES
    _verify: Any = field(init=False, repr=False, compare=False)
    _inner: Constructor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tournament == self.name:
            raise ValueError("adaptive cannot route to itself; pick a tournament constructor")
        if self.route_when not in ROUTE_WHEN:
            raise ValueError(
                f"adaptive: route_when must be one of {', '.join(ROUTE_WHEN)}; got {self.route_when!r}"
            )
        if self.tournament_scale not in TOURNAMENT_SCALES:
            raise ValueError(
                f"adaptive: tournament_scale must be one of {', '.join(TOURNAMENT_SCALES)}; "
                f"got {self.tournament_scale!r}"
            )
        if not isinstance(self.route, bool):
            raise ValueError(f"adaptive: route must be true or false; got {self.route!r}")
        if "order" in self.tournament_params:
            raise ValueError(
                "adaptive: set order on adaptive itself (it orders the tournament's matches), "
                "not in tournament_params"
            )
        self._verify = verifiers.get(self.verifier)
        self._inner = REGISTRY.get(self.tournament, **dict(self.tournament_params))

    def routes(self, r: np.ndarray) -> bool:
        """Whether a group with verifier rewards ``r`` goes to the tournament."""
        if not (self.route and len(r) > 1 and bool(np.all(r == r[0]))):
            return False
        if self.route_when == "all_equal":
            return True
        return bool(r[0] == (1.0 if self.route_when == "all_correct" else 0.0))

    def prepare(self, group: Group, step: int) -> Group:
        r = self._verify(group)
        routed = self.routes(r)
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
        r = group.meta["verifier_reward"]
        routed = group.meta[_ROUTED]
        equal = len(group) < 2 or bool(np.all(r == r[0]))
        summary = {
            "routed": float(routed),
            "zero_adv_before": float(equal),
            "all_correct": float(equal and bool(r[0] == 1.0)),
            "all_wrong": float(equal and bool(r[0] == 0.0)),
        }
        if why := self.trivial(group):
            out = trivial_outcome(group, why)
            out.extra = {"summary": summary}
            return out
        if not routed:
            return Outcome(reward=r, extra={"verifier_reward": r, "summary": summary})
        out = yield from self._inner.play(group, rng)
        out.extra = {
            **out.extra,
            "verifier_reward": r,
            "summary": {**out.extra.get("summary", {}), **summary},
        }
        return out

    def finalize(self, group, outcome, accounting=None):
        res = super().finalize(group, outcome, accounting)
        if self.tournament_scale == "group" or not group.meta.get(_ROUTED):
            return res
        # ``reward``: the tournament's rewards on the verifier's scale (NaN = unranked: 0, as GRPO)
        r = np.asarray(outcome.reward if outcome.reward is not None else res.reward, dtype=float)
        ok = np.isfinite(r)
        adv = np.zeros(len(r))
        if ok.sum() >= 2 and r[ok].min() < r[ok].max():
            adv[ok] = (r[ok] - r[ok].mean()) / VERIFIER_UNIT
        return replace(res, advantage=adv)


def routing_metrics(results) -> dict[str, float]:
    """What the trainer logs per step for an ``adaptive`` arm (nothing for other constructors):
    ``routed_share`` and the shares of all-correct / all-wrong verifier groups."""
    summ = [r.extra.get("summary", {}) for r in results]
    if not any("all_correct" in s for s in summ):
        return {}
    n = len(summ)
    return {
        "routed_share": sum(s.get("routed", 0.0) for s in summ) / n,
        "all_correct_share": sum(s.get("all_correct", 0.0) for s in summ) / n,
        "all_wrong_share": sum(s.get("all_wrong", 0.0) for s in summ) / n,
    }


def routing_report(results) -> dict[str, float]:
    """Share of groups routed to the tournament, and of zero-advantage groups before/after."""
    summ = [r.extra.get("summary", {}) for r in results]
    n = max(len(results), 1)
    return {
        "routed": sum(s.get("routed", 0.0) for s in summ) / n,
        "zero_adv_before": sum(s.get("zero_adv_before", 0.0) for s in summ) / n,
        "zero_adv_after": sum(not np.any(r.advantage) for r in results) / n,
    }
