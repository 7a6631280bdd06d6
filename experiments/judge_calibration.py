"""Measure the recorded real judges, fit the committed presets, check the fits out of sample.

Writes ``results/judges/`` (statistics with 95% bootstrap CIs, fit tables and plots, the
out-of-sample tables, README.md) and ``conf/judge/{gpt4_llmbar,chatgpt_llmbar,gpt4turbo_mtbench}.yaml``
from the vendored judgments in ``data/judgments/``. Run: ``make judges`` (~3 min on 2 cores).
Every preset is written by the ``arenabench calibrate`` command its YAML names.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
from pathlib import Path

import yaml

from arenabench import cli
from arenabench.calibration import judge_data, load_files
from arenabench.calibration.fit import format_fit
from arenabench.calibration.stats import stats_rows

DATA = "data/judgments"
PRESETS = {  # name: (files, judge, one-line description)
    "gpt4_llmbar": (
        f"{DATA}/llmbar",
        "GPT-4",
        "GPT-4 on LLMBar (Natural + 4 Adversarial sets; Vanilla both orders + Rating 0-9)",
    ),
    "chatgpt_llmbar": (
        f"{DATA}/llmbar",
        "ChatGPT",
        "ChatGPT on LLMBar (Natural + 4 Adversarial sets; Vanilla both orders + Rating 0-9)",
    ),
    "gpt4turbo_mtbench": (
        f"{DATA}/fastchat-gpt-4-turbo",
        "gpt-4-turbo",
        "gpt-4-turbo on MT-bench answers (FastChat pair with ties + single 1-10 with repeats)",
    ),
}
HOLDOUT = "llmbar/Natural"  # fit on LLMBar's Adversarial sets, predict Natural
KEY = [
    "point_accuracy",
    "pair_accuracy",
    "pair_minus_point_accuracy",
    "point_tie_rate",
    "point_top_share",
    "pair_consistency",
    "pair_first_slot",
    "pair_tie_rate",
    "pair_point_agreement",
    "pair_breaks_point_tie",
    "rescore_agreement",
]


def _cell(s: dict | None) -> str:
    if s is None:
        return ""
    ci = "" if math.isnan(s["lo"]) else f" [{s['lo']:.3f}, {s['hi']:.3f}]"
    return f"{s['value']:.3f}{ci}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/judges")
    ap.add_argument("--conf", default="conf/judge")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commands = []

    def run(argv: list[str]) -> None:
        commands.append(shlex.join(["arenabench", *argv]))
        if cli.main(argv) != 0:
            raise SystemExit(f"failed: {commands[-1]}")

    # 1. statistics, per judge and per judge × source
    files = [f"{DATA}/llmbar", f"{DATA}/fastchat-gpt-4-turbo"]
    for fmt in ("markdown", "csv", "json"):
        ext = {"markdown": "md", "csv": "csv", "json": "json"}[fmt]
        run(["judge-stats", *files, "--format", fmt, "--output", str(out / f"stats.{ext}")])
    run(
        [
            "judge-stats",
            f"{DATA}/llmbar",
            "--by",
            "source",
            "--format",
            "csv",
            "--output",
            str(out / "stats_by_source.csv"),
        ]
    )
    run(["judge-stats", f"{DATA}/llmbar", "--by", "source", "--output", str(out / "stats_by_source.md")])
    # 2. the committed presets
    for name, (path, judge, desc) in PRESETS.items():
        run(
            [
                "calibrate",
                path,
                "--judge",
                judge,
                "--description",
                desc,
                "--out",
                f"{args.conf}/{name}.yaml",
                "--fit-table",
                str(out / f"{name}_fit.md"),
                "--plot",
                str(out / f"{name}_fit.png"),
            ]
        )
    # 3. out of sample: fit on the Adversarial sets, predict Natural (not committed as presets)
    for judge in ("GPT-4", "ChatGPT"):
        tag = judge.lower().replace("-", "")
        run(
            [
                "calibrate",
                f"{DATA}/llmbar",
                "--judge",
                judge,
                "--holdout",
                HOLDOUT,
                "--out",
                str(out / f"{tag}_adversarial.yaml"),
                "--fit-table",
                str(out / f"{tag}_adversarial_fit.md"),
                "--holdout-table",
                str(out / f"{tag}_natural_predicted.json"),
                "--format",
                "json",
                "--plot",
                str(out / f"{tag}_adversarial.png"),
            ]
        )
    oos = {}
    for judge in ("GPT-4", "ChatGPT"):
        tag = judge.lower().replace("-", "")
        rows = json.loads((out / f"{tag}_natural_predicted.json").read_text())
        (out / f"{tag}_natural_predicted.md").write_text(format_fit(rows) + "\n")
        oos[judge] = rows
    # 4. README: the key numbers per judge and the fitted parameters
    table = load_files(files)
    key = {j: {r["statistic"]: r for r in stats_rows([(j, judge_data(table, j))])} for j in table.judges()}
    lines = [
        "# Recorded real judges: statistics, fitted presets, out-of-sample checks",
        "",
        "Made by `make judges` (`python experiments/judge_calibration.py`) from the vendored judgments in "
        "`data/judgments/` (sources and licenses: `data/judgments/README.md`, `sources.json`). "
        "Intervals are 95% percentile bootstraps over items (2000 replicates, seed 0); "
        "a tie counts 1/2 in every accuracy. "
        "Method and definitions: `docs/calibration.md`.",
        "",
        "## Key statistics per judge",
        "",
        "| statistic | " + " | ".join(key) + " |",
        "|---|" + "---|" * len(key),
    ]
    for k in KEY:
        lines.append(f"| {k} | " + " | ".join(_cell(key[j].get(k)) for j in key) + " |")
    by_src = {}
    for j in ("GPT-4", "ChatGPT"):
        for src in sorted({r.source for r in table.rows if r.judge == j}):
            d = judge_data(table.select(j, [src]), j)
            by_src[(j, src)] = {r["statistic"]: r for r in stats_rows([(j, d)])}
    lines += [
        "",
        "## Pairwise vs pointwise accuracy against human gold (LLMBar)",
        "",
        "Single-order verdicts vs scores of the same items; the difference is paired by item.",
        "",
        "| judge | items | pair_accuracy | point_accuracy | pair − point | point_tie_rate "
        "| pair_consistency |",
        "|---|---|---|---|---|---|---|",
    ]
    for (j, src), st in [((j, "all LLMBar"), key[j]) for j in ("GPT-4", "ChatGPT")] + list(by_src.items()):
        lines.append(
            f"| {j} | {src} | {_cell(st.get('pair_accuracy'))} | {_cell(st.get('point_accuracy'))} | "
            f"{_cell(st.get('pair_minus_point_accuracy'))} | {_cell(st.get('point_tie_rate'))} | "
            f"{_cell(st.get('pair_consistency'))} |"
        )
    lines += ["", "## Out of sample: fit on LLMBar's four Adversarial sets, predict Natural", ""]
    for j, rows in oos.items():
        pred = [r for r in rows if r["role"] == "predicted" and r["inside"] is not None]
        bad = [r for r in pred if not r["inside"]]
        outside = ", ".join(f"{r['statistic']} {r['fitted']:.3f} vs {r['measured']:.3f}" for r in bad)
        lines.append(
            f"- **{j}**: {len(pred) - len(bad)} of {len(pred)} predicted statistics inside their 95% CI"
            + (f"; outside (predicted vs measured): {outside}" if bad else "")
            + "."
        )
    lines += [
        "",
        f"Skipped rows: {dict(table.skipped)}. Full tables: `stats.md` (per judge), "
        "`stats_by_source.md` (LLMBar per subset).",
        "",
        "## Fitted presets",
        "",
    ]
    lines += [
        "| preset | grid | point_noise | pair_noise | position_bias | tie_margin | rejudge_share | "
        "recorded gap mean / sd | targets outside CI | predicted outside CI |",
        "|---|" + "---|" * 9,
    ]
    for name in list(PRESETS) + ["gpt4_adversarial", "chatgpt_adversarial"]:
        path = Path(args.conf) / f"{name}.yaml" if name in PRESETS else out / f"{name}.yaml"
        y = yaml.safe_load(path.read_text())
        fit = y["provenance"]["fit"]
        bad_t = [k for k, v in fit.items() if v["role"] == "target" and v["inside"] is False]
        bad_p = [k for k, v in fit.items() if v["role"] == "predicted" and v["inside"] is False]
        g = y["provenance"]["recorded_gap"]
        lines.append(
            f"| `{name}` | {y['grid']} | {y['point_noise']:.3f} | {y['pair_noise']:.3f} | "
            f"{y['position_bias']:.3f} | "
            f"{y['tie_margin']:.3f} | {y['rejudge_share']:.3f} | {g['mean']:.2f} / {g['sd']:.2f} | "
            f"{', '.join(bad_t) or 'none'} | {', '.join(bad_p) or 'none'} |"
        )
    lines += [
        "",
        "Fit tables and plots: `<preset>_fit.md`, `<preset>_fit.png`. Out of sample (fit on the four "
        "Adversarial sets, only the Natural pair set's level and gap distribution refitted to its pointwise "
        "statistics, every pairwise and cross statistic predicted): `gpt4_natural_predicted.md`, "
        "`chatgpt_natural_predicted.md` and the `*_adversarial_holdout.png` plots.",
        "",
        "## Commands",
        "",
    ]
    lines += [f"    {c}" for c in commands]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    (out / "commands.json").write_text(json.dumps(commands, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
