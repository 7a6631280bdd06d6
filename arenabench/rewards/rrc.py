"""RRC's constructors: SCR (all pairs, majority vote), AGR (vs a fixed reference policy's
anchors), the CARA repair of cyclic preferences, and the PRC baseline they replace.

A "vote" is one judge sample in one order: a Match with ``votes=V`` yields 2V samples
(V per order), and a sample goes to the side with the higher score (½ each on equal
scores). A pair's outcome is its majority: 1, ½ (split vote) or 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import combinations

import numpy as np

from arenabench.aggregation import kemeny_greedy, order_wins, pool_unsupported
from arenabench.diagnostics import triangles
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.failures import failure_flags, split_failures
from arenabench.rewards.reference import REFERENCE_POLICIES, AnchorPool
from arenabench.types import Group, MatchResult


def votes_for(m: MatchResult) -> tuple[float, float] | None:
    """(votes for i, votes for j) over the match's successful samples; None if it failed."""
    if m.failed or not m.samples:
        return None
    vi = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in m.samples)
    return vi, len(m.samples) - vi


def majority(vi: float, vj: float) -> float:
    return 1.0 if vi > vj else 0.5 if vi == vj else 0.0


def tally(size: int, results) -> tuple[np.ndarray, np.ndarray, int]:
    """Vote matrix (W[i, j] = votes for i over j), majority wins per index, failed matches."""
    W = np.zeros((size, size))
    wins = np.zeros(size)
    ok, failed = split_failures(results)
    for m in ok:
        v = votes_for(m)
        W[m.i, m.j], W[m.j, m.i] = v
        o = majority(*v)
        wins[m.i] += o
        wins[m.j] += 1.0 - o
    return W, wins, failed


def three_cycles(W: np.ndarray) -> int:
    """Directed 3-cycles of the strict-majority graph: intransitive triples."""
    return triangles(W > W.T)[1]


def _check_alpha(c) -> None:
    if not (isinstance(c.alpha, int | float) and math.isfinite(c.alpha) and c.alpha > 0):
        raise ValueError(f"{c.name}: alpha must be a finite number > 0; got {c.alpha!r}")


@register("rrc_scr")
@dataclass
class RRCSCR(Constructor):
    """Self-comparison: all N(N−1)/2 pairs, majority over the 2V samples of each; reward
    α·(pair wins), a split vote counting ½. With ``cara`` the pairwise vote matrix is
    repaired into one order by the greedy weighted-Kemeny heuristic (equal margins broken by
    each trajectory's total votes) and the reward is α·(its win counts, N−1 … 0), so cyclic
    preferences cannot cancel out. A failed pair gives no
    win to either side (flagged); under CARA it carries no weight.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. The majority already counts a split vote (every 2V-sample tie) as ½
    for each side, so all ties give every trajectory (N−1)/2 and all failures 0: equal rewards.
    Under CARA, neighbours of the Kemeny order that are tied in votes and in Borda count were
    put in order by index alone; such runs share their mean win count.
    """

    alpha: float = 0.1
    cara: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_alpha(self)

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        results = yield [self.match(i, j) for i, j in combinations(range(n), 2)]
        W, wins, failed = tally(n, results)
        cycles = three_cycles(W)
        extra = {
            "votes": W,
            "pair_wins": wins.copy(),
            "cycles": cycles,
            "summary": {"cyclic": float(cycles > 0)},
        }
        if self.cara:
            order, cost = kemeny_greedy(W, tiebreak=W.sum(1))  # equal margins: Borda count
            wins = pool_unsupported(order_wins(order), order, W)
            extra.update(kemeny_order=order, kemeny_disagreement=cost)
        flags = failure_flags(failed)
        return Outcome(reward=self.alpha * wins, flags=flags, extra=extra)


@register("rrc_agr")
@dataclass
class RRCAGR(Constructor):
    """Anchor-guided: each rollout vs the ``n_anchors`` anchors of a **fixed reference
    policy** (``reference``, a registered policy), majority over 2V samples per pair; reward
    α·(wins over anchors). Anchors live in an :class:`AnchorPool` — generated once per
    prompt, reused every step (cost counted once: ``extra["summary"]["reference_rollouts"]``),
    regenerated every ``refresh_every`` steps if > 0, stored at ``pool_path`` if given. A
    failed pair is no win (flagged). Replace ``pool`` to use precomputed anchors.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. A split vote is ½ a win and a failed pair none, for every rollout
    alike, so all ties or all failures give equal rewards (advantage 0); nothing is ordered by
    index or seed.
    """

    alpha: float = 0.1
    n_anchors: int = 4
    refresh_every: int = 0
    reference: str = "simulated"
    pool_path: str | None = None
    pool: AnchorPool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_alpha(self)
        self.pool = AnchorPool(
            REFERENCE_POLICIES.get(self.reference), self.n_anchors, self.refresh_every, self.pool_path
        )

    def bind_reference(self, policy) -> None:
        """A trainer's reference policy replaces the simulator's; a named real one stays."""
        if self.reference == "simulated":
            self.pool.policy = policy

    def prepare(self, group: Group, step: int) -> Group:
        before = self.pool.generated
        anchors = self.pool.anchors(group, step)
        return replace(
            group, references=anchors, meta={**group.meta, "reference_rollouts": self.pool.generated - before}
        )

    def play(self, group, rng):
        cost = {"summary": {"reference_rollouts": group.meta.get("reference_rollouts", 0)}}
        if why := self.trivial(group):
            out = trivial_outcome(group, why)
            out.extra.update(cost)
            return out
        n, k = len(group), len(group.references)
        results = yield [self.match(i, n + a) for i in range(n) for a in range(k)]
        _, wins, failed = tally(n + k, results)
        wins = wins[:n]  # the anchors' own tallies are not rewarded
        flags = failure_flags(failed)
        return Outcome(reward=self.alpha * wins, flags=flags, extra={"anchor_wins": wins, **cost})


@register("prc")
@dataclass
class PRC(Constructor):
    """Probability reward: the judge's P(candidate beats the greedy reference), averaged
    over both orders; the reference itself gets ½ (what mirroring gives it against itself).
    Needs a judge that reports P(A) (``PairJudgment.prob_a``). Under chain-of-thought those
    probabilities saturate near 0 and 1 — ``extra`` holds their 10-bucket histogram and
    ``summary["prob_extreme"]``, the share in [0, 0.1] ∪ [0.9, 1]. A failed comparison
    leaves that candidate unranked (flagged).

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. A judge that cannot tell the pair apart reports P = ½, the reference's
    own reward, so all ties give equal rewards; all failures leave only the reference ranked
    (advantage 0 for everyone).
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        a = group.anchor
        results = yield [self.match(i, a) for i in range(len(group)) if i != a]
        reward = np.full(len(group), np.nan)
        reward[a] = 0.5
        probs: list[float] = []
        ok, failed = split_failures(results)
        for m in ok:
            if math.isnan(m.prob_i):
                raise ValueError(
                    "prc needs a judge that reports P(A is better) (PairJudgment.prob_a); this judge "
                    "returns scores only"
                )
            reward[m.i] = m.prob_i
            probs += m.probs
        p = np.asarray(probs)
        hist = np.histogram(p, bins=10, range=(0.0, 1.0))[0]
        extreme = float(np.mean((p <= 0.1) | (p >= 0.9))) if len(p) else math.nan
        flags = failure_flags(failed)
        return Outcome(
            reward=reward, flags=flags, extra={"prob_hist": hist, "summary": {"prob_extreme": extreme}}
        )
