"""Sparse constructors (≤ 2N comparisons) that aggregate every comparison they made.

Seeded single-elimination keeps who survived (and mean scores for ties); these keep every
comparison's evidence and fit it on the sparse comparison graph — the search for a cheap
topology that matches round-robin's fidelity (issue 6; ``results/bench/fidelity_frontier.md``).

``outcome`` picks the evidence. ``"prob"``: each judge sample's P(i better)
(``MatchResult.probs``, both orders mapped to i's side) — the margin, not just the verdict;
a match without probabilities falls back to its verdicts (flagged ``verdict_fallback:k``).
``"verdict"``: Reasoning Arena's soft verdict per sample (win γ, tie ½). Both feed a MAP
Bradley-Terry fit with L2 ``l2``. ``"score"``: no fit — each trajectory's mean own
bidirectional score over its comparisons (ArenaRL's tie-break, used as the ranking); it treats
a side's 0–10 score as a measurement of that side, which the simulated judge makes exactly true
(its scores do not depend on the opponent) and an LLM judge only partly. Reward = min-max of
the estimate to [0, 1]; a trajectory with no successful comparison is unranked (advantage 0,
flagged). A failed match adds no evidence (flagged ``failed_matches:k``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from arenabench.rewards.base import Outcome, mean_scores, register, trivial_outcome
from arenabench.rewards.brackets import Seeding, anchor_phase, seed_order, single_elimination
from arenabench.rewards.bradley_terry import BradleyTerryBase, evidence, unit_reward
from arenabench.rewards.failures import failure_flags, split_failures

OUTCOMES = ("prob", "verdict", "score")


@dataclass
class _Sparse(BradleyTerryBase):
    outcome: str = "prob"
    gamma: float = 0.9
    l2: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.outcome not in OUTCOMES:
            raise ValueError(
                f"{self.name}: outcome must be one of {', '.join(OUTCOMES)}; got {self.outcome!r}"
            )
        self.check_fit_params()

    def estimate(self, n: int, history) -> tuple[np.ndarray, int, int]:
        """Current strength per trajectory (NaN: no evidence yet), failed matches, verdict fallbacks."""
        if self.outcome == "score":
            return mean_scores(n, history), split_failures(history)[1], 0
        obs, failed, fallback = self.observations(history, probs=self.outcome == "prob")
        return np.where(evidence(n, obs), self.fit(n, obs), np.nan), failed, fallback

    def outcome_of(self, n: int, history, flags: Counter | None = None, extra: dict | None = None) -> Outcome:
        est, failed, fallback = self.estimate(n, history)
        reward = unit_reward(est, ~np.isnan(est))
        out = [f"{k}:{v}" for k, v in (flags or {}).items()] + failure_flags(failed)
        if fallback:
            out.append(f"verdict_fallback:{fallback}")
        return Outcome(reward=reward, flags=out, extra={"strength": est, **(extra or {})})


@register("bt_bracket")
@dataclass
class BTBracket(_Sparse):
    """Seeded single-elimination's matches — anchor seeding (N−1, one wave), then the seeded
    bracket (N−1, ⌈log2 N⌉ waves; byes to top seeds) — 2N−2 comparisons; the reward is the
    estimate over all of them (Bradley-Terry by default), not survival depth. See the module
    docstring for outcomes, ties and failures.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. The bracket only chooses which pairs are asked: equal or NaN seeding
    scores are ordered by a seeded random permutation, and a tied or failed game advances the
    player with the higher accumulated average score so far (``brackets.tier_scores``), else a
    seeded coin flip (as in
    ``seeded_single_elim``, never the higher seed by index); the reward comes from the judge's
    evidence alone, so ties and failures move no one (all ties or all failures: zero advantage).
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        flags: Counter[str] = Counter()  # the bracket's tied/failed games
        seed_score, history, _ = yield from anchor_phase(self, group)
        seeds = seed_order(seed_score, rng)
        seeding = Seeding(seed_score, len(history))
        _, champion = yield from single_elimination(self, seeds, history, flags, rng, seeding=seeding)
        flags.pop("failed_match", None)  # counted once, by failure_flags, in outcome_of
        return self.outcome_of(len(group), history, flags, {"seeds": seeds, "champion": champion})


@register("adaptive_pairs")
@dataclass
class AdaptivePairs(_Sparse):
    """Every rollout vs the greedy anchor, then ``rounds`` waves on the closest unplayed pairs by
    the current estimate: ``budget`` comparisons in all (default 2N−2).

    Round 1: every rollout vs the greedy anchor (N−1 comparisons, one wave). Then ``rounds``
    waves, each spending ⌈remaining budget / rounds left⌉ comparisons on the unplayed pairs with
    the smallest gap in the current estimate (Bradley-Terry strengths by default; gap ties by
    index), each trajectory in at most ⌈2·size/N⌉ of a round's pairs while others remain (then
    one more, and so on). ``budget`` None = 2N−2, seeded single-elim's cost. Exactly
    min(budget, N(N−1)/2) comparisons in 1 + ``rounds`` waves (fewer when every pair has been
    played). See the module docstring for outcomes, ties and failures (a failed pair is not
    replayed).

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. The estimate gaps (ties by index) only choose which pairs
    are asked; the reward is the estimate from the judge's evidence alone, in which a tie is ½
    each and a failure nothing: all ties or all failures give advantage 0.
    """

    needs_anchor = True
    budget: int | None = None
    rounds: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.budget is not None and (not isinstance(self.budget, int) or self.budget < 1):
            raise ValueError(f"adaptive_pairs: budget must be None or an integer >= 1; got {self.budget!r}")
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"adaptive_pairs: rounds must be an integer >= 1; got {self.rounds!r}")

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        budget = min(2 * n - 2 if self.budget is None else self.budget, n * (n - 1) // 2)
        a = group.anchor
        first = [i for i in range(n) if i != a][:budget]
        history = list((yield [self.match(i, a) for i in first]))
        played = {frozenset((i, a)) for i in first}
        for left in range(self.rounds, 0, -1):
            size = math.ceil((budget - len(played)) / left)
            if size == 0:
                break
            est, _, _ = self.estimate(n, history)
            pairs = closest_pairs(est, played, size, cap=math.ceil(2 * size / n))
            if not pairs:
                break
            history += yield [self.match(i, j) for i, j in pairs]
            played.update(frozenset(p) for p in pairs)
        return self.outcome_of(n, history)


def closest_pairs(est: np.ndarray, played: set[frozenset], k: int, cap: int = 1) -> list[tuple[int, int]]:
    """Up to ``k`` unplayed pairs by the smallest estimate gap (ties by index; a trajectory
    without an estimate pairs last), each trajectory in at most ``cap`` of them; when that
    leaves fewer than ``k``, the cap rises by one until ``k`` or no unplayed pair is left."""
    gap = np.abs(np.subtract.outer(est, est))
    cand = sorted(
        (bool(np.isnan(gap[i, j])), float(np.nan_to_num(gap[i, j])), i, j)
        for i, j in combinations(range(len(est)), 2)
        if frozenset((i, j)) not in played
    )
    load: Counter[int] = Counter()
    taken: set[int] = set()
    out: list[tuple[int, int]] = []
    while len(out) < min(k, len(cand)):
        for c, (*_, i, j) in enumerate(cand):
            if len(out) == k:
                break
            if c in taken or load[i] >= cap or load[j] >= cap:
                continue
            taken.add(c)
            load.update((i, j))
            out.append((i, j))
        cap += 1
    return out
