"""One table of the fidelity study (N = 8) under every fitted judge beside the ``calibrated`` preset.

Reads ``results/fidelity.csv`` (calibrated) and ``results/judges/fidelity/<preset>/fidelity.csv``
(written by ``python experiments/fidelity_study.py --judge <preset> --sizes 8 --out ...``; ``make
judges-fidelity`` runs all) and writes ``results/judges/fidelity/README.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

PRESETS = ["gpt4_llmbar", "chatgpt_llmbar", "gpt4turbo_mtbench"]
ROWS = [
    "pointwise",
    "anchor",
    "prc",
    "swiss",
    "seeded_single_elim",
    "double_elim",
    "bt_bracket",
    "reasoning_arena_live",
    "round_robin",
    "rrc_scr",
    "rrc_scr:cara=true",
    "reasoning_arena_full",
    "adaptive",
    "writing_zero",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/judges/fidelity")
    ap.add_argument("--baseline", default="results/fidelity.csv")
    args = ap.parse_args()
    out = Path(args.out)
    tables = {"calibrated": pd.read_csv(args.baseline)}
    tables.update(
        {p: pd.read_csv(out / p / "fidelity.csv") for p in PRESETS if (out / p / "fidelity.csv").exists()}
    )
    cells = {}
    for judge, df in tables.items():
        df = df[df["group_size"] == 8].set_index("constructor")
        for c in ROWS:
            r = df.loc[c]
            d = r.get("kendall_tau_vs_round_robin")
            cells[(c, judge)] = f"{r['kendall_tau']:.3f} ± {r['kendall_tau_ci95']:.3f}" + (
                "" if c == "round_robin" or pd.isna(d) else f" ({d:+.3f})"
            )
        calls = df["judge_calls_per_group"]
        cells[("judge calls (round_robin / pointwise)", judge)] = (
            f"{calls['round_robin']:.0f} / {calls['pointwise']:.0f}"
        )
        cells[("zero-advantage groups, pointwise", judge)] = f"{df.loc['pointwise', 'zero_adv']:.3f}"
    judges = list(tables)
    lines = [
        "# Fidelity study under the fitted real judges (N = 8)",
        "",
        "Kendall τ of each constructor's ranking vs the hidden quality, mean ± 95% t half-width over 500 "
        "simulated groups (seed 0), and in brackets the paired difference from round-robin over the same "
        "groups. `calibrated` is the repository's assumed judge (`results/fidelity.csv`); the others are the "
        "presets fitted in `results/judges/` (`docs/calibration.md`). Full tables (top-1, advantage "
        "correlation, p-values): `<preset>/fidelity.md`.",
        "",
        "Still assumed: the simulated groups (`arenabench.sim`) and the map from their quality to each "
        "judge's latent scale (`quality_loc`, `quality_scale`: the groups' spread = the recorded "
        "responses' spread); the fitted judges see true gaps with no persistent misperception. "
        "That matters most for `chatgpt_llmbar`: its fit puts ChatGPT's LLMBar errors (pair accuracy "
        "0.40) into the recorded pairs' perceived gaps (mean −0.07, SD 0.20), so on the simulated "
        "groups its low pairwise noise makes it a far better comparer than the recorded ChatGPT: read "
        "its column as an upper bound for comparisons. PRC's probability `Φ(d / pair_noise)` is the "
        "model's, not measured (the recorded files hold verdicts only).",
        "",
        "Commands: `python experiments/fidelity_study.py --judge <preset> --sizes 8 --out "
        "results/judges/fidelity/<preset>`, then `python experiments/judge_fidelity_summary.py` "
        "(`make judges-fidelity`).",
        "",
        "| constructor | " + " | ".join(judges) + " |",
        "|---|" + "---|" * len(judges),
    ]
    for c in ROWS + ["judge calls (round_robin / pointwise)", "zero-advantage groups, pointwise"]:
        lines.append(f"| {c} | " + " | ".join(cells[(c, j)] for j in judges) + " |")
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
