"""Question kinds: each thing the engine can ask a judge is one record, :class:`QuestionKind`.

A constructor yields asks (``types.Match``, ``Score``, ``Rank``); the engine turns each ask into
judge requests, sends each kind's requests to its judge's batch method, validates every reply
once and folds an ask's replies back into its result. The judge wrappers (cache, faults,
latency, the stack) forward, key, fault and time every kind alike. Everything that differs
between kinds is a field of its record here, and the engine and every wrapper loop over
:data:`KINDS` instead of carrying parallel code per kind:

* pair: ``Match`` → ``PairRequest`` (shown orders × votes) → the judge's ``judge_pairs``
  (``Engine.judge``) → ``types.pair_reply`` → ``MatchResult`` (the orders' vote means summed);
* point: ``Score`` → ``PointRequest`` (votes) → ``score_points`` (``Engine.pointwise_judge``)
  → ``types.point_reply`` → ``ScoreResult`` (the vote mean);
* rank: ``Rank`` → ``RankRequest`` (votes; the items in the listed order, which no order policy
  changes) → ``rank_lists`` (``Engine.listwise_judge``) → ``types.rank_reply`` → ``RankResult``
  (per item, the mean of the successful votes' scores).

An ask's requests are laid out by its kind's ``expand`` (a list of indices into the wave's
deduplicated batch of that kind) and read back in the same layout by its ``fold``; a result's
``samples`` are its successful requests' replies, so ``len(indices) − len(result.samples)`` is
the ask's failed requests, for every kind. Adding a kind: ARCHITECTURE.md, "Add a question kind".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arenabench.types import (
    Match,
    MatchResult,
    PairJudgment,
    PairRequest,
    PointRequest,
    Rank,
    RankJudgment,
    RankRequest,
    RankResult,
    Score,
    ScoreResult,
    Trajectory,
    pair_reply,
    point_reply,
    rank_reply,
)


@dataclass(frozen=True, eq=False)
class QuestionKind:
    """One kind of question a judge answers (module doc). Every function is pure.

    ``expand(asks, arena, prompt, prompt_key, batch, g)``: add the requests of a group's asks of
    this kind (in order) to ``batch`` (``batch.add(dedup_key, request, g) -> index``; a dedup key
    is a tuple of the prompt's key, the shown trajectories' content keys and the sample) and
    return, per ask, their indices in the kind's layout. ``fold(asks, indices, out)``: per ask,
    its result from the wave's validated replies ``out`` of this kind (None: the request failed
    every attempt). Both take a list of asks, so a wave costs one call per kind, not per ask.
    ``reply(x, request)``: ``(normalized reply, None)`` or ``(None, reason)``, the kind's one
    validation. ``lead``: the
    trajectory a request shows first after the query (a lockstep wave's requests of this kind
    are sent grouped by it, ``engine.prefix_order``), or None to send them as asked.
    ``content(request)``: its content as one string, without the attempt (fault and latency
    draws are keyed on it). ``nan_reply(request)``: a reply of the right shape with non-finite
    scores (the ``nan`` fault). ``key_texts(request, text)``: ``(a, b, order)`` of its judgment
    cache key, ``text`` giving what a judge sees of a trajectory. ``encode`` / ``decode``: a
    validated reply to the JSON object the cache stores and back (``decode`` may raise; the
    cache validates what it returns with ``reply``)."""

    name: str  # short tag: "pair", "point", "rank"
    what: str  # "pairwise", "pointwise", "listwise": in messages
    ask: type
    request: type
    method: str  # the judge's batch method
    judge: str  # the ``Engine`` attribute holding the judge that answers this kind
    comparisons: bool  # its results are pairwise comparisons (``Accounting.comparisons``, judge health)
    expand: Callable[..., list[list[int]]]
    fold: Callable[[Sequence, list[list[int]], Sequence], list]
    reply: Callable[[Any, Any], tuple[Any, str | None]]
    lead: Callable[[Any], Trajectory] | None
    content: Callable[[Any], str]
    nan_reply: Callable[[Any], Any]
    key_texts: Callable[[Any, Callable[[Trajectory], str]], tuple[str, str, str]]
    encode: Callable[[Any], dict[str, Any]]
    decode: Callable[[dict[str, Any]], Any]

    @property
    def amethod(self) -> str:
        """The judge's coroutine batch method (a served judge: the pipelined schedule)."""
        return "a" + self.method

    def __repr__(self) -> str:
        return f"QuestionKind({self.name!r})"


# --- pair: a Match, shown in both orders (or the one its order policy shows) × votes --------


def shown_orders(ask: Match) -> tuple[int, ...]:
    """The orders a match is judged in: 0 shows (i, j), 1 shows (j, i)."""
    return (0, 1) if ask.first is None else (0,) if ask.first == ask.i else (1,)


def _expand_matches(asks: Sequence[Match], arena, prompt: str, pk: int, batch, g: int) -> list[list[int]]:
    """Per match, its shown orders × votes, order-major (samples from ``ask.sample`` on)."""
    add = batch.add
    out = []
    for ask in asks:
        ti, tj = arena[ask.i], arena[ask.j]
        ki, kj = ti.key, tj.key
        s0 = ask.sample
        if ask.first is None and ask.votes == 1:  # the common case, unrolled: (i, j) then (j, i)
            out.append(
                [
                    add((pk, ki, kj, s0), PairRequest(prompt, ti, tj, s0), g),
                    add((pk, kj, ki, s0), PairRequest(prompt, tj, ti, s0), g),
                ]
            )
            continue
        refs = []
        for o in shown_orders(ask):
            a, b, ka, kb = (ti, tj, ki, kj) if o == 0 else (tj, ti, kj, ki)
            for v in range(s0, s0 + ask.votes):
                refs.append(add((pk, ka, kb, v), PairRequest(prompt, a, b, v), g))
        out.append(refs)
    return out


def _fold_matches(asks: Sequence[Match], refs: list[list[int]], out: Sequence) -> list[MatchResult]:
    """Per match, its orders × votes folded into a ``MatchResult`` (:func:`any_match_result`, or
    :func:`both_orders_one_vote` for the common case)."""
    results = []
    for ask, r in zip(asks, refs, strict=True):
        if ask.first is None and ask.votes == 1:  # both orders, one vote each
            fwd, rev = out[r[0]], out[r[1]]
            if fwd is not None and rev is not None:  # the common case: no list of replies
                results.append(both_orders_one_vote(ask, fwd, rev))
                continue
        orders = [o for o in shown_orders(ask) for _ in range(ask.votes)]
        results.append(any_match_result(ask, [(o, out[idx]) for o, idx in zip(orders, r, strict=True)]))
    return results


def any_match_result(ask: Match, got: list[tuple[int, PairJudgment | None]]) -> MatchResult:
    """A match's result from its (order, reply) pairs, for any shown orders, votes and failures (a
    failed request, None, is left out)."""
    per_order: list[list[tuple[float, float]]] = [[], []]
    probs: list[list[float | None]] = [[], []]
    for o, rep in got:
        if rep is None:
            continue
        # order 0 shows (i, j); order 1 shows (j, i): map back to (score_i, score_j)
        per_order[o].append((rep.score_a, rep.score_b) if o == 0 else (rep.score_b, rep.score_a))
        p = rep.prob_a
        probs[o].append(None if p is None else (p if o == 0 else 1.0 - p))
    shown = shown_orders(ask)
    done = [per_order[o] for o in shown if per_order[o]]
    samples = per_order[0] + per_order[1]
    orders = [0] * len(per_order[0]) + [1] * len(per_order[1])
    if not done:
        return MatchResult(
            ask.i,
            ask.j,
            math.nan,
            math.nan,
            failed=True,
            samples=samples,
            orders=orders,
            one_order=len(shown) == 1,
        )
    # sum over both orders of each order's vote mean; a missing (failed or not shown) order is
    # made up by doubling
    scale = 2 / len(done)
    si = scale * sum(sum(a for a, _ in p) / len(p) for p in done)
    sj = scale * sum(sum(b for _, b in p) / len(p) for p in done)
    partial = len(samples) < len(shown) * ask.votes
    flat = probs[0] + probs[1]
    prob_i = math.nan
    if flat and None not in flat:  # mean over orders of each order's mean P(i better)
        prob_i = mean([mean(probs[o]) for o in shown if probs[o]])
    return MatchResult(
        ask.i,
        ask.j,
        si,
        sj,
        partial=partial,
        samples=samples,
        probs=[p for p in flat if p is not None],
        prob_i=prob_i,
        orders=orders,
        one_order=len(shown) == 1,
    )


def both_orders_one_vote(ask: Match, fwd: PairJudgment, rev: PairJudgment) -> MatchResult:
    """:func:`any_match_result` of the common case, a match shown in both orders with one vote each
    and both answered, without its per-order lists (it runs for every match). The same
    arithmetic: an order's vote mean is ``sum`` of one score, ``0 + score``, and the two orders
    need no scale."""
    pf, pr = fwd.prob_a, rev.prob_a
    pr = None if pr is None else 1.0 - pr  # order 1 shows (j, i): P(i better) = 1 − P(A)
    flat = [p for p in (pf, pr) if p is not None]
    return MatchResult(
        ask.i,
        ask.j,
        (0.0 + fwd.score_a) + (0.0 + rev.score_b),
        (0.0 + fwd.score_b) + (0.0 + rev.score_a),
        samples=[(fwd.score_a, fwd.score_b), (rev.score_b, rev.score_a)],
        probs=flat,
        # mean([mean([pf]), mean([pr])]), a one-value mean being float(p) + 0.0
        prob_i=((float(pf) + 0.0) + (float(pr) + 0.0)) / 2.0 if len(flat) == 2 else math.nan,
        orders=[0, 1],
    )


def _decode_pair(d: dict[str, Any]) -> PairJudgment:
    p = d.get("prob_a")
    return PairJudgment(float(d["score_a"]), float(d["score_b"]), None if p is None else float(p))


PAIR = QuestionKind(
    name="pair",
    what="pairwise",
    ask=Match,
    request=PairRequest,
    method="judge_pairs",
    judge="judge",
    comparisons=True,
    expand=_expand_matches,
    fold=_fold_matches,
    reply=lambda x, _req: pair_reply(x),
    lead=lambda r: r.a,
    content=lambda r: f"pair|{r.prompt}|{r.a.text}|{r.b.text}|{r.sample}",
    nan_reply=lambda _req: PairJudgment(math.nan, math.nan, math.nan),
    key_texts=lambda r, text: (text(r.a), text(r.b), "ab"),
    encode=lambda j: {"score_a": j.score_a, "score_b": j.score_b, "prob_a": j.prob_a},
    decode=_decode_pair,
)


# --- point: a Score, its votes (samples 0 … votes − 1) --------------------------------------


def _expand_scores(asks: Sequence[Score], arena, prompt: str, pk: int, batch, g: int) -> list[list[int]]:
    add = batch.add
    out = []
    for ask in asks:
        t = arena[ask.i]
        key = t.key
        out.append([add((pk, key, v), PointRequest(prompt, t, v), g) for v in range(ask.votes)])
    return out


def _fold_scores(asks: Sequence[Score], refs: list[list[int]], out: Sequence) -> list[ScoreResult]:
    """Per score, the mean of its successful votes (NaN and ``failed`` if none)."""
    results = []
    for ask, r in zip(asks, refs, strict=True):
        ok = [float(x) for x in (out[i] for i in r) if x is not None]
        results.append(ScoreResult(ask.i, mean(ok) if ok else math.nan, failed=not ok, samples=ok))
    return results


POINT = QuestionKind(
    name="point",
    what="pointwise",
    ask=Score,
    request=PointRequest,
    method="score_points",
    judge="pointwise_judge",
    comparisons=False,
    expand=_expand_scores,
    fold=_fold_scores,
    reply=lambda x, _req: point_reply(x),
    lead=None,
    content=lambda r: f"point|{r.prompt}|{r.traj.text}|{r.sample}",
    nan_reply=lambda _req: math.nan,
    key_texts=lambda r, text: (text(r.traj), "", "point"),
    encode=lambda v: {"score": v},
    decode=lambda d: float(d["score"]),
)


# --- rank: a Rank, its votes (samples ``sample`` … ``sample + votes − 1``), the listed order --


def _expand_ranks(asks: Sequence[Rank], arena, prompt: str, pk: int, batch, g: int) -> list[list[int]]:
    add = batch.add
    out = []
    for ask in asks:
        trajs = tuple(arena[i] for i in ask.items)
        keys = tuple(t.key for t in trajs)
        s0 = ask.sample
        out.append([add((pk, keys, v), RankRequest(prompt, trajs, v), g) for v in range(s0, s0 + ask.votes)])
    return out


def _fold_ranks(asks: Sequence[Rank], refs: list[list[int]], out: Sequence) -> list[RankResult]:
    """Per ranking, each item's mean over the successful votes' scores (NaN scores and ``failed``
    if every vote failed); ``samples``: each successful vote's scores."""
    results = []
    for ask, r in zip(asks, refs, strict=True):
        ok = [rep.scores for rep in (out[i] for i in r) if rep is not None]
        if ok:
            results.append(
                RankResult(ask.items, tuple(mean(col) for col in zip(*ok, strict=True)), samples=ok)
            )
        else:
            results.append(RankResult(ask.items, (math.nan,) * len(ask.items), failed=True, samples=[]))
    return results


def _decode_rank(d: dict[str, Any]) -> RankJudgment:
    scores = d["scores"]
    if not isinstance(scores, list):
        raise TypeError(f"stored scores are a {type(scores).__name__}, not a list")
    return RankJudgment(tuple(float(x) for x in scores))


RANK = QuestionKind(
    name="rank",
    what="listwise",
    ask=Rank,
    request=RankRequest,
    method="rank_lists",
    judge="listwise_judge",
    comparisons=False,
    expand=_expand_ranks,
    fold=_fold_ranks,
    reply=lambda x, req: rank_reply(x, len(req.trajs)),
    lead=lambda r: r.trajs[0],
    content=lambda r: f"rank|{r.prompt}|{len(r.trajs)}|" + "|".join(t.text for t in r.trajs) + f"|{r.sample}",
    nan_reply=lambda req: RankJudgment((math.nan,) * len(req.trajs)),
    # the shown texts as one JSON list (unambiguous whatever they contain); hashed with the rest
    key_texts=lambda r, text: (
        json.dumps([text(t) for t in r.trajs], ensure_ascii=False, separators=(",", ":")),
        "",
        "rank",
    ),
    encode=lambda j: {"scores": list(j.scores)},
    decode=_decode_rank,
)


KINDS: tuple[QuestionKind, ...] = (PAIR, POINT, RANK)  # the engine sends a wave's kinds in this order
BY_ASK: dict[type, QuestionKind] = {k.ask: k for k in KINDS}
BY_REQUEST: dict[type, QuestionKind] = {k.request: k for k in KINDS}


def kind_of_request(r: Any) -> QuestionKind:
    """The kind of judge request ``r``; TypeError for anything else."""
    kind = BY_REQUEST.get(type(r))
    if kind is None:
        names = ", ".join(k.request.__name__ for k in KINDS)
        raise TypeError(f"a judge request is one of {names}; got {type(r).__name__}")
    return kind


def mean(xs: Sequence[float]) -> float:
    """``float(np.mean(xs))``, bit for bit, without numpy's per-call cost for the short lists it
    runs on (a match's orders, a score's votes). numpy's float64 add-reduce of fewer than 8
    values is a left fold from ``0.0`` (the ``0.0 +`` matters for signed zeros), then divided by
    the count (``tests/test_engine_mean.py`` checks 1-8 values, specials included). Longer lists
    go to numpy. (numpy's overflow RuntimeWarning is not raised on the short path.)"""
    n = len(xs)
    if 0 < n < 8:
        total = 0.0
        for x in xs:
            total += float(x)
        return total / n
    return float(np.mean(xs))


__all__ = ["BY_ASK", "BY_REQUEST", "KINDS", "PAIR", "POINT", "RANK", "QuestionKind", "kind_of_request"]
