"""Pieces the elimination topologies share: the anchor seeding phase, the seeded bracket, and
the helpers they are built from."""

from __future__ import annotations

import numpy as np

from arenabench.rewards.base import Constructor
from arenabench.rewards.failures import split_failures
from arenabench.types import Group, MatchResult


def anchor_phase(c: Constructor, group: Group):
    """Yield one wave of (i vs anchor) matches; return (scores, results, n_failed).

    Exploratory score = its bidirectional summed score against the anchor; the anchor's
    score = the mean of its scores over those comparisons. A failed comparison leaves the
    explorer's score NaN (and out of the anchor's mean). ArenaRL's anchor topology is this
    phase alone; the brackets use it to seed.
    """
    a = group.anchor
    others = [i for i in range(len(group)) if i != a]
    results = yield [c.match(i, a) for i in others]
    score = np.full(len(group), np.nan)
    ok, failed = split_failures(results)
    for m in ok:
        score[m.i] = m.score_i
    if ok:
        score[a] = float(np.mean([m.score_j for m in ok]))
    return score, list(results), failed


def single_elimination(c: Constructor, seeds: list[int], history: list, flags):
    """Play the seeded bracket of ``seeds`` (best first; byes to the top seeds), one wave a
    round, recording matches in ``history`` and tie/failure flags in ``flags`` (a Counter).
    Return (the round each player lost in, the champion getting rounds + 1; the champion)."""
    seed_pos = {p: k for k, p in enumerate(seeds)}
    depth = np.zeros(len(seeds))
    alive = seeded_slots(seeds)
    rnd = 0
    while len(alive) > 1:
        rnd += 1
        pairs, games = round_pairs(alive)
        decided = yield from play_games(c, games, seed_pos, history, flags)
        for _, loser in decided:
            depth[loser] = rnd
        alive = advance(pairs, decided)
    depth[alive[0]] = rnd + 1
    return depth, alive[0]


def bracket_order(size: int) -> list[int]:
    """Standard seeded bracket positions (1-based seeds) for a power-of-two ``size``.

    Adjacent slots meet in round 1: 1 vs size, and seeds 1 and 2 can only meet in the
    final. ``bracket_order(8) == [1, 8, 4, 5, 2, 7, 3, 6]``.
    """
    order = [1]
    while len(order) < size:
        m = 2 * len(order) + 1
        order = [x for s in order for x in (s, m - s)]
    return order


def seeded_slots(seeds: list[int]) -> list[int | None]:
    """Slots of a bracket for players listed best seed first; ``None`` is a bye.

    For N not a power of two the bracket is padded to the next power of two and the
    *top* seeds get the byes (seed s meets the missing seed P+1−s).
    """
    n = len(seeds)
    size = 1 << max(0, (n - 1).bit_length())
    return [seeds[s - 1] if s <= n else None for s in bracket_order(size)]


def seed_order(score: np.ndarray) -> list[int]:
    """Players best-first by seeding score; NaN (failed seeding) goes last; ties by index."""
    key = np.nan_to_num(np.asarray(score, dtype=float), nan=-np.inf)
    return sorted(range(len(key)), key=lambda i: (-key[i], i))


def decide(m: MatchResult, x: int, y: int, seed_pos: dict[int, int]) -> tuple[int, int, str | None]:
    """(winner, loser, flag). A tie or failed match goes to the higher seed, flagged."""
    w = m.winner
    if w is None:
        hi, lo = (x, y) if seed_pos[x] < seed_pos[y] else (y, x)
        return hi, lo, "failed_match" if m.failed else "tied_match"
    return w, (y if w == x else x), None


def round_pairs(slots: list[int | None]) -> tuple[list[tuple], list[tuple[int, int]]]:
    """Adjacent slots of a bracket round, and those of them that are real games (no bye)."""
    pairs = [(slots[k], slots[k + 1]) for k in range(0, len(slots), 2)]
    return pairs, [(x, y) for x, y in pairs if x is not None and y is not None]


def advance(pairs: list[tuple], decided: list[tuple[int, int]]) -> list[int]:
    """The next round's slots: each game's winner (``decided`` in game order) or the bye holder."""
    winners = iter(w for w, _ in decided)
    return [x if y is None else y if x is None else next(winners) for x, y in pairs]


def play_games(c, games: list[tuple[int, int]], seed_pos: dict[int, int], history: list, flags):
    """Yield one wave of ``games``; record results in ``history``, tie/failure flags in ``flags``
    (a Counter); return (winner, loser) per game, ties and failures going to the higher seed."""
    results = yield [c.match(x, y) for x, y in games]
    decided = []
    for (x, y), m in zip(games, results, strict=True):
        history.append(m)
        w, loser, flag = decide(m, x, y, seed_pos)
        if flag:
            flags[flag] += 1
        decided.append((w, loser))
    return decided
