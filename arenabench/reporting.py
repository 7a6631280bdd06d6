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
