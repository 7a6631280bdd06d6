"""ArenaRL seeded single-elimination (the paper's chosen topology): 2N−2 comparisons."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from arenabench.advantages import ranks_from_keys
from arenabench.rewards.base import Constructor, Outcome, register, trivial_outcome
from arenabench.rewards.brackets import (
    ANCHOR_SEEDS,
    Seeding,
    anchor_phase,
    lattice_seeding,
    neutral_seeding,
    one_match_seeding,
    place_anchor_by_head_to_head,
    place_anchor_by_record,
    pool_ranks,
    seed_order,
    single_elimination,
    tier_scores,
)
from arenabench.types import JudgeTraits

log = logging.getLogger(__name__)

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

    The anchor's seeding rule (``anchor_seed``). ``"auto"`` (default, ``auto_anchor_seed``):
    ``record`` (below) for a judge that repeats its verdicts when re-asked (``rejudge_share`` < ½: a
    temperature-0 LLM judge, the fitted judges), else ``lattice`` (below; on continuous replies
    exactly the paper's ``mean``) — the unbiased rule for each kind of judge (issue 31.3,
    ``docs/constructors-notes.md`` §3), read off the judge the engine runs it against
    (``bind_judge``). ``"mean"``: the mean over its N−1 seeding matches — the paper's "plus the
    anchor's averaged score", as the authors' code has it. ``"match"``: its score in one of those
    matches, drawn at random (``brackets.one_match_seeding``), one match score like every
    explorer's. The mean is the better estimate (``match`` costs 0.002–0.011 Kendall τ in the
    fidelity study), but it is not exchangeable with the explorers' single scores it is sorted and
    compared against: on an integer-rubric judge single scores sit on a skewed lattice, and in
    groups of equal quality the greedy anchor's mean advantage is −0.069 ± 0.019 at N = 16 (issue
    31; 4,000 groups). With ``match`` every later rule treats the anchor as one more explorer, so on
    a judge that judges a rematch afresh its mean advantage is 0 by symmetry (+0.002 ± 0.014 there).
    On a judge that repeats its verdicts (the LLMBar fits) the anchor's bracket games copy its
    seeding and a bias remains under every rule (``docs/constructors-notes.md``). ``"neutral"``
    (``brackets.neutral_seeding``): the anchor at the tie point of its games, each explorer apart
    from it by what separated them in their own game, so the anchor-vs-explorer order always agrees
    with their game and is symmetric on any grid; it costs 0.020–0.037 τ on the simulated judges (an
    explorer's value carries the anchor's noise) and is measured, not recommended
    (``results/anchor_bias/``). ``"h2h"``: seeded as ``mean``, but a tied or failed bracket game
    between the anchor and an explorer goes by their own seeding game (``brackets.head_to_head``;
    tied there too: a coin flip, pooled), since under ``mean`` the anchor's off-lattice average
    almost never equals an explorer's and its tied games escape the no-information pooling.
    ``"h2h_tier"``: ``h2h`` plus the anchor placed inside its tier by its seeding games against its
    tier-mates (``brackets.place_anchor_by_head_to_head``). Both measured, neither recommended:
    biased on the integer judge at N = 8 (z +4.0, +5.5). ``"lattice"``
    (``brackets.lattice_seeding``): the mean, stochastically rounded onto the score lattice read off
    the judge's replies (expectation the mean, at most one step away), so the anchor ties an
    explorer as explorers tie each other; on continuous replies it is ``mean`` exactly. Unbiased in
    all four simulated cells (integer N = 16 −0.007 ± 0.014) at 0.005–0.009 τ on the integer judge
    (none on continuous ones); on the LLMBar fits, which repeat their verdicts, it leaves an upward
    bias (+0.04…+0.05 at N = 16) as every rule leaves one there. ``"lattice_key"``: the bracket
    seeded on the anchor's exact mean, the anchor compared — in the tier key and ``decide``'s
    evidence — on ``lattice``'s value. The bias lives where ties are settled (the anchor's
    off-lattice key never ties, so its tied games are never pooled), while the mean's fractional
    part is real evidence for the seed order: seeded on the lattice value with the mean as key, the
    integer N = 16 bias stays (−0.071 ± 0.019); keyed on the lattice it goes (−0.014 ± 0.013), at
    about half ``lattice``'s τ cost on the integer judge (none significant at 2,000 groups); on
    continuous replies it is ``mean`` exactly. Measured, not the default: on a verdict judge that
    re-judges (the LLMBar fits with ``rejudge_share`` ½ or 1) it is biased (chatgpt_llmbar, share 1,
    N = 8: −0.051 ± 0.017), where ``lattice`` is not (``results/anchor_bias/lattice_key/``).
    ``"record"`` (``brackets.place_anchor_by_record``), for a judge that repeats a verdict when
    re-asked (temperature 0; the LLMBar fits, ``rejudge_share = 0``): there the anchor's bracket
    games would replay its seeding games, and each explorer's seed is its result against the anchor,
    so the anchor's bracket results follow from its opponents' seeds. The anchor seeds the
    explorers' bracket and sits it out (2N − 3 comparisons); its rank is exactly its record over its
    N − 1 seeding games, L + T/2 (L explorers beat it, T tied it), the explorers keeping their
    bracket order on the other ranks. The rule is for such a judge, declared by the user choosing
    it: it asks nothing twice, so it needs no detection. Measured (4,000 groups): the anchor within
    1.5 SE of 0 under the three fitted judges (gpt4_llmbar N = 16 −0.001 ± 0.005), τ higher under
    the LLMBar fits (+0.007…+0.024); under the integer judge, which re-judges afresh, biased at N =
    16 (−0.030 ± 0.011) and τ −0.015 — ``lattice`` is that judge's option.

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
    # the rule ``auto`` stands for, set by ``bind_judge`` (the engine's judge's traits); unbound: lattice
    _auto: str = field(default="lattice", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.anchor_seed not in ANCHOR_SEEDS:
            raise ValueError(
                f"seeded_single_elim: anchor_seed must be one of {', '.join(ANCHOR_SEEDS)}; "
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
        n = len(group)
        rule = self.rule
        seed_score, history, seed_failed = yield from anchor_phase(self, group)
        if rule == "match":
            seed_score = one_match_seeding(seed_score, history, group.anchor, rng)
        elif rule == "neutral":
            seed_score = neutral_seeding(seed_score, history, group.anchor)
        elif rule == "lattice":
            seed_score = lattice_seeding(seed_score, history, group.anchor, rng)
        # lattice_key: the bracket is seeded on the mean, the anchor compared on the lattice
        key_score = seed_score
        if rule == "lattice_key":
            key_score = lattice_seeding(seed_score, history, group.anchor, rng)
        if rule == "record":  # the anchor sits the bracket out
            explorers = [i for i in range(n) if i != group.anchor]
            seeds = [explorers[k] for k in seed_order(seed_score[explorers], rng)]
        else:
            seeds = seed_order(seed_score, rng)
        h2h = group.anchor if rule.startswith("h2h") else None
        seeding = Seeding(key_score, len(history), h2h)
        flags: Counter[str] = Counter({"failed_seeding": seed_failed} if seed_failed else {})
        links: list[tuple[int, int]] = []  # coin-flip games: they separate no one
        # depth: the round in which a player lost; the champion gets rounds + 1
        depth, _ = yield from single_elimination(self, seeds, history, flags, rng, links, seeding, n)
        if rule == "record":
            depth[group.anchor] = np.nan  # unranked among the explorers, then placed by its record
        rank = ranks_from_keys(depth, tier_scores(n, history, seeding))
        if rule == "record":
            # before pooling: the anchor's slot is among the explorers' evidence-ordered ranks
            # 0..N−2; pooling then moves only the explorers joined by coin flips, never the anchor
            rank = place_anchor_by_record(rank, group.anchor, history[: seeding.matches])
        elif rule == "h2h_tier":
            rank = place_anchor_by_head_to_head(rank, depth, group.anchor, history[: seeding.matches])
        rank = pool_ranks(rank, links)
        return Outcome(
            rank=rank,
            flags=[f"{k}:{v}" for k, v in flags.items()],
            extra={
                "seeds": seeds,
                "seed_score": seed_score,  # what the bracket was seeded on
                "depth": depth,
                "coin_flips": links,
                "anchor_seed": rule,
            },
        )
