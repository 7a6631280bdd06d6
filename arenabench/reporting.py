"""One writer for the markdown tables, provenance headers and figures that benchmarks/,
experiments/ and ``arenabench compare``/``fidelity`` produce.

Before this module each of them carried its own table code; the formats they write are kept
exactly (two cell formats: :func:`fmt` for benchmark tables, :func:`fixed3` for study tables).
"""

from __future__ import annotations

import csv
import datetime as _dt
import importlib.metadata
import math
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("numpy", "scipy", "torch", "choix")


def fmt(v, digits: int = 3) -> str:
    """Benchmark cells: magnitude-aware digits (0 decimals from 1000, 1 from 100), NaN/None empty."""
    if isinstance(v, float):
        if v != v:  # NaN
            return ""
        if abs(v) >= 1000:
            return f"{v:.0f}"
        if abs(v) >= 100:
            return f"{v:.1f}"
        return f"{v:.{digits}g}" if abs(v) < 0.01 else f"{v:.{digits}f}"
    return "" if v is None else str(v)


def fixed3(v) -> str:
    """Study cells (compare summaries, fidelity rows): floats to 3 decimals, NaN empty."""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def md_table(
    rows,
    columns: Sequence[str] | Mapping[str, str] | None = None,
    headers: Sequence[str] | None = None,
    cell: Callable[[Any], str] = fmt,
) -> str:
    """A markdown table of ``rows`` (dicts, or a pandas DataFrame).

    ``columns``: the keys to show, in order; a mapping gives key → header (``headers`` does the
    same as a list). None: every column of the DataFrame, or of the first row."""
    if hasattr(rows, "itertuples"):  # a DataFrame: its own column order, values as stored
        names = list(rows.columns)
        rows = [dict(zip(names, t, strict=True)) for t in rows.itertuples(index=False)]
        columns = names if columns is None else columns
    if columns is None:
        columns = list(rows[0]) if rows else []
    if isinstance(columns, Mapping):
        cols, head = list(columns), [str(h) for h in columns.values()]
    else:
        cols, head = list(columns), [str(h) for h in (headers or columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def listing(values: Mapping, spec: str, label: str = "N={}:", suffix: str = "×") -> str:
    """``N=4: 1.2×, N=8: 3.4×``: a per-key list of numbers for a summary line."""
    return ", ".join(f"{label.format(k)} {format(v, spec)}{suffix}" for k, v in values.items())


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """Rows to CSV; columns = the union of the rows' keys in first-seen order."""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


# -- provenance ------------------------------------------------------------------------------


def versions(packages: Sequence[str] = PACKAGES) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in packages:
        try:
            out[mod] = importlib.metadata.version(mod)
        except importlib.metadata.PackageNotFoundError:  # missing: part of the description, not an error
            out[mod] = "absent"
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(root: Path = ROOT) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(**extra: str) -> dict[str, str]:
    """What a reader needs to interpret absolute times: CPU, cores, versions, ``extra`` (e.g. the
    BLAS thread setting), date, load, commit."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return {
        "cpu": cpu_model(),
        "cores": f"{os.cpu_count()} ({usable} usable)",
        **versions(),
        **extra,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_avg_1_5_15": load,
        "commit": git_commit() or "?",
    }


def machine_line(m: Mapping[str, str]) -> str:
    return "; ".join(f"{k} {v}" for k, v in m.items())


def write_md(path: Path, title: str, m: Mapping[str, str], command: str, body: str) -> None:
    """A report page: title, the command that wrote it, the machine, then ``body``."""
    path.write_text(f"# {title}\n\ncommand: `{command}`\n\nmachine: {machine_line(m)}\n\n{body.rstrip()}\n")


def save_figure(fig, path, dpi: int = 120) -> None:
    """Write a matplotlib figure at the resolution the reports use (closing it is the caller's:
    pyplot figures need ``plt.close``, bare ``Figure`` objects do not)."""
    fig.savefig(path, dpi=dpi)


# offsets (points) tried for a point's label, nearest first: right, above, below, left, diagonals
_LABEL_DIRECTIONS = ((1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 0), (-1, 1), (-1, -1))
_LABEL_RADII = (5, 12, 22, 34, 48, 64)


def label_points(ax, names, xs, ys, fontsize: float = 8, spans=None, avoid=None) -> list:
    """Label each point (``names[i]`` at ``(xs[i], ys[i])``) so that labels do not overlap one another
    or any point, stay inside the axes, and sit nearer their own point than any other (a leader line
    joins a label placed away from its point). Placement is greedy in the given order over offsets of
    growing radius; call after the axes' limits and the layout are final. ``spans``: optional
    ``(lo, hi)`` y-intervals per point (error bars) that labels also avoid; ``avoid``: other
    ``(x, y)`` points drawn but not labelled, kept clear too. Returns the annotations,
    in the order of ``names`` (``ann.xy`` is the point the label belongs to)."""
    import numpy as np
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    pts = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    frame = ax.get_window_extent(renderer)
    scale = fig.dpi / 72.0
    pad = 2.5 * scale
    obstacles = [Bbox.from_extents(x - pad, y - pad, x + pad, y + pad) for x, y in pts]
    if spans is not None:
        for (x, _), (lo, hi) in zip(pts, spans, strict=True):
            if np.isfinite(lo) and np.isfinite(hi):
                (_, ylo), (_, yhi) = ax.transData.transform([(0, lo), (0, hi)])
                obstacles.append(Bbox.from_extents(x - pad, min(ylo, yhi), x + pad, max(ylo, yhi)))
    for x, y in ax.transData.transform(np.asarray(avoid, float).reshape(-1, 2)) if avoid is not None else ():
        obstacles.append(Bbox.from_extents(x - pad, y - pad, x + pad, y + pad))
    placed: list = []
    anns = []

    def nearest_is_own(box, i) -> bool:
        d = [_box_distance(box, p) for p in pts]
        return d[i] <= min(d) + 1e-9

    for i, name in enumerate(names):
        best = None
        for r in _LABEL_RADII:
            for dx, dy in _LABEL_DIRECTIONS:
                n = np.hypot(dx, dy)
                ox, oy = r * dx / n, r * dy / n
                ha = "left" if dx > 0 else "right" if dx < 0 else "center"
                va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
                ann = ax.annotate(
                    str(name), (xs[i], ys[i]), xytext=(ox, oy), textcoords="offset points",
                    fontsize=fontsize, ha=ha, va=va,
                )  # fmt: skip
                box = ann.get_window_extent(renderer)
                inside = (
                    box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1
                )
                clash = sum(box.overlaps(b) for b in placed) + sum(box.overlaps(b) for b in obstacles)
                cost = clash * 10 + (not inside) * 5 + (not nearest_is_own(box, i)) * 3
                if best is None or cost < best[0]:
                    if best is not None:
                        best[1].remove()
                    best = (cost, ann, box, r)
                else:
                    ann.remove()
                if best[0] == 0:
                    break
            if best[0] == 0:
                break
        _, ann, box, r = best
        if r > _LABEL_RADII[0]:
            ann.arrow_patch = None
            ann.remove()
            ann = ax.annotate(
                str(name), (xs[i], ys[i]), xytext=ann.xyann, textcoords="offset points", fontsize=fontsize,
                ha=ann.get_ha(), va=ann.get_va(), arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "0.5"},
            )  # fmt: skip
        placed.append(box)
        anns.append(ann)
    return anns


def label_box(ann, renderer):
    """The display box of an annotation's text alone (its extent with a leader line includes the line)."""
    from matplotlib.text import Text

    ann.get_window_extent(renderer)  # places the text for this renderer
    return Text.get_window_extent(ann, renderer)


def _box_distance(box, p) -> float:
    """Distance (display units) from point ``p`` to the rectangle ``box`` (0 inside)."""
    dx = max(box.x0 - p[0], 0.0, p[0] - box.x1)
    dy = max(box.y0 - p[1], 0.0, p[1] - box.y1)
    return float((dx * dx + dy * dy) ** 0.5)


# --------------------------------------------------------------------------- figure conventions
# One colour per arm in every figure (issue 40.5): a reader who learnt that seeded single-elim is
# red in one figure finds it red in the next. Keys are conf/reward names (the arms of the sweeps)
# and the fidelity study's constructor specs; anything else gets a colour from its name's hash.

ARM_COLORS = {
    # the scoring baselines and their controls: greys and brown
    "pointwise": "#333333",
    "pointwise_rank": "#999999",
    "pointwise_budget": "#8c564b",
    "rlvr": "#333333",  # reasoning_arena's baseline (plain verifier rewards)
    # the judge-free ceilings: golds
    "oracle": "#e6ab02",
    "rank_oracle": "#a6761d",
    # ArenaRL's topologies
    "anchor": "#1f77b4",
    "seeded_single_elim": "#d62728",
    "round_robin": "#2ca02c",
    "double_elim": "#9467bd",
    "double_elim:seeding=anchor": "#c5b0d5",
    "swiss": "#17becf",
    "bt_bracket": "#aec7e8",
    "adaptive_pairs": "#98df8a",
    # RRC
    "prc": "#ff7f0e",
    "rrc_scr": "#e377c2",
    "rrc_scr_cara": "#f7b6d2",
    "rrc_scr:cara=true": "#f7b6d2",
    "rrc_scr_vote3": "#b5398f",
    "rrc_agr": "#7b4173",
    "rrc_agr_vote3": "#ce6dbd",
    # Reasoning Arena, Writing-Zero
    "adaptive": "#637939",
    "reasoning_arena_live": "#8ca252",
    "reasoning_arena_full": "#b5cf6b",
    "writing_zero": "#ad494a",
    # judging more than two at once (issue 41): RULER's listwise call, Tournament-GRPO's k-wise
    "listwise": "#bcbd22",
    "kwise_knockout": "#5254a3",
}
_FALLBACK = ("#393b79", "#5254a3", "#6b6ecf", "#843c39", "#d6616b", "#e7969c", "#31a354", "#756bb1")


def arm_color(arm: str) -> str:
    """The arm's colour in every figure (:data:`ARM_COLORS`; ``reward=x`` and ``x seed=..``
    settings are read as ``x``, a spec ``x:key=value`` without its own entry as ``x``); an unknown
    arm gets a fixed colour from its name."""
    name = str(arm).removeprefix("reward=").split(" ")[0]
    for key in (name, name.split(":")[0]):  # a spec's variant (name:key=value) shares its colour
        if key in ARM_COLORS:
            return ARM_COLORS[key]
    import zlib

    return _FALLBACK[zlib.crc32(name.encode()) % len(_FALLBACK)]


# Axis labels in words, with the unit (the toy task's quality is in its own "task units": the true
# quality the simulated judge and the evaluator see, docs/training.md).
METRIC_LABELS = {
    "eval_sampled_quality": "sampled quality (mean true quality of 16 samples, task units)",
    "eval_quality": "greedy quality (true quality of the greedy answer, task units)",
    "quality_mean": "training-batch quality (mean true quality, task units)",
    "eval_pass_rate": "pass rate (share of sampled answers the verifier accepts)",
    "eval_greedy_pass_rate": "greedy pass rate (share of greedy answers the verifier accepts)",
    "snr": "SNR = σ_group / σ_noise (ratio)",
    "sigma_group": "σ_group: SD of judge scores within a group (score units)",
    "sigma_noise": "σ_noise: SD of a re-asked judge score (score units)",
    "entropy": "policy entropy (nats per token)",
    "adv_oracle_pearson": "advantage–oracle correlation (Pearson r)",
    "distinct_share": "distinct answers per group (share of N)",
    "zero_adv_share": "groups with all-zero advantage (share)",
    "judge_tie_rate": "judge ties (share of comparisons)",
    "kendall_tau": "Kendall τ vs the true order",
}


def metric_label(metric: str) -> str:
    """An axis label in words with its unit for a logged metric (its code name if unknown)."""
    return METRIC_LABELS.get(metric, metric.replace("_", " "))


def metric_short(metric: str) -> str:
    """The label's name part ('sampled quality')."""
    return metric_label(metric).split(" (")[0]


def metric_unit(metric: str) -> str:
    """The label's unit ('task units'; '' if it states none)."""
    label = metric_label(metric)
    return label.rsplit("(", 1)[1].rstrip(")").split(", ")[-1] if label.endswith(")") else ""


JUDGE_NAMES = {
    "calibrated": "calibrated simulated judge",
    "integer": "integer-grid simulated judge (0–10)",
    "cot": "chain-of-thought simulated judge (cot)",
    "gpt4_llmbar": "judge fitted to GPT-4 on LLMBar",
    "chatgpt_llmbar": "judge fitted to ChatGPT on LLMBar",
    "gpt4turbo_mtbench": "judge fitted to GPT-4-Turbo on MT-bench",
    "gpt4_llmbar_persistent": "judge fitted to GPT-4 on LLMBar, with persistent and length error",
    "chatgpt_llmbar_persistent": "judge fitted to ChatGPT on LLMBar, with persistent and length error",
}


def judge_name(judge: str | None) -> str:
    return JUDGE_NAMES.get(str(judge), f"judge {judge}")


def figure_title(experiment: str, judge: str | None, what: str) -> str:
    """Every figure's title: the experiment, the judge and what is drawn (issue 40.5). The figure
    functions wrap it to their width."""
    return f"{experiment} — {judge_name(judge)}: {what}"


def t_half_width(std, n, level: float = 0.95):
    """The t confidence half-width of a mean from its sample SD and count (elementwise; NaN where
    n < 2): the bands of the per-step figures are these, not ± 1 SD."""
    import numpy as np
    from scipy import stats

    std, n = np.asarray(std, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = stats.t.ppf(0.5 + level / 2, np.where(n >= 2, n - 1, np.nan))
        return q * std / np.sqrt(n)
