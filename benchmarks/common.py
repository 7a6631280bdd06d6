"""Shared pieces of the benchmarks: BLAS pinning, constructor list, CLI options; tables and the
machine description come from :mod:`arenabench.reporting`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from arenabench import reporting, rewards
from arenabench.sim import simulate_groups

ROOT = Path(__file__).resolve().parents[1]
BLAS_THREADS = 1
# configured variants reported next to every registered constructor's defaults (as the fidelity study)
VARIANTS = ["rrc_scr:cara=true", "double_elim:seeding=anchor"]


def limit_blas_threads(n: int = BLAS_THREADS) -> str:
    """Pin BLAS (OpenBLAS/MKL) to ``n`` threads for this process, like the trainer pins torch to 1.

    Threaded BLAS on tiny problems (scipy's L-BFGS-B inside every Bradley-Terry fit, before the
    fit became a thread-free Newton solve) was 10–50× slower on a loaded 2-core machine, which
    would swamp every table; ``aggregation.md`` and ``overhead.md`` measure both settings. Needs
    threadpoolctl (a dependency); without it only libraries loaded later see the environment
    variables. Returns a line for the machine description.
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


def machine() -> dict[str, str]:
    """What a reader needs to interpret absolute times: CPU, cores, versions, date, load."""
    return reporting.machine(blas_threads=BLAS_SETTING)


BLAS_SETTING = limit_blas_threads()


def parser(doc: str | None, constructors: bool = False) -> argparse.ArgumentParser:
    """The options every benchmark script takes: ``--out``, ``--quick`` (and ``--constructors``)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--out", default="results/bench")
    ap.add_argument("--quick", action="store_true", help="smoke sizes: seconds, not results")
    if constructors:
        ap.add_argument(
            "--constructors", default=None, help="comma list (default: all registered + variants)"
        )
    return ap


def save_csv(out: Path, name: str, rows) -> None:
    """A part's rows as ``out/name`` (creating ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    reporting.write_csv(out / name, rows)


def quick_note(quick: bool) -> list[str]:
    """The line every quick-mode page carries (an empty list otherwise)."""
    return ["", "**quick mode** (smoke sizes; not the reported numbers)."] if quick else []


def write_page(
    out: Path, name: str, title: str, m, body: str, quick: bool = False, command: str = ""
) -> None:
    """``out/name`` (e.g. ``waves.md``) with its provenance header; the command defaults to the
    script of the same name (``python benchmarks/waves.py [--quick]``)."""
    command = command or f"python benchmarks/{Path(name).stem}.py" + (" --quick" if quick else "")
    reporting.write_md(out / name, title, m, command, body)


def cli(run, doc: str | None, argv=None) -> None:
    """``main`` of a part that takes ``--out``, ``--quick`` and ``--constructors``."""
    args = parser(doc, constructors=True).parse_args(argv)
    print(run(Path(args.out), args.quick, args.constructors))


def progress(part: str, text: str) -> None:
    """One progress line of a benchmark part on stdout."""
    print(f"[{part}] {text}", flush=True)
