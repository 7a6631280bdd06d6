"""Order policies: in which slot order(s) the engine shows each comparison to the judge.

A pairwise judge favours a slot (position bias), and the bias is larger the closer the two
responses are (Shi et al., arXiv 2406.07791) — the regime of discriminative collapse. How a
comparison is shown decides what the bias does to the reward, and what the comparison costs:

* ``both`` (the default; ArenaRL's bidirectional protocol): each comparison in both orders, the
  two orders' scores summed. A constant bias cancels; 2 × ``votes`` judge calls per comparison.
* ``random``: one order per comparison, drawn by a coin that is a function of the engine seed,
  the prompt, the two texts and the wave (so it is deterministic, the same in every schedule and
  batching, and independent of the trajectories' indices and quality). The bias becomes
  zero-mean noise; ``votes`` calls per comparison.
* ``balanced``: one order per comparison, chosen so that within a group each trajectory sits in
  slot A as often as in slot B, as far as the comparison graph allows. A wave's comparisons
  start from the ``random`` orders; then directed paths are reversed while one lowers the sum of
  squared imbalances (A count − B count, counted over the group's earlier waves too) — at the end
  no reversal can lower it, which is the least sum of squares for this wave given the earlier
  ones. An even-degree comparison graph (a round-robin of odd N) ends with every imbalance 0; an
  odd degree leaves ±1. ``votes`` calls per comparison.
* ``fixed``: one order, as the constructor asked (``Match(i, j)``: i in slot A). The cheapest
  and the most exposed: a bias follows the topology's structure (e.g. every explorer in slot A
  against the anchor). ``votes`` calls per comparison.

A pair asked more than once in one wave of a group is shown the same way each time, so the
engine still judges it once. The policy is a constructor option (``Constructor.order``; conf
``reward.order``; spec ``round_robin:order=random``); the engine applies it to every match a
constructor yields. A single-order result is doubled onto the two-order scale (see
:class:`~arenabench.types.MatchResult`).
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

from arenabench.types import Group, Match, content_hash

ORDERS = ("both", "random", "balanced", "fixed")


def check_order(order: object, who: str) -> None:
    """One clear error naming the valid policies."""
    if order not in ORDERS:
        raise ValueError(f"{who}: order must be one of {', '.join(ORDERS)}; got {order!r}")


def coin(seed: int, group: Group, i: int, j: int, wave: int) -> int:
    """``i`` or ``j``: the trajectory a fair, seeded coin puts in slot A. A function of the seed,
    the prompt, the two texts (not of which is ``i``) and the wave."""
    ka, kb = group.arena[i].key, group.arena[j].key
    lo, hi = (i, j) if ka <= kb else (j, i)
    h = content_hash(f"order|{seed}|{group.key}|{min(ka, kb)}|{max(ka, kb)}|{wave}")
    return lo if h & 1 else hi


class Orienter:
    """One group's order policy across its waves: :meth:`orient` sets each match's ``first``."""

    def __init__(self, policy: str, group: Group, seed: int):
        check_order(policy, "engine")
        self.policy, self.group, self.seed = policy, group, seed
        self.imbalance = np.zeros(len(group.arena), dtype=int)  # A count − B count so far

    def orient(self, asks: list, wave: int) -> list:
        """The wave's asks with each match's shown order set (``both``: the asks unchanged)."""
        if self.policy == "both":
            return asks
        pairs = list(dict.fromkeys(frozenset((a.i, a.j)) for a in asks if isinstance(a, Match)))
        if self.policy == "fixed":
            first = {}
        else:
            first = {p: coin(self.seed, self.group, *sorted(p), wave) for p in pairs}
            if self.policy == "balanced":
                first = balance(first, self.imbalance)
        out = []
        for a in asks:
            if isinstance(a, Match):
                f = first.setdefault(frozenset((a.i, a.j)), a.i)  # fixed: the first asker's i
                a = dataclasses.replace(a, first=f)
                self.imbalance[f] += 1
                self.imbalance[a.j if f == a.i else a.i] -= 1
            out.append(a)
        return out


def balance(first: dict[frozenset, int], imbalance: np.ndarray) -> dict[frozenset, int]:
    """Re-orient the pairs (each ``pair → the member in slot A``) to the least sum of squared
    imbalances, given the ``imbalance`` (A − B) each node already has: reverse a directed path
    u → … → w (A-slot to B-slot along each pair) while ``b[u] − b[w] ≥ 3`` for the resulting
    ``b`` (such a reversal lowers Σb² by 4·(b[u] − b[w]) − 8 > 0, and none is left at an
    optimum of this convex orientation problem). Deterministic: nodes and edges in index order."""
    first = dict(first)
    b = imbalance.astype(int).copy()
    out: dict[int, list[frozenset]] = {}
    for p, f in first.items():
        (other,) = p - {f}
        b[f] += 1
        b[other] -= 1
        out.setdefault(f, []).append(p)
    nodes = sorted({x for p in first for x in p})
    while True:
        for u in sorted(nodes, key=lambda x: (-b[x], x)):
            path = _lowest_reachable(u, first, out, b)
            if path is not None:
                break
        else:
            return first
        for p in path:  # reverse every pair on the path
            f = first[p]
            (g,) = p - {f}
            out[f].remove(p)
            out.setdefault(g, []).append(p)
            first[p] = g
            b[f] -= 2
            b[g] += 2  # along the path the interior nodes' ±2 cancel: only u and w change


def _lowest_reachable(u: int, first, out, b) -> list[frozenset] | None:
    """The pairs of a directed path from ``u`` to the reachable node of least imbalance, if
    reversing it helps (``b[u] − b[w] ≥ 3``); else None. Breadth-first, ties by index."""
    prev: dict[int, frozenset | None] = {u: None}
    queue = deque([u])
    while queue:
        x = queue.popleft()
        for p in sorted(out.get(x, []), key=sorted):
            (y,) = p - {x}
            if y not in prev:
                prev[y] = p
                queue.append(y)
    w = min(prev, key=lambda x: (b[x], x))
    if b[u] - b[w] < 3:
        return None
    path = []
    while prev[w] is not None:
        p = prev[w]
        path.append(p)
        (w,) = p - {w}
    return path
