"""ArenaRL seeded single-elimination (the paper's chosen topology): 2N−2 comparisons."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.brackets import (
    Seeding,
    anchor_phase,
    pool_ranks,
    seed_order,
    single_elimination,
    tier_scores,
)


@register("seeded_single_elim")
@dataclass
class SeededSingleElim(Constructor):
    """ArenaRL's seeded single-elimination: anchor seeding, then a seeded bracket; rank by survival
    depth (2N−2 comparisons).

    Phase 1: anchor-based seeding (N−1 comparisons, one wave). Phase 2: a bracket seed 1
    vs N, 2 vs N−1, … with byes for the top seeds (N−1 comparisons, ⌈log2 N⌉ waves).

    Rank by survival depth (champion 0, final loser 1, semi-final losers 2–3, …; the
    paper's "finals receive ranks 1–2, semi-finals 3–6" is off by one: a final has a single
    loser), ties within a tier broken by the accumulated average score (``tier_scores``): the
    mean of the player's seeding score — one value per trajectory, the anchor's being its mean
    over the seeding phase, as the paper's seeding assigns it — and its bracket match scores.
    Counting the anchor's N−1 seeding matches one by one made its key a seeding average and
    biased the greedy anchor's advantage in equal-quality groups (issue 31). A bracket game
    against a player already met — every bracket game of the anchor, which met everyone in
    seeding — is a new judgment (``brackets.rematch``), not a replay of the seeding verdict.
    Remaining: with an integer-rubric judge at N = 16 the anchor's mean advantage in
    equal-quality groups is still −0.069 ± 0.019 (4,000 groups; N = 8 and the continuous judge
    are within 1 SE of 0): a mean of N−1 integer scores against single integer scores in tied
    games and tiers (``docs/constructors-notes.md``).

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
        seeding = Seeding(seed_score, len(history))
        flags: Counter[str] = Counter({"failed_seeding": seed_failed} if seed_failed else {})
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        # depth: the round in which a player lost; the champion gets rounds + 1
        depth, _ = yield from single_elimination(self, seeds, history, flags, rng, links, seeding)
        rank = pool_ranks(ranks_from_keys(depth, tier_scores(n, history, seeding)), links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={"seeds": seeds, "depth": depth, "coin_flips": links},
        )
