"""Issue 31 (3): seeded single elimination's greedy anchor in equal-quality groups, and what each
``anchor_seed`` rule costs in fidelity.

Two measurements, for every rule in ``--rules`` (``seeded_single_elim:anchor_seed=<rule>``):

* **bias**: the anchor's mean advantage over ``--groups`` equal-quality groups per (N, judge), ± its
  standard error and z (the groups, judge and engine seeds of ``tests/rewards/test_single_elim_anchor.py``:
  groups 11 of ``sim.equal_quality_groups``, judge 4, engine 0, chunks of 500);
* **fidelity**: Kendall τ-b (and the advantage–oracle r) against true quality on the fidelity
  study's groups (``sim.simulate_groups``, ``--fidelity-groups`` per N, seed 0, chunks of 64, as
  ``experiments/fidelity_study.py``), each rule paired with ``--base`` over the same groups: the
  mean difference, its 95% t interval and the paired-t p.

A rule is the constructor's (``auto``, ``mean``, ``lattice``, ``record``: its ``ANCHOR_RULES``) or
one this study measured and the constructor does not take (``match``, ``neutral``, ``h2h``,
``h2h_tier``, ``lattice_key``: ``MEASURED`` below); ``constructor(rule)`` builds either.

Writes ``<out>/bias.csv``, ``<out>/fidelity.csv`` and ``<out>/anchor_bias.md``.
Run: ``python experiments/anchor_bias.py --out results/anchor_bias`` (~20 min on one core).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from arenabench import Engine, judges
from arenabench.advantages import ranks_from_keys
from arenabench.fidelity import evaluate
from arenabench.rewards.brackets import lattice_seeding
from arenabench.rewards.failures import split_failures
from arenabench.rewards.single_elim import ANCHOR_RULES, AnchorRule, SeededSingleElim
from arenabench.sim import equal_quality_groups, simulate_groups
from arenabench.stats import paired_t, t_interval

CHUNK = 500


# ---- the rules this study measures and the constructor does not take ---------------------------
# seeded_single_elim's production rules (auto, mean, lattice, record) are its ``AnchorRule``s
# (arenabench/rewards/single_elim.py); these five were measured and not taken
# (docs/constructors-notes.md §3), and run only here, through ``constructor``.


def neutral_seeding(score: np.ndarray, results: list, anchor: int) -> np.ndarray:
    """``score`` (``anchor_phase``'s) in which the anchor sits at the tie point of its games: its
    entry is its mean (as ``mean``), an explorer's is that mean plus the explorer's distance from
    its seeding game's tie point, ``(own − anchor's) / 2``, so anchor and explorer are apart by
    what separated them in their own game. NaN (failed) stays NaN.

    Why (``anchor_seed=neutral``, issue 31): under ``mean`` an explorer X is
    above the anchor iff its score beats the anchor's *mean*, which can contradict their own
    game and, on a skewed integer lattice, is not symmetric. Here X is above the anchor iff it
    won, exactly equal iff they tied (then the no-information rules apply: a seeded permutation
    in ``seed_order``, a coin flip in ``decide``, a shared rank), and each explorer's distance
    from the anchor is symmetric about 0 in an equal-quality group on any score grid. On a judge
    whose two scores sum to a constant (a verdict: 1/0, a tie ½ each) it is the anchor at the
    tie score and each explorer at its own, all shifted alike. The price on a judge that rates
    each side on its own: an explorer's value carries the anchor's noise in that game. The
    anchor's mean is put on a 2^-20 grid so that its sums with lattice scores (the tier key)
    are exact: keys equal in exact arithmetic are equal floats."""
    a = anchor
    out = np.array(score, dtype=float)
    if not np.isfinite(out[a]):
        return out
    out[a] = np.ldexp(np.rint(np.ldexp(out[a], 20)), -20)
    for m in split_failures(results)[0]:
        x, sx, sa = (m.i, m.score_i, m.score_j) if m.j == a else (m.j, m.score_j, m.score_i)
        out[x] = out[a] + (sx - sa) / 2
    return out


def one_match_seeding(score: np.ndarray, results: list, anchor: int, rng: np.random.Generator) -> np.ndarray:
    """``score`` (``anchor_phase``'s) with the anchor's entry replaced by its score in ONE of its
    successful seeding matches, drawn uniformly by the group's ``rng`` (a draw only when there
    are two or more), so that the anchor holds the same kind of seeding value as an explorer.

    Why (``anchor_seed=match``): in a group of equal quality an explorer's
    seeding score is one bidirectional match score, while the anchor's mean of N − 1 of them is
    concentrated near their centre; sorted and compared with single scores — in the seed order,
    the tier key and ``decide`` — it is not exchangeable with them (on an integer-rubric judge
    single scores sit on a skewed lattice whose median is not the mean: issue 31). One match's
    score is drawn like an explorer's (a simulated judge rates the two sides independently),
    so with every rematch a new judgment the bracket treats the anchor as one more explorer and
    its mean advantage in such groups is 0 by symmetry, whatever the score grid."""
    a = anchor
    ok = split_failures(results)[0]
    out = np.array(score, dtype=float)
    if ok:
        m = ok[int(rng.integers(len(ok)))] if len(ok) > 1 else ok[0]
        out[a] = m.score_j if m.j == a else m.score_i
    return out


def head_to_head(x: int, y: int, seeding_results: list) -> int | None:
    """The winner of the seeding game between the anchor and an explorer (``x``, ``y``), or None
    when it was tied, failed or not played: ``decide``'s evidence for their tied or failed bracket
    game under ``anchor_seed=h2h`` (None: a coin flip recorded in ``links``, as for any game
    without evidence).

    Why (issue 31.3): ``decide``'s other evidence is the two accumulated averages, and the
    anchor's holds its seeding *mean*, which on an integer rubric is off the lattice, so it is
    almost never equal to an explorer's: the anchor's tied games were decided as if by evidence
    and never pooled, while explorer-vs-explorer ties on the lattice coin-flip and share a rank.
    Here the anchor's tied game goes by evidence of the same kind an explorer pair has — one
    match between the two — or to the coin and the pool."""
    m = next((r for r in seeding_results if {r.i, r.j} == {x, y}), None)
    return m.winner if m is not None else None


def place_anchor_by_head_to_head(
    rank: np.ndarray, depth: np.ndarray, anchor: int, seeding_results: list
) -> np.ndarray:
    """``rank`` with the anchor re-placed inside its elimination tier by its seeding games against
    its tier-mates (``anchor_seed=h2h_tier``): below the W mates that beat it, level with the T
    whose game was tied or failed (half of them above it: a shared rank where that is one
    player), above the rest; the mates keep their order. Other tiers are unchanged.

    Why (issue 31.3): with ``h2h`` alone the anchor's tier key is still its seeding mean plus
    bracket scores, off the lattice of the explorers' keys; this compares it with each tier-mate
    by the same kind of evidence as ``head_to_head`` — their own game."""
    rank = np.asarray(rank, dtype=float).copy()
    if not np.isfinite(rank[anchor]):
        return rank
    tier = (depth == depth[anchor]) & np.isfinite(rank)
    mates = [j for j in range(len(rank)) if j != anchor and tier[j]]
    if not mates:
        return rank
    games = [r for r in seeding_results if anchor in (r.i, r.j)]
    beat = {r.winner for r in games if r.winner not in (None, anchor)}
    lost_to = sum(1 for j in mates if j in beat)
    won = {r.i if r.j == anchor else r.j for r in games if r.winner == anchor}
    level = sum(1 for j in mates if j not in beat and j not in won)
    members = [*mates, anchor]
    base = float(np.sum(np.isfinite(rank) & (depth > depth[anchor])))
    q = ranks_from_keys(-rank[mates])  # the mates' order among themselves, best first
    pos = lost_to + level / 2  # the anchor's slot among them
    rank[members] = base + ranks_from_keys(np.append(-q, -(pos - 0.5)))
    return rank


class OneMatch(AnchorRule):
    """``match``: the anchor seeded and compared on one drawn seeding match (``one_match_seeding``)."""

    name = "match"

    def values(self, score, results, anchor, rng):
        value = one_match_seeding(score, results, anchor, rng)
        return value, value


class Neutral(AnchorRule):
    """``neutral``: the anchor at the tie point of its games (``neutral_seeding``)."""

    name = "neutral"

    def values(self, score, results, anchor, rng):
        value = neutral_seeding(score, results, anchor)
        return value, value


class HeadToHead(AnchorRule):
    """``h2h``: seeded as ``mean``; a tied or failed bracket game of the anchor's goes by its
    seeding game against that opponent (``head_to_head``; flagged ``head_to_head_tiebreak``)."""

    name = "h2h"

    def tiebreak(self, anchor):
        def own(x: int, y: int, seeding_results: list) -> tuple[int | None, str] | None:
            if anchor not in (x, y):
                return None
            return head_to_head(x, y, seeding_results), "head_to_head_tiebreak"

        return own


class HeadToHeadTier(HeadToHead):
    """``h2h_tier``: ``h2h``, and the anchor placed inside its tier by its seeding games against its
    tier-mates (``place_anchor_by_head_to_head``)."""

    name = "h2h_tier"

    def place(self, rank, depth, anchor, seeding_results):
        return place_anchor_by_head_to_head(rank, depth, anchor, seeding_results)


class LatticeKey(AnchorRule):
    """``lattice_key``: the bracket seeded on the anchor's exact mean, the anchor compared (tier key,
    tied games) on ``lattice``'s value (``brackets.lattice_seeding``)."""

    name = "lattice_key"

    def values(self, score, results, anchor, rng):
        return score, lattice_seeding(score, results, anchor, rng)


MEASURED = {r.name: r for r in (OneMatch(), Neutral(), HeadToHead(), HeadToHeadTier(), LatticeKey())}


class StudySingleElim(SeededSingleElim):
    """``seeded_single_elim`` whose ``anchor_seed`` also takes this study's rules (``MEASURED``)."""

    rules = {**ANCHOR_RULES, **MEASURED}


def constructor(rule: str) -> StudySingleElim:
    """``seeded_single_elim:anchor_seed=<rule>`` for any rule, the production ones and this study's."""
    return StudySingleElim(anchor_seed=rule)


def judge_of(spec: str, seed: int):
    """``name`` or ``name@share``: a fitted judge with its ``rejudge_share`` set to ``share``
    (how much of a reply a re-asked request draws afresh; ``anchor_seed=auto`` reads it)."""
    name, _, share = spec.partition("@")
    return judges.get(name, seed=seed, **({"rejudge_share": float(share)} if share else {}))


def anchor_bias(rule: str, n: int, judge: str, groups: int) -> dict:
    engine = Engine(judge_of(judge, 4), seed=0)
    gs = equal_quality_groups(groups, n)
    adv = []
    for k in range(0, groups, CHUNK):
        out = engine.run(constructor(rule), gs[k : k + CHUNK], step=k // CHUNK)
        adv += [float(r.advantage[0]) for r in out.results]
    a = np.array(adv)
    se = float(a.std(ddof=1) / math.sqrt(len(a)))
    return {
        "rule": rule,
        "judge": judge,
        "N": n,
        "groups": len(a),
        "mean_adv": float(a.mean()),
        "se": se,
        "z": float(a.mean() / se),
    }


def fidelity(rules: list[str], base: str, n: int, judge: str, groups: int) -> list[dict]:
    the_judge = judge_of(judge, 0)
    gs = simulate_groups(groups, n, seed=0)
    per = {r: evaluate(constructor(r), gs, the_judge, 0, 64)[0] for r in [base, *rules]}
    rows = []
    for r in rules:
        row = {"rule": r, "base": base, "judge": judge, "N": n, "groups": groups}
        for m in ("kendall_tau", "adv_corr"):
            ci = t_interval(per[r][m])
            d = paired_t(per[r][m], per[base][m])
            row.update(
                {
                    m: ci["mean"],
                    f"{m}_base": float(per[base][m].mean()),
                    f"d_{m}": d["mean"],
                    f"d_{m}_lo": d["lo"],
                    f"d_{m}_hi": d["hi"],
                    f"d_{m}_p": d["p"],
                }
            )
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/anchor_bias")
    ap.add_argument("--rules", default="mean,match,neutral,h2h,h2h_tier,lattice")
    ap.add_argument("--base", default="mean", help="the rule each one is paired with in fidelity")
    ap.add_argument(
        "--judges",
        default="calibrated,integer,gpt4_llmbar,chatgpt_llmbar,gpt4turbo_mtbench",
        help="judge names; NAME@S: the fitted judge NAME with rejudge_share S",
    )
    ap.add_argument("--sizes", default="8,16")
    ap.add_argument("--groups", type=int, default=4000, help="equal-quality groups per bias cell")
    ap.add_argument("--fidelity-groups", type=int, default=500)
    ap.add_argument("--skip", default="", help="'bias' or 'fidelity' to skip one measurement")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rules = args.rules.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    js = args.judges.split(",")
    t0 = time.time()
    bias, fid = [], []
    if "bias" not in args.skip:
        for j in js:
            for n in sizes:
                for r in rules:
                    bias.append(anchor_bias(r, n, j, args.groups))
                    print(
                        {k: round(v, 4) if isinstance(v, float) else v for k, v in bias[-1].items()},
                        flush=True,
                    )
        pd.DataFrame(bias).to_csv(out / "bias.csv", index=False)
    if "fidelity" not in args.skip:
        others = [r for r in rules if r != args.base]
        for j in js:
            for n in sizes:
                fid += fidelity(others, args.base, n, j, args.fidelity_groups)
                for row in fid[-len(others) :]:
                    print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        pd.DataFrame(fid).to_csv(out / "fidelity.csv", index=False)
    write_md(out, args, bias, fid, time.time() - t0)


def write_md(out: Path, args, bias: list[dict], fid: list[dict], seconds: float) -> None:
    lines = [
        "# Seeded single elimination: the greedy anchor's seeding score (issue 31.3)\n",
        f"Command: `python {' '.join(sys.argv)}`; python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs (load {os.getloadavg()[0]:.1f} at the end), "
        f"{seconds / 60:.1f} min. "
        "Rules: `seeded_single_elim:anchor_seed=<rule>` (`docs/constructors-notes.md` §3).\n",
    ]
    if bias:
        lines += [
            "## Anchor mean advantage, equal-quality groups\n",
            f"{args.groups} groups per cell (group seed 11, judge seed 4, engine seed 0, chunks of {CHUNK}); "
            "± one standard error; **bold**: |z| > 2.\n",
            "| judge | N | " + " | ".join(args.rules.split(",")) + " |",
            "|---|---|" + "---|" * len(args.rules.split(",")),
        ]
        df = pd.DataFrame(bias)
        for (j, n), g in df.groupby(["judge", "N"], sort=False):
            cells = []
            for r in args.rules.split(","):
                x = g[g.rule == r].iloc[0]
                c = f"{x.mean_adv:+.3f} ± {x.se:.3f} (z {x.z:+.1f})"
                cells.append(f"**{c}**" if abs(x.z) > 2 else c)
            lines.append(f"| `{j}` | {n} | " + " | ".join(cells) + " |")
        lines.append("")
    if fid:
        lines += [
            f"## Fidelity, paired with `{args.base}`\n",
            f"{args.fidelity_groups} groups per cell (`sim.simulate_groups`, seed 0, judge seed 0, "
            "chunks of 64, as `experiments/fidelity_study.py`); Δ = rule − base over the same groups, "
            "95% t interval, paired-t p.\n",
            "| judge | N | rule | τ base | τ rule | Δτ [95% CI] p | Δ adv. corr [95% CI] p |",
            "|---|---|---|---|---|---|---|",
        ]
        for x in fid:
            lines.append(
                f"| `{x['judge']}` | {x['N']} | {x['rule']} | {x['kendall_tau_base']:.3f} | "
                f"{x['kendall_tau']:.3f} | "
                f"{x['d_kendall_tau']:+.4f} [{x['d_kendall_tau_lo']:+.4f}, {x['d_kendall_tau_hi']:+.4f}] "
                f"p = {x['d_kendall_tau_p']:.3f} | {x['d_adv_corr']:+.4f} [{x['d_adv_corr_lo']:+.4f}, "
                f"{x['d_adv_corr_hi']:+.4f}] p = {x['d_adv_corr_p']:.3f} |"
            )
        lines.append("")
    (out / "anchor_bias.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
