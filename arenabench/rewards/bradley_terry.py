"""The Bradley-Terry path shared by Reasoning Arena's tournaments and the sparse constructors.

Each successful judge sample of a comparison is one observation (i, j, o): o = γ for a win,
½ for a tie, 1−γ for a loss (Reasoning Arena's soft verdict), or the judge's own P(i better)
when a constructor uses probabilities. An L2-regularized Bradley-Terry fit on the (incomplete)
comparison graph gives strengths; the reward is their min-max to [0, 1] over the trajectories
with evidence, and the rest are unranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from arenabench.aggregation import bradley_terry, minmax, soft_outcome
from arenabench.rewards.base import Constructor
from arenabench.rewards.failures import split_failures
from arenabench.types import MatchResult

Observation = tuple[int, int, float]  # (i, j, outcome for i)


def observations(
    results: list[MatchResult], gamma: float, probs: bool = False
) -> tuple[list[Observation], int, int]:
    """An observation per successful sample, the failed matches, and with ``probs`` the matches
    without probabilities that fell back to soft verdicts. A match shown in one slot order only
    (``one_order``: an order policy other than ``both``) counts each sample twice, as
    :class:`~arenabench.types.MatchResult` doubles its scores: the L2 prior weighs against a
    comparison's evidence the same whichever order policy asked it (else a single-order policy
    would also shrink every strength, and on a sparse graph reorder them, with a noiseless judge)."""
    obs: list[Observation] = []
    fallback = 0
    ok, failed = split_failures(results)
    for m in ok:
        copies = 2 if m.one_order else 1
        if probs and m.probs:
            obs += [(m.i, m.j, float(p)) for p in m.probs] * copies
            continue
        fallback += probs
        obs += [(m.i, m.j, float(soft_outcome(np.sign(a - b), gamma))) for a, b in m.samples] * copies
    return obs, failed, fallback


def fit(n: int, obs: list[Observation], l2: float, init: np.ndarray | None = None) -> np.ndarray:
    """Bradley-Terry strengths of ``n`` trajectories (all zero without observations); ``init``
    (e.g. the previous wave's fit) only saves Newton steps."""
    if not obs:
        return np.zeros(n)
    i, j, o = zip(*obs, strict=True)
    return bradley_terry(n, np.array(i, int), np.array(j, int), np.array(o, float), l2=l2, init=init)


def evidence(n: int, obs: list[Observation]) -> np.ndarray:
    """Which trajectories appear in at least one observation."""
    seen = np.zeros(n, dtype=bool)
    for i, j, _ in obs:
        seen[[i, j]] = True
    return seen


def unit_reward(strength: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Min-max of the strengths of ``seen`` trajectories to [0, 1]; NaN (unranked) for the rest."""
    reward = np.full(len(strength), np.nan)
    if seen.any():
        reward[seen] = minmax(strength[seen])
    return reward


@dataclass
class BradleyTerryBase(Constructor):
    """Base of the constructors that fit Bradley-Terry strengths. Subclasses declare the fields
    ``gamma`` (the outcome of a win) and ``l2`` themselves, so each keeps its parameter order,
    and call :meth:`check_fit_params` from ``__post_init__``."""

    def check_fit_params(self) -> None:
        gamma, l2 = self.gamma, self.l2  # type: ignore[attr-defined]
        if not (isinstance(gamma, int | float) and 0.5 < gamma <= 1.0):
            raise ValueError(f"{self.name}: gamma (the outcome of a win) must be in (0.5, 1]; got {gamma!r}")
        if not (isinstance(l2, int | float) and math.isfinite(l2) and l2 > 0):
            raise ValueError(f"{self.name}: l2 must be a finite number > 0; got {l2!r}")

    def observations(self, results: list[MatchResult], probs: bool = False):
        return observations(results, self.gamma, probs)  # type: ignore[attr-defined]

    def fit(self, n: int, obs: list[Observation], init: np.ndarray | None = None) -> np.ndarray:
        return fit(n, obs, self.l2, init)  # type: ignore[attr-defined]
