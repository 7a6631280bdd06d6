"""ArenaRL double-elimination: winners' and losers' brackets; out after two defeats."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, mean_scores, register, trivial_outcome
from arenabench.rewards.brackets import (
    advance,
    anchor_phase,
    play_games,
    pool_ranks,
    round_pairs,
    seed_order,
    seeded_slots,
)

SEEDINGS = ("random", "anchor")


@register("double_elim")
@dataclass
class DoubleElim(Constructor):
    """ArenaRL's double elimination: winners' and losers' brackets, out after two defeats (2N−2
    or 2N−1 comparisons).

    Seeding ``random`` (the paper's Table 2 setting) or ``anchor`` (+N−1 comparisons).

    Each wave plays one winners'-bracket round (seeded slots, top seeds get byes) and, in
    the same wave, one losers'-bracket round: the losers'-bracket players are paired
    best seed vs worst seed; when their number is odd one takes a bye: under ``anchor`` seeding
    the best seed (its seeding score is evidence), under ``random`` seeding the bye rotates —
    the player with the fewest losers'-bracket byes so far, the best random seed among those —
    so no randomly seeded player collects them; winners'-bracket losers drop in after the wave.
    Then a grand final (WB champion vs LB champion) and, with ``grand_final_reset`` and an
    LB-champion win, one deciding rematch. Every
    match ends one of 2(N−1) (+1 on a reset) lives, so the bracket costs 2N−2 or 2N−1
    comparisons. Rank: later elimination is better (champion first), ties by mean match
    score.

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
        if self.seeding == "anchor":
            seed_score, history, seed_failed = yield from anchor_phase(self, group)
            seeds = seed_order(seed_score, rng)
            if seed_failed:
                flags["failed_seeding"] += seed_failed
        else:
            seeds = [int(x) for x in rng.permutation(n)]
        pos = {p: k for k, p in enumerate(seeds)}
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        lb_byes = Counter()
        out_wave = np.zeros(n)  # wave of the second defeat; the champion gets the last wave + 1
        wb: list[int | None] = seeded_slots(seeds)
        lb: list[int] = []
        wave = 0

        while len(wb) > 1 or len(lb) > 1:
            wave += 1
            wb_pairs, wb_games = round_pairs(wb) if len(wb) > 1 else ([], [])
            lb_sorted = sorted(lb, key=pos.__getitem__)
            lb_bye = []
            if len(lb_sorted) % 2:  # the best seed; random seeds: fewest byes so far first
                rotate = self.seeding == "random"
                lb_bye = [min(lb_sorted, key=lambda p: (lb_byes[p] if rotate else 0, pos[p]))]
                lb_sorted.remove(lb_bye[0])
                lb_byes[lb_bye[0]] += 1
            half = len(lb_sorted) // 2
            lb_games = [(lb_sorted[k], lb_sorted[-1 - k]) for k in range(half)]
            decided = yield from play_games(self, wb_games + lb_games, history, flags, rng, links)
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
            ((w, loser),) = yield from play_games(self, [(champ, lb[0])], history, flags, rng, links)
            if w != champ and self.grand_final_reset:
                wave += 1
                ((w, loser),) = yield from play_games(self, [(champ, lb[0])], history, flags, rng, links)
            out_wave[loser] = wave
            champ = w
        out_wave[champ] = wave + 1
        rank = pool_ranks(ranks_from_keys(out_wave, mean_scores(n, history)), links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={
                "seeds": seeds,
                "out_wave": out_wave,
                "comparisons_bracket": len(history),
                "coin_flips": links,
                "lb_byes": dict(lb_byes),
            },
        )
