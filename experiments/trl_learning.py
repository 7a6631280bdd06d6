"""Does the TRL example learn? Its true quality before/after training, judge vs control, by seed.

Runs :func:`arenabench.trainers.trl.learning.study` (the example's defaults; the control's judge
gives every completion the same hidden quality) and writes ``results/trl/learning.{md,csv}``
(one row per run: seed, arm, before, after, improvement, judge calls, wall time) and
``learning_curves.csv`` (per step: the mean true quality of that step's completions).

Run: ``python experiments/trl_learning.py --seeds 0 1 2 --out results/trl``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arenabench import reporting
from arenabench.trainers.trl import learning


def ci(s: dict) -> str:
    return f"{s['mean']:+.3f} [{s['lo']:+.3f}, {s['hi']:+.3f}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default="results/trl")
    p.add_argument("--work-dir", default=None, help="the tiny models and TRL's output (default: a temp dir)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel (processes)")
    p.add_argument("--plot", action="store_true", help="only redraw learning_curves.png from the CSV")
    p.add_argument("example_args", nargs="*", help="extra flags for the example (after --)")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.plot:
        curve_figure(out / "learning_curves.csv", out / "learning_curves.png")
        return 0
    import tempfile

    work = Path(a.work_dir or tempfile.mkdtemp(prefix="trl_learning_"))
    rows = learning.study(a.seeds, work, a.example_args, jobs=a.jobs)
    s = learning.summary(rows)
    flat = [{k: v for k, v in r.items() if k != "curve"} for r in rows]
    reporting.write_csv(out / "learning.csv", flat)
    curves = [
        {"arm": r["arm"], "seed": r["seed"], "step": i + 1, "true_quality": q}
        for r in rows
        for i, q in enumerate(r["curve"])
    ]
    reporting.write_csv(out / "learning_curves.csv", curves)
    curve_figure(out / "learning_curves.csv", out / "learning_curves.png")
    n = len(a.seeds)
    body = [
        f"True quality (4·F1 − 2 of a completion against the prompt's words; −2 … +2) of the policy, "
        f"sampled as in training on a fixed evaluation set, before and after training; mean over "
        f"{n} seeds with 95% t intervals; the arms are paired by seed.",
        "",
        reporting.md_table(
            [
                {
                    "arm": arm,
                    "before": ci(s[arm]["before"]),
                    "after": ci(s[arm]["after"]),
                    "improvement": ci(s[arm]["improvement"]),
                }
                for arm in learning.ARMS
            ]
        ),
        "",
        f"judge − control (improvement, paired by seed): {ci(s['judge_minus_control'])}, "
        f"paired t p = {s['judge_minus_control']['p']:.2g}",
        "",
        "Per run:",
        "",
        reporting.md_table(flat),
        "",
        "Per-step curve (mean true quality of each step's training completions, mean over seeds, "
        "every 10th step):",
        "",
        reporting.md_table(_curve_rows(rows)),
    ]
    cmd = "python experiments/trl_learning.py " + " ".join(sys.argv[1:] if argv is None else argv)
    reporting.write_md(
        out / "learning.md",
        "The TRL example learns: judge vs control",
        reporting.machine(),
        cmd,
        "\n".join(body),
    )
    print((out / "learning.md").read_text())
    return 0


def curve_figure(csv_path: Path, png_path: Path, window: int = 5) -> None:
    """The per-step training curve of both arms (``window``-step mean over steps, mean ± SD over
    seeds): what the README shows. ``python experiments/trl_learning.py --plot`` redraws it from the
    committed CSV without training."""
    import numpy as np
    import pandas as pd

    from arenabench.compare import figure, save_figure

    df = pd.read_csv(csv_path)
    fig, (ax,) = figure(size=(6.5, 4))
    for arm, g in df.groupby("arm"):
        wide = g.pivot(index="step", columns="seed", values="true_quality").sort_index()
        smooth = wide.rolling(window, min_periods=1).mean()
        m, sd = smooth.mean(axis=1), smooth.std(axis=1, ddof=1).fillna(0)
        ax.plot(smooth.index, m, label=f"{arm} ({wide.shape[1]} seeds)")
        ax.fill_between(smooth.index, m - sd, m + sd, alpha=0.2)
    ax.set_xlabel("TRL GRPO step")
    ax.set_ylabel(f"true quality of the step's completions ({window}-step mean)")
    ax.set_title("TRL example: judge (seeded single-elim) vs a constant-quality control", fontsize=10)
    ax.set_ylim(-2.05, max(0.0, float(np.nanmax(df["true_quality"]))) + 0.05)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, png_path)


def _curve_rows(rows) -> list[dict]:
    import numpy as np

    steps = len(rows[0]["curve"])
    marks = sorted({0, *range(9, steps, 10), steps - 1})
    out = []
    for i in marks:
        row = {"step": i + 1}
        for arm in learning.ARMS:
            row[arm] = float(np.mean([r["curve"][i] for r in rows if r["arm"] == arm]))
        out.append(row)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
