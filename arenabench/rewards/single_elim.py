"""ArenaRL seeded single-elimination (the paper's chosen topology): 2N−2 comparisons."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, mean_scores, register, trivial_outcome
from arenabench.rewards.brackets import anchor_phase, pool_ranks, seed_order, single_elimination


@register("seeded_single_elim")
@dataclass
class SeededSingleElim(Constructor):
    """ArenaRL's seeded single-elimination: anchor seeding, then a seeded bracket; rank by survival
    depth (2N−2 comparisons).

    Phase 1: anchor-based seeding (N−1 comparisons, one wave). Phase 2: a bracket seed 1
    vs N, 2 vs N−1, … with byes for the top seeds (N−1 comparisons, ⌈log2 N⌉ waves).

    Rank by survival depth (champion 0, final loser 1, semi-final losers 2–3, …; the
    paper's "finals receive ranks 1–2, semi-finals 3–6" is off by one: a final has a single
    loser), ties within a tier broken by the mean of all the player's match scores, seeding
    included.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Equal or NaN (failed) seeding scores are ordered by a seeded random
    permutation, not by index (distinct seeding scores are evidence and seed as in the paper).
    A tied or failed bracket game (flagged ``tied_match`` / ``failed_match``) advances the
    player with the higher mean match score so far — other evidence, legitimately used — and
    when those are equal or missing a seeded coin flip (``coin_flip``); players joined by
    coin-flip games share their mean rank, so a judge that ties or fails every call gives every
    player the same rank and zero advantage. Without ties or failures no random draw is made.
    """

    needs_anchor = True

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        seed_score, history, seed_failed = yield from anchor_phase(self, group)
        seeds = seed_order(seed_score, rng)
        flags: Counter[str] = Counter({"failed_seeding": seed_failed} if seed_failed else {})
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        # depth: the round in which a player lost; the champion gets rounds + 1
        depth, _ = yield from single_elimination(self, seeds, history, flags, rng, links)
        rank = pool_ranks(ranks_from_keys(depth, mean_scores(n, history)), links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={"seeds": seeds, "depth": depth, "coin_flips": links},
        )
