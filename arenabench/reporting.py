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
