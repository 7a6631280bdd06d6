"""Ranks → rewards → group-standardized advantages (small pure functions).

Standardization uses the **population** std (``ddof=0``) by default, so advantages have
exactly zero mean and unit std per group. For N=8 the best rank then gets
``(1 − 0.5) / sqrt(63/12)/7 = 1.5275``; with ``ddof=1`` (torch.std, verl's GRPO) it is
``1.4289``. ArenaRL's text quotes σ_r ≈ 0.286 and A ≈ 1.75 for N=8: that σ is wrong —
the std of {0, 1/7, …, 1} is 0.327 (population) or 0.350 (ddof=1).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-6  # as verl's GRPO: keeps a zero-variance group at exactly zero advantage
_OVERFLOW = 1e150  # above this |reward| its square overflows float64


def ranks_from_keys(*keys: np.ndarray) -> np.ndarray:
    """0-based ranks (0 = best) by descending lexicographic keys; exact ties share the mean rank.

    NaN in the first key marks an unranked entry (its rank is NaN).
    """
    first = np.asarray(keys[0], dtype=float)
    ranked = ~np.isnan(first)
    out = np.full(len(first), np.nan)
    if not ranked.any():
        return out
    cols = [_sort_key(np.asarray(k, dtype=float)[ranked]) for k in keys]
    order = np.lexsort([-c for c in reversed(cols)])  # best first
    # exact ties (equal in every key) are runs of the sorted order; the run at positions
    # s .. e − 1 shares their mean, (s + e − 1) / 2 (no np.unique(axis=0): it ran per group)
    new_run = np.zeros(len(order), dtype=bool)
    new_run[0] = True
    for c in cols:
        c = c[order]
        new_run[1:] |= c[1:] != c[:-1]
    starts = new_run.nonzero()[0]
    ends = np.concatenate((starts[1:], [len(order)]))
    rank = np.empty(len(order))
    rank[order] = np.repeat((starts + ends - 1) / 2, ends - starts)
    out[ranked] = rank
    return out


def _sort_key(x: np.ndarray) -> np.ndarray:
    """``x`` for sorting: NaN lowest (``nan_to_num(nan=-inf)``, ±inf to ±max), called only
    when needed (it costs more than the rest of a small ranking)."""
    return x if np.isfinite(x).all() else np.nan_to_num(x, nan=-np.inf)


def rank_rewards(rank: np.ndarray) -> np.ndarray:
    """ArenaRL's quantile reward ``1 − rank/(N−1)`` over the ranked entries (NaN stays NaN)."""
    rank = np.asarray(rank, dtype=float)
    n = int((~np.isnan(rank)).sum())
    if n <= 1:
        return np.where(np.isnan(rank), np.nan, 0.5)
    return 1.0 - rank / (n - 1)


def standardize(reward: np.ndarray, ddof: int = 0, eps: float = EPS) -> np.ndarray:
    """GRPO group standardization ``(r − μ)/(σ + ε)``; NaN entries get advantage 0, and equal
    rewards exactly 0 (their floating-point mean can miss them by an ulp, which ε would blow up to
    ~1e-10). Rewards too large to square are divided by their largest magnitude first (the same
    advantages up to ε)."""
    reward = np.asarray(reward, dtype=float)
    ok = ~np.isnan(reward)
    adv = np.zeros(len(reward))
    n = int(ok.sum())
    if n <= ddof or n < 2:
        return adv
    r = reward[ok]
    lo, hi = float(r.min()), float(r.max())
    if lo == hi:  # no spread, no advantage: exactly 0 (mean − r can be an ulp, ulp/ε is not 0)
        return adv
    scale = max(-lo, hi)  # the largest magnitude
    if scale > _OVERFLOW:  # r² would overflow to inf (NaN advantages): standardize r/scale instead
        r = r / scale
    # (r − r.mean()) / (r.std(ddof) + ε) with numpy's own arithmetic for both (the sum / n; the
    # root of the summed squared deviations / (n − ddof)), the deviations computed once: the
    # methods' Python wrappers took most of this function's time, which runs for every group
    dev = r - np.add.reduce(r) / n
    adv[ok] = dev / (np.sqrt(np.add.reduce(dev * dev) / (n - ddof)) + eps)
    return adv


# --- flag-aware training: no information, no advantage ------------------------------------

# A group is masked when MORE than this share of its judge requests failed after retries.
# Why 0.25: behind the engine's retries a healthy judge loses well under 1% of requests (a
# judge failing 20% of attempts, retried twice, loses 0.8%), so a group past a quarter is an
# outage, not noise; and at a quarter the group's ranking already rests on fallback rules for a
# large part of it (in an 8-player single elimination, 14 requests, four failed requests can
# void two of its seven matches). 1.0 never masks (a share cannot exceed 1).
DEFAULT_MAX_FAILED_SHARE = 0.25


def failed_share(result) -> float:
    """The share of a group's judge requests that failed after all retries, from the fields of its
    :class:`~arenabench.types.ConstructorResult`:

    ``failures / max(judge_calls − retries, failures)``, and 0.0 when both are 0.

    ``judge_calls`` counts every request the group sent, retries included, so
    ``judge_calls − retries`` is the requests the group needed (each counted once however often it
    was retried). ``failures`` counts the group's requests still failing after the last retry. The
    ``max`` keeps the share in [0, 1] when the engine sent a group's request once for several
    groups (a duplicate is paid by the first group that asked, but a failure counts for every
    group that asked). A group that asked the judge nothing (a verifier decided it) has share 0
    and is never masked."""
    failures = int(result.failures)
    needed = max(int(result.judge_calls) - int(result.retries), failures)
    return failures / needed if needed > 0 else 0.0


def mask_unreliable(
    results, max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE
) -> tuple[list[np.ndarray], int]:
    """Per group, the advantages a trainer should use, and how many groups were masked.

    A group whose :func:`failed_share` exceeds ``max_failed_share`` (strictly) gets advantage 0 for
    every member: when the judge's evidence is mostly missing, the group's ranking comes from a
    constructor's fallback rules, and a ranking decision the judge's evidence does not support
    carries no advantage. Every other group keeps its constructor advantages (a copy). Nothing else
    about a masked group changes: its rewards, ranks, flags and judge accounting stay as they are,
    it is still logged and counted. A group that lost any request to a judge outage (``lost > 0``:
    the judge gave up after its outage deadline) is masked whatever its share: what an outage takes
    is not a random sample of its evidence (a whole wave, the later rounds of a bracket), so the
    constructors' per-failure rules, made for sporadic failures, do not cover it
    (``docs/faults.md``). ``max_failed_share=None`` disables masking. Shared by the local
    trainer and the verl adapter (``engine.max_failed_share`` / ``arenabench.max_failed_share``)."""
    check_failed_share(max_failed_share)
    out, masked = [], 0
    for res in results:
        adv = np.array(res.advantage, dtype=float)
        if is_masked(res, max_failed_share):
            adv = np.zeros_like(adv)
            masked += 1
        out.append(adv)
    return out, masked


def is_masked(result, max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE) -> bool:
    """Whether :func:`mask_unreliable` zeroes this group: it lost a request to a judge outage, or
    ``failed_share(result) > max_failed_share``."""
    check_failed_share(max_failed_share)
    if max_failed_share is None:
        return False
    return getattr(result, "lost", 0) > 0 or failed_share(result) > float(max_failed_share)


def check_failed_share(max_failed_share) -> None:
    if max_failed_share is None:
        return
    ok = isinstance(max_failed_share, int | float) and not isinstance(max_failed_share, bool)
    if not (ok and 0.0 <= float(max_failed_share) <= 1.0):
        raise ValueError(f"max_failed_share must be a number in [0, 1] or null; got {max_failed_share!r}")
