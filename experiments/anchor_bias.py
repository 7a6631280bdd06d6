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

from arenabench import Engine, judges, rewards
from arenabench.fidelity import evaluate
from arenabench.sim import equal_quality_groups, simulate_groups
from arenabench.stats import paired_t, t_interval

CHUNK = 500


def spec(rule: str) -> str:
    return f"seeded_single_elim:anchor_seed={rule}"


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
        out = engine.run(rewards.from_spec(spec(rule)), gs[k : k + CHUNK], step=k // CHUNK)
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
    per = {r: evaluate(rewards.from_spec(spec(r)), gs, the_judge, 0, 64)[0] for r in [base, *rules]}
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
