"""RULER (OpenPipe ART): one listwise judge call ranks the whole group; option: m calls, averaged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, check_count, register, trivial_outcome
from arenabench.rewards.failures import failure_flags, split_failures
from arenabench.types import Rank, RankResult


def rank_scores(n: int, results: list[RankResult]) -> np.ndarray:
    """Each trajectory's mean score over the rankings that produced one (``RankResult.scores``:
    items ranked below it, tied items sharing; already the mean over a ranking's votes); NaN for
    a trajectory no successful ranking showed."""
    tot, cnt = [0.0] * n, [0] * n
    for r in split_failures(results)[0]:
        for i, s in zip(r.items, r.scores, strict=True):
            tot[i] += s
            cnt[i] += 1
    return np.array([t / c if c else np.nan for t, c in zip(tot, cnt, strict=True)])


@register("listwise")
@dataclass
class Listwise(Constructor):
    """RULER's listwise reward: one judge call ranks the whole group (``calls`` = 1: N responses
    in one prompt, each prefilled once — the token floor of a judge that sees every response).

    RULER asks its judge for a score in [0, 1] per trajectory and uses the scores as rewards; here
    the judge answers a ranking (ties allowed, ``types.RankJudgment``: each response gets the
    number ranked below it, tied ones share), the group is ranked by it and the rank goes
    through the shared path (rank reward ``1 − rank/(N−1)``, group standardization) like every
    tournament's, so the arms differ only in how the judge is asked.

    ``calls`` = m ≥ 1 rankings of the whole group, in one wave, each shown in its own random order
    (``rng.permutation``: the engine's generator, deterministic per seed, step and group; RULER
    shows the group in its given order, which would hand a position-biased judge's favour to
    whatever sits first — here the greedy anchor); the m rankings are the m judge calls, each
    with ``votes`` samples, and a list shown twice in the same order asks new samples (``sample``
    = c·votes), so the engine never merges two of them. Aggregation: each trajectory's mean score
    over the successful rankings, ranks by that mean, equal means sharing their mean rank.

    Cost: m·votes judge calls, 1 wave; each call prefills all N responses once.

    No information, no advantage: a tie in the ranking (equal points) or in the mean gives equal
    ranks; a failed ranking (after the engine's retries) is left out of the mean and flagged
    ``failed_matches:<count>``; when every ranking failed, every trajectory is unranked (advantage
    0). Nothing is ordered by index or by a coin.
    """

    unused_params = ("order",)  # one list per call: no pair to show in an order
    calls: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count(self.calls, "calls", self.name)

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        shown = [tuple(int(i) for i in rng.permutation(n)) for _ in range(self.calls)]
        results = yield [Rank(items, self.votes, sample=c * self.votes) for c, items in enumerate(shown)]
        score = rank_scores(n, results)
        return Outcome(
            rank=ranks_from_keys(score),
            flags=failure_flags(split_failures(results)[1]),
            extra={"score": score, "shown": shown},
        )
