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
    round_pairs,
    seed_order,
    seeded_slots,
)

SEEDINGS = ("random", "anchor")


@register("double_elim")
@dataclass
class DoubleElim(Constructor):
    """Seeding ``random`` (the paper's Table 2 setting) or ``anchor`` (+N−1 comparisons).

    Each wave plays one winners'-bracket round (seeded slots, top seeds get byes) and, in
    the same wave, one losers'-bracket round: the losers'-bracket players are paired
    best seed vs worst seed, the best seed taking the bye when their number is odd; winners'
    bracket losers drop in after the wave. Then a grand final (WB champion vs LB champion)
    and, with ``grand_final_reset`` and an LB-champion win, one deciding rematch. Every
    match ends one of 2(N−1) (+1 on a reset) lives, so the bracket costs 2N−2 or 2N−1
    comparisons. Rank: later elimination is better (champion first), ties by mean match
    score. A tied or failed match goes to the higher seed (flagged).
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
            seeds = seed_order(seed_score)
            if seed_failed:
                flags["failed_seeding"] += seed_failed
        else:
            seeds = [int(x) for x in rng.permutation(n)]
        pos = {p: k for k, p in enumerate(seeds)}
        out_wave = np.zeros(n)  # wave of the second defeat; the champion gets the last wave + 1
        wb: list[int | None] = seeded_slots(seeds)
        lb: list[int] = []
        wave = 0

        while len(wb) > 1 or len(lb) > 1:
            wave += 1
            wb_pairs, wb_games = round_pairs(wb) if len(wb) > 1 else ([], [])
            lb_sorted = sorted(lb, key=pos.__getitem__)
            lb_bye = [lb_sorted.pop(0)] if len(lb_sorted) % 2 else []
            half = len(lb_sorted) // 2
            lb_games = [(lb_sorted[k], lb_sorted[-1 - k]) for k in range(half)]
            decided = yield from play_games(self, wb_games + lb_games, pos, history, flags)
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
            ((w, loser),) = yield from play_games(self, [(champ, lb[0])], pos, history, flags)
            if w != champ and self.grand_final_reset:
                wave += 1
                ((w, loser),) = yield from play_games(self, [(champ, lb[0])], pos, history, flags)
            out_wave[loser] = wave
            champ = w
        out_wave[champ] = wave + 1
        rank = ranks_from_keys(out_wave, mean_scores(n, history))
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={"seeds": seeds, "out_wave": out_wave, "comparisons_bracket": len(history)},
        )
