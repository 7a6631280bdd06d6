"""ArenaRL seeded single-elimination (the paper's chosen topology): 2N−2 comparisons."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.brackets import (
    Seeding,
    Tiebreak,
    anchor_phase,
    lattice_seeding,
    place_anchor_by_record,
    pool_ranks,
    seed_order,
    single_elimination,
    tier_scores,
)
from arenabench.types import JudgeTraits

log = logging.getLogger(__name__)


class AnchorRule:
    """How ``seeded_single_elim`` seeds, compares and places its anchor (``anchor_seed``); this
    base is the paper's rule, ``mean``: every hook leaves ``anchor_phase``'s result as it is.
    A rule is a stateless object of four hooks, applied by ``SeededSingleElim.play`` in this
    order: ``values`` (what the bracket is seeded on, and what the anchor is compared on),
    ``sits_out`` (the anchor seeds the explorers' bracket and plays none of it), ``tiebreak``
    (the rule's own evidence for a tied or failed bracket game, ``brackets.Seeding``) and
    ``place`` (the anchor's final rank). ``ANCHOR_RULES`` are the production rules; the rules
    measured and not taken are the study's (``experiments/anchor_bias.py``). Why each:
    ``docs/constructors-notes.md`` §3."""

    name: ClassVar[str] = "mean"
    sits_out: ClassVar[bool] = False

    def values(
        self, score: np.ndarray, results: list, anchor: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """(the seeding scores the bracket is seeded on, the ones its tier key and ``decide``
        compare) from ``anchor_phase``'s ``score`` and seeding ``results``."""
        return score, score

    def tiebreak(self, anchor: int) -> Tiebreak | None:
        """The rule's own evidence for a tied or failed bracket game (``brackets.Tiebreak``)."""
        return None

    def place(self, rank: np.ndarray, depth: np.ndarray, anchor: int, seeding_results: list) -> np.ndarray:
        """The group's ranks (before coin-flip pooling) with the anchor placed by the rule."""
        return rank


class Lattice(AnchorRule):
    """``lattice``: the anchor's mean stochastically rounded onto the replies' score lattice, for
    seeding and comparing alike (``brackets.lattice_seeding``); ``mean`` on continuous replies."""

    name = "lattice"

    def values(self, score, results, anchor, rng):
        value = lattice_seeding(score, results, anchor, rng)
        return value, value


class Record(AnchorRule):
    """``record``, for a judge that repeats its verdicts: the anchor seeds the explorers' bracket,
    sits it out (2N − 3 comparisons) and is ranked by its seeding record, L + T/2
    (``brackets.place_anchor_by_record``)."""

    name = "record"
    sits_out = True

    def place(self, rank, depth, anchor, seeding_results):
        return place_anchor_by_record(rank, anchor, seeding_results)


ANCHOR_RULES: Mapping[str, AnchorRule] = {r.name: r for r in (AnchorRule(), Lattice(), Record())}

# anchor_seed=auto: a judge that draws afresh less than this share of a reply's noise when re-asked
# repeats its verdicts, and the anchor's bracket games would mostly replay its seeding games
REPEATS_BELOW = 0.5
_WARNED: set[str] = set()  # judge types warned about once: they declare no rejudge_share


def auto_anchor_seed(traits: JudgeTraits | None) -> str:
    """``anchor_seed=auto``'s rule for a judge of ``traits`` (``types.JudgeTraits``), by its
    ``rejudge_share``: ``record`` for a judge that repeats a verdict when re-asked
    (share below ``REPEATS_BELOW``: a temperature-0 LLM judge, the LLMBar fits, the MT-bench
    fit's 0.06), ``lattice`` for one that re-judges (the simulated presets: 1), and ``lattice``
    for a judge that does not say (no judge bound: a test driving ``play``; an LLM judge at a
    temperature above 0, logged once as a warning: measure it with ``arenabench calibrate`` or
    set ``anchor_seed``). ``lattice`` is the paper's ``mean`` on continuous replies."""
    if traits is None:
        return "lattice"
    share = traits.rejudge_share
    if share is None and traits.judge not in _WARNED:
        _WARNED.add(traits.judge)
        log.warning(
            "seeded_single_elim: anchor_seed=auto: %s declares no rejudge_share (how much of a reply "
            "a re-asked request draws afresh); ranking as for a judge that re-judges (lattice). Set "
            "anchor_seed=record if it repeats its verdicts (docs/constructors-notes.md §3)",
            traits.judge,
        )
    return "record" if share is not None and share < REPEATS_BELOW else "lattice"


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
    mean of the player's seeding score, counted once, and its bracket match scores. A bracket
    game against a player already met — every bracket game of the anchor, which met everyone in
    seeding — is a new judgment (``brackets.rematch``), not a replay of the seeding verdict.

    The anchor's seeding rule (``anchor_seed``, an ``AnchorRule``): ``"auto"`` (default,
    ``auto_anchor_seed``) is ``record`` for a judge that repeats its verdicts when re-asked
    (``rejudge_share`` < ½), else ``lattice``, read off the judge the engine runs it against
    (``bind_judge``); ``"mean"``, the paper's: the anchor seeded on its mean seeding score;
    ``"lattice"``: that mean stochastically rounded onto the replies' score lattice (on
    continuous replies ``mean`` exactly); ``"record"``: the anchor sits the bracket out (2N − 3
    comparisons) and is ranked by its seeding record. Why, what each costs in fidelity, the
    anchor's bias under each, and the rules measured and not taken (``match``, ``neutral``,
    ``h2h``, ``h2h_tier``, ``lattice_key``: ``experiments/anchor_bias.py``):
    ``docs/constructors-notes.md`` §3.

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
    anchor_seed: str = "auto"
    # the rules anchor_seed may name besides auto (a study adds its own: experiments/anchor_bias.py)
    rules: ClassVar[Mapping[str, AnchorRule]] = ANCHOR_RULES
    # the rule ``auto`` stands for, set by ``bind_judge`` (the engine's judge's traits); unbound: lattice
    _auto: str = field(default="lattice", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.anchor_seed != "auto" and self.anchor_seed not in self.rules:
            raise ValueError(
                f"seeded_single_elim: anchor_seed must be one of {', '.join(['auto', *self.rules])}; "
                f"got {self.anchor_seed!r}"
            )

    def bind_judge(self, traits: JudgeTraits | None) -> None:
        """``anchor_seed=auto``: the rule for the judge of ``traits`` (``auto_anchor_seed``)."""
        if self.anchor_seed == "auto":
            rule = auto_anchor_seed(traits)
            if rule != self._auto:
                log.info("seeded_single_elim: anchor_seed=auto -> %s for %s", rule, traits and traits.judge)
            self._auto = rule

    @property
    def rule(self) -> str:
        """The anchor seeding rule ``play`` follows: ``anchor_seed``, ``auto`` resolved."""
        return self._auto if self.anchor_seed == "auto" else self.anchor_seed

    def play(self, group, rng):
        if why := self.trivial(group):
            return trivial_outcome(group, why)
        n, a = len(group), group.anchor
        rule = self.rules[self.rule]
        seed_score, history, seed_failed = yield from anchor_phase(self, group)
        seed_score, key_score = rule.values(seed_score, history, a, rng)
        if rule.sits_out:
            explorers = [i for i in range(n) if i != a]
            seeds = [explorers[k] for k in seed_order(seed_score[explorers], rng)]
        else:
            seeds = seed_order(seed_score, rng)
        seeding = Seeding(key_score, len(history), rule.tiebreak(a))
        flags: Counter[str] = Counter({"failed_seeding": seed_failed} if seed_failed else {})
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        # depth: the round in which a player lost; the champion gets rounds + 1
        depth, _ = yield from single_elimination(self, seeds, history, flags, rng, links, seeding, n)
        if rule.sits_out:
            depth[a] = np.nan  # unranked among the explorers, then placed by the rule
        rank = ranks_from_keys(depth, tier_scores(n, history, seeding))
        # before pooling: a placed anchor's slot is among the evidence-ordered ranks; pooling then
        # moves only the players joined by coin flips
        rank = rule.place(rank, depth, a, history[: seeding.matches])
        rank = pool_ranks(rank, links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={
                "seeds": seeds,
                "seed_score": seed_score,  # what the bracket was seeded on
                "depth": depth,
                "coin_flips": links,
                "anchor_seed": rule.name,
            },
        )
