"""Judge diagnostics: how much of a pointwise judge's spread is signal, how often a pairwise judge ties.

σ_group is the mean in-group std of pointwise scores (what GRPO divides by); σ_noise is the
std of re-judging the *same* trajectory (fresh judge samples). SNR = σ_group/σ_noise: when it
nears 1, GRPO's (r − μ)/σ mostly standardizes judge noise.

:func:`tie_rate` measures how often a pairwise judge gives no decision: a judge on an integer
rubric (the ``integer`` simulated preset) ties often, a continuous one almost never.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from arenabench.types import Group, JudgeFailure, PairJudgment, PairRequest, PointRequest


def pointwise_snr(
    judge, groups: Sequence[Group], rng: np.random.Generator, probe_size: int = 8, repeats: int = 4
) -> dict[str, float]:
    """σ_group over every trajectory of ``groups`` (sample 0) and σ_noise from ``repeats`` fresh
    samples of ``probe_size`` random trajectories; failed scores are left out (counted).
    Returns sigma_group, sigma_noise, snr, probe_calls, probe_failures. Sample indices start
    at 1000 so probes never coincide with a constructor's own votes."""
    if not hasattr(judge, "score_points") or not groups:
        return {"sigma_group": math.nan, "sigma_noise": math.nan, "snr": math.nan, "probe_calls": 0}
    flat = [(g, t) for g in groups for t in g.trajectories]
    reqs = [PointRequest(g.prompt, t, 1000) for g, t in flat]
    pick = rng.choice(len(flat), size=min(probe_size, len(flat)), replace=False)
    reqs += [PointRequest(flat[i][0].prompt, flat[i][1], 1001 + r) for i in pick for r in range(repeats)]
    out = judge.score_points(reqs)
    vals = np.array([math.nan if isinstance(x, JudgeFailure) else float(x) for x in out])
    failures = int(np.isnan(vals).sum())
    n_main = len(flat)
    sizes = np.cumsum([0] + [len(g) for g in groups])
    with np.errstate(invalid="ignore"):
        per_group = [np.nanstd(vals[a:b]) for a, b in zip(sizes[:-1], sizes[1:], strict=True) if b - a > 1]
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


def _finite_pair(x) -> bool:
    try:
        return isinstance(x, PairJudgment) and math.isfinite(x.score_a) and math.isfinite(x.score_b)
    except TypeError:
        return False


def tie_rate(judge, groups: Sequence[Group], sample: int = 0) -> dict[str, float]:
    """How often ``judge`` ties on every pair of every group, both orders, in one batch.

    * ``request_tie_rate``: share of single-order requests (A, B) answered with
      ``score_a == score_b``;
    * ``match_tie_rate``: share of bidirectional matches — both orders answered — whose summed
      scores tie (ArenaRL's protocol: ``score_i = s_A(i, j) + s_B(j, i)``), i.e. what the engine's
      :class:`~arenabench.types.MatchResult` reports as a tie (``winner is None``);
    * ``requests`` / ``matches``: how many were answered and counted; ``failures``: requests
      without a usable answer (a failure or a non-finite score), left out of both rates.

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
    ok = [_finite_pair(x) for x in out]
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
