"""Tables and plots of the rrc and reasoning_arena sweeps (mean ± std over seeds), read back from
MLflow: ``python experiments/train_report.py --out results/train``.

The warm-start sweeps (table2, snr_dynamics, table2_hard, table2_imperfect, group_size) have their
own report with paired statistics: ``experiments/table2_report.py``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arenabench.compare import (
    format_summary,
    load_runs,
    metric_curves,
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


if __name__ == "__main__":
    main()
