"""ArenaRL seeded single-elimination (the paper's chosen topology): 2N−2 comparisons."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.anchor import anchor_phase
from arenabench.rewards.base import Constructor, Outcome, mean_scores, register, trivial_outcome
from arenabench.rewards.brackets import advance, play_games, round_pairs, seed_order, seeded_slots


@register("seeded_single_elim")
@dataclass
class SeededSingleElim(Constructor):
    """Phase 1: anchor-based seeding (N−1 comparisons, one wave). Phase 2: a bracket seed 1
    vs N, 2 vs N−1, … with byes for the top seeds (N−1 comparisons, ⌈log2 N⌉ waves).

    Rank by survival depth (champion 0, final loser 1, semi-final losers 2–3, …; the
    paper's "finals receive ranks 1–2, semi-finals 3–6" is off by one: a final has a single
    loser), ties within a tier broken by the mean of all the player's match scores, seeding
    included. A tied or failed match advances the higher seed (flagged).
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        seed_score, history, seed_failed = yield from anchor_phase(self, group)
        seeds = seed_order(seed_score)
        seed_pos = {p: k for k, p in enumerate(seeds)}
        depth = np.zeros(n)  # round in which a player lost; the champion gets rounds + 1
        flags: Counter[str] = Counter({"failed_seeding": seed_failed} if seed_failed else {})
        alive = seeded_slots(seeds)
        rnd = 0
        while len(alive) > 1:
            rnd += 1
            pairs, games = round_pairs(alive)
            decided = yield from play_games(self, games, seed_pos, history, flags)
            for _, loser in decided:
                depth[loser] = rnd
            alive = advance(pairs, decided)
        depth[alive[0]] = rnd + 1
        rank = ranks_from_keys(depth, mean_scores(n, history))
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={"seeds": seeds, "depth": depth},
        )
