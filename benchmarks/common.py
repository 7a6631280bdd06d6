"""Shared pieces of the benchmarks: machine description, constructor list, tables on disk."""

from __future__ import annotations

import csv
import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path

from arenabench import rewards
from arenabench.sim import simulate_groups

ROOT = Path(__file__).resolve().parents[1]
BLAS_THREADS = 1
# configured variants reported next to every registered constructor's defaults (as the fidelity study)
VARIANTS = ["rrc_scr:cara=true", "double_elim:seeding=anchor"]


def limit_blas_threads(n: int = BLAS_THREADS) -> str:
    """Pin BLAS (OpenBLAS/MKL) to ``n`` threads for this process, like the trainer pins torch to 1.

    Threaded BLAS on tiny problems (scipy's L-BFGS-B inside every Bradley-Terry fit) is 10–50×
    slower on a loaded 2-core machine (``aggregation.md`` measures both), which would swamp
    every table. Needs threadpoolctl (installed with scikit-learn); without it only libraries
    loaded later see the environment variables. Returns a line for the machine description.
    """
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(n))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return f"{n} (environment only: threadpoolctl absent)"
    threadpool_limits(limits=n, user_api="blas")
    return str(n)


def constructor_specs(only: str | None = None) -> list[str]:
    """Every registered constructor, then the variants; ``only`` = a comma list to restrict to."""
    specs = rewards.names() + VARIANTS
    if only:
        wanted = [s.strip() for s in only.split(",") if s.strip()]
        for s in wanted:
            rewards.from_spec(s)  # one clear error for a bad name
        return wanted
    return specs


def skip_reason(spec: str, n: int) -> str | None:
    """Why a constructor cannot run on simulated groups of size ``n``, or None.

    ``simulate_groups`` gives every group a greedy anchor (index 0) and the prompt quality that
    AGR's simulated reference policy needs, so every registered constructor runs at any N ≥ 2;
    this is the one place to state an exception when a new constructor needs more.
    """
    if n < 2:
        return "N < 2: nothing to compare"
    return None


def groups_for(k: int, n: int, seed: int = 0):
    """K simulated groups of N (the fidelity study's distribution: anchors, prompt qualities)."""
    return simulate_groups(k, n, seed=seed)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "scipy", "torch", "choix"):
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


def machine() -> dict[str, str]:
    """What a reader needs to interpret absolute times: CPU, cores, versions, date, load."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 0
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "cpu": cpu_model(),
        "cores": f"{os.cpu_count()} ({usable} usable)",
        **_versions(),
        "blas_threads": BLAS_SETTING,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_avg_1_5_15": load,
        "commit": commit or "?",
    }


BLAS_SETTING = limit_blas_threads()


def machine_line(m: dict[str, str]) -> str:
    return "; ".join(f"{k} {v}" for k, v in m.items())


def fmt(v, digits: int = 3) -> str:
    if isinstance(v, float):
        if v != v:  # NaN
            return ""
        if abs(v) >= 1000:
            return f"{v:.0f}"
        if abs(v) >= 100:
            return f"{v:.1f}"
        return f"{v:.{digits}g}" if abs(v) < 0.01 else f"{v:.{digits}f}"
    return "" if v is None else str(v)


def md_table(rows: Sequence[dict], cols: Sequence[str], headers: Sequence[str] | None = None) -> str:
    head = list(headers or cols)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def write_md(path: Path, title: str, m: dict[str, str], command: str, body: str) -> None:
    path.write_text(f"# {title}\n\ncommand: `{command}`\n\nmachine: {machine_line(m)}\n\n{body.rstrip()}\n")
