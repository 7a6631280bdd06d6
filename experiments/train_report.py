"""Tables and plots of the CPU training sweeps (``make demo``), read back from MLflow.

Writes results/train/{table2,snr_dynamics}.md and PNGs. Run after the sweeps:
``python experiments/train_report.py --out results/train``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arenabench.compare import (
    format_summary,
    frontier_plot,
    load_runs,
    metric_curves,
    quarter_change,
    summarize,
)

BY = "constructor"


def header(title: str, experiment: str, runs, out: str) -> list[str]:
    return [
        f"# {title}",
        "",
        f"sweep `{runs.attrs.get('sweep')}`, {len(runs)} runs. Commands: `arenabench-train -m "
        f"experiment={experiment}`, then `python experiments/train_report.py --out {out}`.",
        "",
    ]


def table(df, metric: str, by: str = BY) -> list[str]:
    summary = format_summary(summarize(df, metric=metric, by=by), "markdown")
    return [f"### {metric} (final step; mean ± std over seeds)", "", summary, ""]


# sweeps outside `make demo`, reported when their runs are in the store (by setting: their arms
# share constructor names, e.g. adaptive with routing on and off)
OPTIONAL = {
    "rrc": "RRC: PRC vs SCR vs AGR, ± voting@3, ± CARA (cot judge)",
    "reasoning_arena": "Reasoning Arena: RLVR with adaptive routing on vs off (CISPO)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/train")
    ap.add_argument(
        "--uri", default=None, help="tracking URI (default: $MLFLOW_TRACKING_URI or results/mlflow.db)"
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    runs = load_runs("table2", uri=args.uri)
    parts = header(
        "table2 (CPU scale): ArenaRL topologies + pointwise, N = 8, K = 8", "table2", runs, args.out
    )
    for metric in ("eval_quality", "eval_win_rate", "quality_mean", "judge_calls", "wall_time"):
        parts += table(runs, metric)
    (out / "table2.md").write_text("\n".join(parts))
    for metric in ("eval_quality", "quality_mean"):
        metric_curves("table2", metric, uri=args.uri, by=BY, path=out / f"table2_{metric}.png", smooth=5)
    frontier_plot(runs, x="judge_calls", y="eval_quality", by=BY, path=out / "table2_frontier.png")

    runs = load_runs("snr_dynamics", uri=args.uri)
    parts = header(
        "snr_dynamics: pointwise vs seeded single-elimination vs RRC-SCR", "snr_dynamics", runs, args.out
    )
    curves = {
        m: metric_curves(
            "snr_dynamics", m, uri=args.uri, by=BY, path=out / f"snr_dynamics_{m}.png", smooth=10
        )
        for m in ("snr", "sigma_group", "sigma_noise", "quality_mean")
    }
    quarters = quarter_change(curves["snr"]).merge(
        quarter_change(curves["quality_mean"]), on="group", suffixes=("_snr", "_quality")
    )
    parts += [
        "### First vs last quarter of training (mean over steps and seeds)",
        "",
        format_summary(quarters, "markdown"),
        "",
    ]
    for metric in ("eval_quality", "eval_win_rate"):
        parts += table(runs, metric)
    (out / "snr_dynamics.md").write_text("\n".join(parts))

    for name, title in OPTIONAL.items():
        try:
            runs = load_runs(name, uri=args.uri)
        except ValueError:
            continue  # not run: `arenabench-train -m experiment=<name>`
        parts = header(title, name, runs, args.out)
        for metric in ("eval_quality", "eval_win_rate", "zero_adv_share", "judge_calls"):
            parts += table(runs, metric, by="setting")
        (out / f"{name}.md").write_text("\n".join(parts))
        metric_curves(name, "eval_quality", uri=args.uri, by="setting", path=out / f"{name}_eval_quality.png")
    print((out / "table2.md").read_text())
    print((out / "snr_dynamics.md").read_text())


if __name__ == "__main__":
    main()
