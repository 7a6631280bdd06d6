"""What a judge does, measured on recorded judgments: ``arenabench judge-stats``.

:func:`judge_data` turns one judge's rows into arrays (:class:`JudgeData`); :func:`measure`
computes every statistic with a 95% percentile-bootstrap interval over *items* (pairs of
responses; re-score statistics over re-scored responses; the score histogram over scores),
``n_boot`` replicates from a fixed seed. The simulator's fit (:mod:`.fit`) computes the same
statistics with the same code on simulated :class:`JudgeData`, so a measured number and its
fitted counterpart mean the same thing.

Conventions (``docs/calibration.md``): a single-order pairwise verdict is +1 (a), −1 (b) or
0 (tie); a tie counts ½ in every accuracy; "decisive" means not a tie. The point comparison of
an item uses each response's first score (repeat 0).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arenabench.calibration.table import JudgmentTable

N_BOOT = 2000
BOOT_SEED = 0
LEVEL = 0.95

# name → what it measures (the order of every table)
STATISTICS: dict[str, str] = {
    "point_top_share": "pointwise: share of scores at the grid's top level (ceiling pile-up)",
    "point_mean": "pointwise: mean score on 0-1 ((score - lo) / (hi - lo))",
    "point_tie_rate": "pointwise: share of pairs whose two responses get equal scores",
    "rescore_agreement": "pointwise: same score when a response is judged again (first two)",
    "rescore_noise_sd": "pointwise: re-score noise SD in grid units, sqrt(mean (s1 - s2)^2 / 2)",
    "pair_tie_rate": "pairwise: share of single-order verdicts that are ties",
    "pair_first_slot": "pairwise: share of decisive single-order verdicts for the slot shown first",
    "pair_first_slot_point_tie": "pairwise: first-slot share of decisive verdicts where the scores tie",
    "pair_consistency": "pairwise: same verdict in both orders (position consistency)",
    "pair_flip_rate": "pairwise: decisive in both orders with different winners",
    "pair_accuracy": "pairwise: single-order verdict = gold (tie 1/2)",
    "pair_accuracy_both": "pairwise: both orders summed = gold (a flip is a tie: 1/2)",
    "point_accuracy": "pointwise: higher score = gold (equal scores 1/2)",
    "pair_minus_point_accuracy": "pair_accuracy - point_accuracy on the items with both (paired by item)",
    "pair_point_agreement": "pair vs point: same winner, where both are decisive",
    "pair_breaks_point_tie": "pair vs point: single-order verdict = gold where the scores tie (tie 1/2)",
}


@dataclass
class JudgeData:
    """One judge's judgments as arrays. Items (pairs) ``0..n_items-1`` with ``gold`` (+1: a is
    better, −1: b, 0: unknown) and first point scores ``s_a``/``s_b`` (NaN if unscored);
    pairwise occasions (one per item and repeat) ``occ_item``, ``v_ab``, ``v_ba`` (+1/−1/0, NaN
    if that order is missing); ``scores``: every point score (all repeats, paired or not);
    ``r1``/``r2``: the first two scores of each response judged at least twice.
    ``len_a``/``len_b``: the items' response lengths in characters where the texts were recorded
    (NaN otherwise; None: no texts at all) -- the surface statistics of :mod:`.persistence`."""

    judge: str
    grid: tuple[int, int] | None
    gold: np.ndarray
    s_a: np.ndarray
    s_b: np.ndarray
    occ_item: np.ndarray
    v_ab: np.ndarray
    v_ba: np.ndarray
    scores: np.ndarray
    r1: np.ndarray
    r2: np.ndarray
    len_a: np.ndarray | None = None
    len_b: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return len(self.gold)


def judge_data(table: JudgmentTable, judge: str, label: str | None = None) -> JudgeData:
    """The arrays of ``judge``'s rows in ``table`` (``label`` names the result; default the judge)."""
    rows = [r for r in table.rows if r.judge == judge]
    if not rows:
        raise ValueError(f"no judgments of judge {judge!r}; judges: {', '.join(table.judges())}")
    items: dict[str, int] = {}
    gold: list[int] = []
    pair_of: dict[str, tuple[str, str]] = {}
    for r in rows:
        if r.b is not None and r.item not in items:
            items[r.item] = len(items)
            pair_of[r.item] = (r.a, r.b)
            gold.append(0)
        if r.b is not None and r.gold is not None:
            gold[items[r.item]] = 1 if r.gold == "a" else -1
    grids = {(r.grid_lo, r.grid_hi) for r in rows if r.kind == "point"}
    if len(grids) > 1:
        raise ValueError(f"judge {judge!r} scores on several grids {sorted(grids)}; split the files")
    by_resp: dict[str, dict[int, int]] = defaultdict(dict)
    scores = []
    for r in rows:
        if r.kind == "point":
            by_resp[r.response][r.repeat] = r.score
            scores.append(r.score)
    occ: dict[tuple[int, int], list[float]] = {}
    sign = {"a": 1.0, "b": -1.0, "tie": 0.0}
    for r in rows:
        if r.kind == "pair":
            v = occ.setdefault((items[r.item], r.repeat), [math.nan, math.nan])
            v[0 if r.order == "ab" else 1] = sign[r.verdict]
    n = len(items)
    s_a, s_b = np.full(n, np.nan), np.full(n, np.nan)
    for it, k in items.items():
        a, b = pair_of[it]
        if 0 in by_resp.get(a, {}):
            s_a[k] = by_resp[a][0]
        if 0 in by_resp.get(b, {}):
            s_b[k] = by_resp[b][0]
    twice = [d for d in by_resp.values() if 0 in d and 1 in d]
    keys = sorted(occ)
    len_a, len_b = np.full(n, np.nan), np.full(n, np.nan)
    for r in rows:
        if r.b is not None and r.text_a is not None and r.text_b is not None:
            len_a[items[r.item]], len_b[items[r.item]] = len(r.text_a), len(r.text_b)
    has_len = bool(np.any(~np.isnan(len_a)))
    return JudgeData(
        judge=label or judge,
        grid=next(iter(grids)) if grids else None,
        gold=np.array(gold, dtype=float),
        s_a=s_a,
        s_b=s_b,
        occ_item=np.array([k[0] for k in keys], dtype=int),
        v_ab=np.array([occ[k][0] for k in keys], dtype=float),
        v_ba=np.array([occ[k][1] for k in keys], dtype=float),
        scores=np.array(scores, dtype=float),
        r1=np.array([d[0] for d in twice], dtype=float),
        r2=np.array([d[1] for d in twice], dtype=float),
        len_a=len_a if has_len else None,
        len_b=len_b if has_len else None,
    )


def _item_sums(d: JudgeData) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per item: (numerator, denominator) of every item-level statistic."""
    n = d.n_items

    def per_item(values: np.ndarray, mask: np.ndarray, idx: np.ndarray):
        num = np.bincount(idx[mask], weights=values[mask], minlength=n)
        den = np.bincount(idx[mask], minlength=n).astype(float)
        return num, den

    out = {}
    it = d.occ_item
    # both single-order verdicts as one list: slot shown first, item, verdict (a/b terms)
    v = np.concatenate([d.v_ab, d.v_ba])
    vi = np.concatenate([it, it])
    first = np.concatenate([np.ones_like(d.v_ab), -np.ones_like(d.v_ba)])  # +1: a shown first
    have = ~np.isnan(v)
    decisive = have & (v != 0)
    out["pair_tie_rate"] = per_item((v == 0).astype(float), have, vi)
    out["pair_first_slot"] = per_item((v == first).astype(float), decisive, vi)
    both = ~np.isnan(d.v_ab) & ~np.isnan(d.v_ba)
    out["pair_consistency"] = per_item((d.v_ab == d.v_ba).astype(float), both, it)
    flip = (d.v_ab * d.v_ba) < 0
    out["pair_flip_rate"] = per_item(flip.astype(float), both, it)
    g = d.gold[vi] if len(vi) else np.zeros(0)
    correct = np.where(v == 0, 0.5, (v * g > 0).astype(float))
    out["pair_accuracy"] = per_item(correct, have & (g != 0), vi)
    gb = d.gold[it] if len(it) else np.zeros(0)
    summed = np.sign(np.nan_to_num(d.v_ab) + np.nan_to_num(d.v_ba))
    out["pair_accuracy_both"] = per_item(np.where(summed == 0, 0.5, (summed * gb > 0)), both & (gb != 0), it)
    # pointwise, one comparison per item
    idx = np.arange(n)
    scored = ~np.isnan(d.s_a) & ~np.isnan(d.s_b)
    diff = np.sign(np.nan_to_num(d.s_a - d.s_b))
    out["point_tie_rate"] = per_item((diff == 0).astype(float), scored, idx)
    out["point_accuracy"] = per_item(
        np.where(diff == 0, 0.5, (diff * d.gold > 0).astype(float)), scored & (d.gold != 0), idx
    )
    # paired by item: the item's mean single-order pair accuracy minus its point accuracy
    pn, pd_ = out["pair_accuracy"]
    qn, qd = out["point_accuracy"]
    both_acc = (pd_ > 0) & (qd > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = np.where(both_acc, pn / np.where(pd_ > 0, pd_, 1) - qn / np.where(qd > 0, qd, 1), 0.0)
    out["pair_minus_point_accuracy"] = (delta, both_acc.astype(float))
    # pair vs point
    pdiff = diff[vi] if len(vi) else np.zeros(0)
    pscored = scored[vi] if len(vi) else np.zeros(0, dtype=bool)
    out["pair_point_agreement"] = per_item((v == pdiff).astype(float), decisive & pscored & (pdiff != 0), vi)
    out["pair_breaks_point_tie"] = per_item(correct, have & pscored & (pdiff == 0) & (g != 0), vi)
    # position bias where the judge's own scores call the pair close (a gap-dependent bias shows here)
    close = decisive & pscored & (pdiff == 0)
    out["pair_first_slot_point_tie"] = per_item((v == first).astype(float), close, vi)
    return out


def _ratio(num: np.ndarray, den: np.ndarray, w: np.ndarray | None) -> tuple[float, np.ndarray | None]:
    total = den.sum()
    value = float(num.sum() / total) if total > 0 else math.nan
    if w is None or total == 0:
        return value, None
    with np.errstate(invalid="ignore", divide="ignore"):
        return value, (w @ num) / (w @ den)


def _weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray | None:
    """(n_boot, n) bootstrap counts of n units (resampled with replacement)."""
    if n == 0 or n_boot == 0:
        return None
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)


def point_values(d: JudgeData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(level grid, histogram fractions, scores on 0-1) of every point score."""
    lo, hi = d.grid
    levels = np.arange(lo, hi + 1)
    counts = np.array([(d.scores == k).sum() for k in levels], dtype=float)
    return levels, counts / max(len(d.scores), 1), (d.scores - lo) / (hi - lo)


def measure(
    d: JudgeData,
    n_boot: int = N_BOOT,
    seed: int = BOOT_SEED,
    level: float = LEVEL,
    persistence: bool = False,
) -> dict[str, dict]:
    """Every statistic of :data:`STATISTICS` (and ``hist_<k>`` per grid level) that ``d`` has
    data for: ``{name: {value, lo, hi, n}}``, ``n`` the units behind it (items, verdicts or
    scores). ``n_boot = 0``: values only (the fit's inner loop). ``persistence``: also the
    persistent / surface-error statistics (:mod:`.persistence`), after the others (whose values
    and intervals do not change)."""
    rng = np.random.default_rng(seed)
    q = ((1 - level) / 2, (1 + level) / 2)
    res: dict[str, dict] = {}

    def put(name, value, boot, n):
        if n == 0 or (isinstance(value, float) and math.isnan(value)):
            return
        lo = hi = math.nan
        if boot is not None:
            b = boot[~np.isnan(boot)]
            if len(b):
                lo, hi = (float(x) for x in np.quantile(b, q))
        res[name] = {"value": float(value), "lo": lo, "hi": hi, "n": int(n)}

    if d.grid is not None and len(d.scores):
        levels, hist, unit = point_values(d)
        w = _weights(len(d.scores), n_boot, rng)
        top = (d.scores == levels[-1]).astype(float)
        ones = np.ones(len(d.scores))
        put("point_top_share", *_ratio(top, ones, w), len(d.scores))
        put("point_mean", *_ratio(unit, ones, w), len(d.scores))
        for k in levels:
            put(f"hist_{k}", *_ratio((d.scores == k).astype(float), ones, w), len(d.scores))
    if len(d.r1):
        w = _weights(len(d.r1), n_boot, rng)
        ones = np.ones(len(d.r1))
        put("rescore_agreement", *_ratio((d.r1 == d.r2).astype(float), ones, w), len(d.r1))
        value, boot = _ratio((d.r1 - d.r2) ** 2 / 2, ones, w)
        put("rescore_noise_sd", math.sqrt(value), None if boot is None else np.sqrt(boot), len(d.r1))
    if d.n_items:
        w = _weights(d.n_items, n_boot, rng)
        for name, (num, den) in _item_sums(d).items():
            put(name, *_ratio(num, den, w), int(den.sum()))
    order = {k: i for i, k in enumerate(STATISTICS)}
    res = dict(sorted(res.items(), key=lambda kv: (order.get(kv[0], len(order)), _level(kv[0]))))
    if persistence:
        from arenabench.calibration.persistence import measure_persistence

        res.update(measure_persistence(d, n_boot, seed, level))
    return res


def _level(name: str) -> int:
    return int(name[5:]) if name.startswith("hist_") else -1


def stats_rows(
    tables: Sequence[tuple[str, JudgeData]], n_boot: int = N_BOOT, persistence: bool = True
) -> list[dict]:
    """Long format: one row per (judge label, statistic); ``persistence``: with the persistent /
    surface-error statistics (:mod:`.persistence`) after the others."""
    rows = []
    for label, d in tables:
        for name, s in measure(d, n_boot, persistence=persistence).items():
            rows.append({"judge": label, "statistic": name, **s})
    return rows


FORMATS = ("table", "markdown", "csv", "json")


def format_stats(rows: list[dict], fmt: str = "markdown") -> str:
    """``arenabench judge-stats`` output, in the formats ``arenabench fidelity`` writes."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt == "json":
        return json.dumps(rows, indent=2)
    import pandas as pd

    df = pd.DataFrame(rows, columns=["judge", "statistic", "value", "lo", "hi", "n"])
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        from arenabench.reporting import fixed3, md_table

        show = df.assign(ci95=[_ci(r) for r in rows]).drop(columns=["lo", "hi"])
        return md_table(show[["judge", "statistic", "value", "ci95", "n"]], cell=fixed3)
    return df.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="")


def _ci(r: dict) -> str:
    return "" if math.isnan(r["lo"]) else f"[{r['lo']:.3f}, {r['hi']:.3f}]"
