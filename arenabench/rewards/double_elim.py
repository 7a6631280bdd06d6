"""ArenaRL double-elimination: winners' and losers' brackets; out after two defeats."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.brackets import (
    Seeding,
    advance,
    anchor_phase,
    play_games,
    pool_ranks,
    round_pairs,
    seed_order,
    seeded_slots,
    tier_scores,
)

SEEDINGS = ("random", "anchor")


@register("double_elim")
@dataclass
class DoubleElim(Constructor):
    """ArenaRL's double elimination: winners' and losers' brackets, out after two defeats (2N−2
    or 2N−1 comparisons).

    Seeding ``random`` (the paper's Table 2 setting) or ``anchor`` (+N−1 comparisons).

    Each wave plays one winners'-bracket round and, in the same wave, one losers'-bracket round.
    The winners' bracket under ``anchor`` seeding is the seeded bracket (padded to a power of
    two, byes to the top seeds: their seeding scores are evidence). Under ``random`` seeding the
    whole field plays each round — ⌊field/2⌋ games, at most one bye a round, rotated (fewest
    winners'-bracket byes first) — as in the authors' code: a padded bracket handed
    2^⌈log2 N⌉ − N first-round byes to random players (at N = 12, four random players skipped a
    game), no evidence at all, and lost 0.026 Kendall τ to the authors' rule there (issue 31; now
    level). At a power of two both are the plain bracket. In the losers' bracket the players are
    paired best seed vs worst seed; when their number is odd one takes a bye: under ``anchor`` seeding
    the best seed (its seeding score is evidence), under ``random`` seeding the bye rotates —
    the player with the fewest losers'-bracket byes so far, the best random seed among those —
    so no randomly seeded player collects them; winners'-bracket losers drop in after the wave.
    Then a grand final (WB champion vs LB champion) and, with ``grand_final_reset`` and an
    LB-champion win, one deciding rematch. Every
    match ends one of 2(N−1) (+1 on a reset) lives, so the bracket costs 2N−2 or 2N−1
    comparisons. Rank: later elimination is better (champion first), ties by the accumulated
    average score (``brackets.tier_scores``: under anchor seeding the seeding score counts once).
    A rematch (a pair met before: losers' bracket, grand final, reset) is a new judgment
    (``brackets.rematch``), not a replay of the earlier verdict.

    The reset costs +1 comparison (2 judge calls) and +1 wave, and how often it is played depends
    on the judge: in 25–30% of groups on the continuous ``calibrated`` judge (N = 4–16), 33–41% on
    the tie-heavy ``integer`` one (it ties 55% of bidirectional matches; a tied final goes to the
    evidence or a coin, so the LB champion "wins" it more often) — so the mean cost is 2N − 2 +
    0.25…0.41 comparisons (``docs/constructors-notes.md`` has the rates per N). Before the final
    was a new judgment it mostly replayed an earlier game, and the reset was played in < 5% of
    groups on a continuous judge but 32–38% on the integer one. ``grand_final_reset=False``
    gives exactly 2N−2.

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Random seeding draws a permutation from the group's ``rng``; anchor
    seeding orders equal or NaN seeding scores by a seeded random permutation, never by index.
    A tied or failed game (flagged ``tied_match`` / ``failed_match``) goes to the player with the
    higher mean match score so far (other evidence, legitimately used), else to a seeded coin
    flip (``coin_flip``) — never to the higher seed, which under random seeding is no evidence
    at all and favoured the same randomly seeded players in every tie. Players joined by
    coin-flip games share their mean rank, so a judge that ties or fails every call gives
    everyone the same rank and zero advantage.
    """

    seeding: str = "random"
    grand_final_reset: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seeding not in SEEDINGS:
            raise ValueError(
                f"double_elim: seeding must be one of {', '.join(SEEDINGS)}; got {self.seeding!r}"
            )

    @property
    def needs_anchor(self) -> bool:  # type: ignore[override]
        return self.seeding == "anchor"

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n = len(group)
        history = []
        flags: Counter[str] = Counter()
        seeding = None  # random seeding: no seeding scores
        if self.seeding == "anchor":
            seed_score, history, seed_failed = yield from anchor_phase(self, group)
            seeds = seed_order(seed_score, rng)
            seeding = Seeding(seed_score, len(history))
            if seed_failed:
                flags["failed_seeding"] += seed_failed
        else:
            seeds = [int(x) for x in rng.permutation(n)]
        pos = {p: k for k, p in enumerate(seeds)}
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        lb_byes, wb_byes = Counter(), Counter()
        out_wave = np.zeros(n)  # wave of the second defeat; the champion gets the last wave + 1
        wb: list[int | None] = seeded_slots(seeds)
        if self.seeding == "random":  # the whole field plays each round (no padding; see above)
            wb = [p for p in wb if p is not None]
        lb: list[int] = []
        wave = 0

        while len(wb) > 1 or len(lb) > 1:
            wave += 1
            wb_pairs, wb_games = round_pairs(self._wb_round(wb, pos, wb_byes)) if len(wb) > 1 else ([], [])
            lb_sorted = sorted(lb, key=pos.__getitem__)
            lb_bye = []
            if len(lb_sorted) % 2:  # the best seed; random seeds: fewest byes so far first
                rotate = self.seeding == "random"
                lb_bye = [min(lb_sorted, key=lambda p: (lb_byes[p] if rotate else 0, pos[p]))]
                lb_sorted.remove(lb_bye[0])
                lb_byes[lb_bye[0]] += 1
            half = len(lb_sorted) // 2
            lb_games = [(lb_sorted[k], lb_sorted[-1 - k]) for k in range(half)]
            decided = yield from play_games(self, wb_games + lb_games, history, flags, rng, links, seeding)
            wb_res, lb_res = decided[: len(wb_games)], decided[len(wb_games) :]
            lb = lb_bye + [w for w, _ in lb_res]
            for _, loser in lb_res:
                out_wave[loser] = wave
            if wb_pairs:
                wb = advance(wb_pairs, wb_res)
                lb += [loser for _, loser in wb_res]
        champ = wb[0]
        if lb:  # grand final
            wave += 1
            final = [(champ, lb[0])]
            ((w, loser),) = yield from play_games(self, final, history, flags, rng, links, seeding)
            if w != champ and self.grand_final_reset:
                wave += 1
                ((w, loser),) = yield from play_games(self, final, history, flags, rng, links, seeding)
            out_wave[loser] = wave
            champ = w
        out_wave[champ] = wave + 1
        rank = pool_ranks(ranks_from_keys(out_wave, tier_scores(n, history, seeding)), links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={
                "seeds": seeds,
                "out_wave": out_wave,
                "comparisons_bracket": len(history),
                "coin_flips": links,
                "lb_byes": dict(lb_byes),
                "wb_byes": dict(wb_byes),
            },
        )

    def _wb_round(self, wb: list[int | None], pos: dict[int, int], byes: Counter) -> list[int | None]:
        """A winners'-bracket round's slots (adjacent slots meet). Anchor seeding: the padded
        seeded bracket as is (byes to the top seeds). Random seeding: the field of the round in
        bracket order; when it is odd, the player with the fewest winners'-bracket byes so far
        (the best random seed among those) sits out — a bye slot next to it — so at most one
        player a round skips a game, and at a power of two nothing changes."""
        if self.seeding == "anchor" or len(wb) % 2 == 0:
            return wb
        bye = min(wb, key=lambda p: (byes[p], pos[p]))
        byes[bye] += 1
        rest = [p for p in wb if p != bye]
        return rest + [bye, None]
