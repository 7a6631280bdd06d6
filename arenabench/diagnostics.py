"""Judge diagnostics: how much of a pointwise judge's spread is signal, how often a pairwise judge ties,
and whether a step's comparisons can be trusted.

σ_group is the mean in-group std of pointwise scores (what GRPO divides by); σ_noise is the
std of re-judging the *same* trajectory (fresh judge samples). SNR = σ_group/σ_noise: when it
nears 1, GRPO's (r − μ)/σ mostly standardizes judge noise.

:func:`tie_rate` measures how often a pairwise judge gives no decision: a judge on an integer
rubric (the ``integer`` simulated preset) ties often, a continuous one almost never.

:func:`comparison_health` reads the comparisons a constructor actually made (no extra judge
call); the engine sums it over a step (``StepStats.health``) and :func:`health_metrics` turns
that into the per-step metrics both trainers log and ``arenabench fidelity --diagnostics``
reports: how often the verdict survives swapping the slots (position consistency), how often the
judge ties, how often three judged trajectories form a cycle, and how often a request failed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from arenabench.types import Group, MatchResult, PairRequest, PointRequest, pair_reply, point_reply


@dataclass
class ComparisonHealth:
    """Counts over a set of comparisons (one group's, or a step's summed with ``+``).

    * ``matches``: comparisons with a verdict (not failed); ``ties``: those of them with equal
      summed scores (``MatchResult.winner`` is None).
    * ``bidirectional``: comparisons answered in both slot orders; ``consistent``: those whose two
      orders give the same verdict (the sign of score_i − score_j of each order's vote mean: i, a
      tie, or j). Shi et al. (arXiv 2406.07791)'s position consistency.
    * ``triangles``: triples of trajectories whose three pairs all have a strict verdict (a pair
      compared more than once: the majority of its comparisons' verdicts; a tied pair makes no
      edge); ``cyclic``: those of them that are intransitive (a beats b beats c beats a).
    """

    matches: int = 0
    ties: int = 0
    bidirectional: int = 0
    consistent: int = 0
    triangles: int = 0
    cyclic: int = 0

    def __add__(self, other: ComparisonHealth) -> ComparisonHealth:
        return ComparisonHealth(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def _sign(d: float) -> int:
    """+1 / 0 / −1, as ``int(np.sign(d))`` (NaN goes to numpy, which raises as it always has)."""
    return (d > 0) - (d < 0) if d == d else int(np.sign(d))


def _verdict(pairs: list[tuple[float, float]]) -> int:
    """+1 / 0 / −1: the sign of the mean score_i − score_j of one order's votes."""
    return _sign(sum(a - b for a, b in pairs))


def comparison_health(n: int, results: Sequence[MatchResult]) -> ComparisonHealth:
    """:class:`ComparisonHealth` of one group's match results (indices < ``n``)."""
    matches = ties = bidirectional = consistent = 0
    net: dict[tuple[int, int], int] = {}  # net[i, j]: verdicts for i over j minus against
    for m in results:
        if m.failed:
            continue
        matches += 1
        w = m.winner
        if w is None:  # a tie (failed matches were skipped above)
            ties += 1
        else:
            lo = m.j if w == m.i else m.i
            net[w, lo] = net.get((w, lo), 0) + 1
            net[lo, w] = net.get((lo, w), 0) - 1
        orders = m.orders
        if orders == [0, 1]:  # the common case, one vote per order: no per-order lists to build
            (a0, b0), (a1, b1) = m.samples
            bidirectional += 1
            consistent += _sign(a0 - b0) == _sign(a1 - b1)
        elif 0 in orders and 1 in orders:
            by_order = [[s for s, o in zip(m.samples, orders, strict=True) if o == k] for k in (0, 1)]
            bidirectional += 1
            consistent += _verdict(by_order[0]) == _verdict(by_order[1])
    beats = [ij for ij, v in net.items() if v > 0]
    cycles = (0, 0)
    if len(beats) >= 3:  # fewer than three preferences form no triangle (``triangles`` says 0 too)
        b = np.zeros((n, n), dtype=bool)
        b[tuple(zip(*beats, strict=True))] = True
        cycles = triangles(b)
    return ComparisonHealth(matches, ties, bidirectional, consistent, *cycles)


def triangles(beats: np.ndarray) -> tuple[int, int]:
    """(judged triangles, cyclic triangles) of a strict preference relation: ``beats[i, j]`` is
    True when i is preferred to j (at most one of ``beats[i, j]``, ``beats[j, i]``). A triangle
    is judged when all three of its pairs have a preference; it is cyclic when they form a
    directed 3-cycle, counted once (trace(M³)/3; an undirected triangle is trace(D³)/6)."""
    M = np.asarray(beats, dtype=float)  # float: BLAS matmul; counts < 2**53 stay exact
    if M.sum() < 3:  # fewer than three preferences: no triangle (a pointwise group has none)
        return 0, 0
    D = M + M.T
    # trace(A @ B) = sum(A * B.T): one product per cube, not two (this runs for every group;
    # the ``.sum()`` method skips ``np.sum``'s dispatch, a third of this function's time at N = 8)
    judged = round(float(((D @ D) * D.T).sum()))
    cyclic = round(float(((M @ M) * M.T).sum()))
    return judged // 6, cyclic // 3


HEALTH_METRICS = ("judge_consistency", "judge_tie_rate", "judge_cycle_rate", "judge_failure_rate")
HEALTH_COUNTS = ("judge_bidirectional", "judge_matches", "judge_triangles")


def health_rates(health: ComparisonHealth, failures: int, requests: int) -> dict[str, float]:
    """The four rates (NaN where nothing was counted): position consistency (share of
    comparisons answered in both orders whose orders agree), tie rate (share of answered
    comparisons), cycle rate (share of judged triangles that are cyclic), failure rate (share of
    the ``requests`` sent — retries not counted — that still ``failures``-ed after retries)."""

    def share(a: int, b: int) -> float:
        return a / b if b else math.nan

    return {
        "judge_consistency": share(health.consistent, health.bidirectional),
        "judge_tie_rate": share(health.ties, health.matches),
        "judge_cycle_rate": share(health.cyclic, health.triangles),
        "judge_failure_rate": share(failures, requests),
    }


def health_metrics(stats) -> dict[str, float]:
    """A step's judge diagnostics from its :class:`~arenabench.engine.StepStats`, for a tracker:
    the rates of :func:`health_rates` logged as 0.0 where nothing was counted (a tracker drops
    NaN, and a step metric is logged every step), next to the counts that tell such steps apart
    (``judge_bidirectional`` = 0 under a single-order policy or a pointwise constructor)."""
    h = stats.health
    rates = health_rates(h, stats.failures, stats.judge_calls - stats.retries)
    return {
        **{k: 0.0 if math.isnan(v) else v for k, v in rates.items()},
        "judge_bidirectional": float(h.bidirectional),
        "judge_matches": float(h.matches),
        "judge_triangles": float(h.triangles),
    }


def pointwise_snr(
    judge, groups: Sequence[Group], rng: np.random.Generator, probe_size: int = 8, repeats: int = 4
) -> dict[str, float]:
    """σ_group over every trajectory of ``groups`` (sample 0) and σ_noise from ``repeats`` fresh
    samples of ``probe_size`` random trajectories; failed scores are left out (counted).
    Returns sigma_group, sigma_noise, snr, probe_calls, probe_failures. Sample indices start
    at 1000 so probes never coincide with a constructor's own votes. ``probe_size = 0`` turns the
    probe off (no judge request at all: an LLM judge now scores too, and each probe costs K·N +
    probe_size·repeats requests a step)."""
    if not hasattr(judge, "score_points") or not groups or probe_size <= 0:
        return {"sigma_group": math.nan, "sigma_noise": math.nan, "snr": math.nan, "probe_calls": 0}
    flat = [(g, t) for g in groups for t in g.trajectories]
    reqs = [PointRequest(g.prompt, t, 1000) for g, t in flat]
    pick = rng.choice(len(flat), size=min(probe_size, len(flat)), replace=False)
    reqs += [PointRequest(flat[i][0].prompt, flat[i][1], 1001 + r) for i in pick for r in range(repeats)]
    out = judge.score_points(reqs)
    vals = np.array([math.nan if v is None else v for v, _ in map(point_reply, out)])
    failures = int(np.isnan(vals).sum())
    n_main = len(flat)
    lens = [len(g) for g in groups]
    sizes = np.cumsum([0] + lens)
    with np.errstate(invalid="ignore"):
        if min(lens) == max(lens) > 1:  # K groups of N: one call, the per-row values bit for bit
            per_group = list(np.nanstd(vals[:n_main].reshape(len(lens), lens[0]), axis=1))
        else:
            per_group = [
                np.nanstd(vals[a:b]) for a, b in zip(sizes[:-1], sizes[1:], strict=True) if b - a > 1
            ]
        rep = vals[n_main:].reshape(len(pick), repeats)
        per_traj = np.nanstd(rep, axis=1, ddof=1) if repeats > 1 else np.full(len(pick), math.nan)
    sg = float(np.nanmean(per_group)) if per_group else math.nan
    sn = float(np.nanmean(per_traj)) if len(per_traj) else math.nan
    return {
        "sigma_group": sg,
        "sigma_noise": sn,
        "snr": sg / sn if sn and sn > 0 else math.nan,
        "probe_calls": len(reqs),
        "probe_failures": failures,
    }


def tie_rate(judge, groups: Sequence[Group], sample: int = 0) -> dict[str, float]:
    """How often ``judge`` ties on every pair of every group, both orders, in one batch.

    * ``request_tie_rate``: share of single-order requests (A, B) answered with
      ``score_a == score_b``;
    * ``match_tie_rate``: share of bidirectional matches — both orders answered — whose summed
      scores tie (ArenaRL's protocol: ``score_i = s_A(i, j) + s_B(j, i)``), i.e. what the engine's
      :class:`~arenabench.types.MatchResult` reports as a tie (``winner is None``);
    * ``requests`` / ``matches``: how many were answered and counted; ``failures``: requests
      without a usable answer (what the engine counts as a failure: ``types.pair_reply``), left out
      of both rates.

    Equality is exact, as the engine compares. NaN rates when nothing was answered."""
    reqs, pairs = [], 0
    for g in groups:
        t = g.trajectories
        for i in range(len(t)):
            for j in range(i + 1, len(t)):
                reqs += [PairRequest(g.prompt, t[i], t[j], sample), PairRequest(g.prompt, t[j], t[i], sample)]
                pairs += 1
    out = list(judge.judge_pairs(reqs)) if reqs else []
    if len(out) != len(reqs):
        raise RuntimeError(f"judge answered {len(out)} of {len(reqs)} requests")
    out = [pair_reply(x)[0] for x in out]  # the engine's check: floats, or None for no verdict
    ok = [x is not None for x in out]
    single = [x.score_a == x.score_b for x, good in zip(out, ok, strict=True) if good]
    matches = []
    for k in range(pairs):
        fwd, rev = out[2 * k], out[2 * k + 1]  # fwd shows (i, j), rev shows (j, i)
        if ok[2 * k] and ok[2 * k + 1]:
            matches.append(fwd.score_a + rev.score_b == fwd.score_b + rev.score_a)
    return {
        "request_tie_rate": float(np.mean(single)) if single else math.nan,
        "match_tie_rate": float(np.mean(matches)) if matches else math.nan,
        "requests": len(single),
        "matches": len(matches),
        "failures": len(out) - len(single),
    }
