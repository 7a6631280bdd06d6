"""Start-up of the command line (issue 27): ``arenabench --help`` and ``arenabench list``, each in a
fresh interpreter, wall and user CPU time (median of ``--repeat`` runs), against ``python -c pass``.

    python benchmarks/cli_startup.py [--repeat 5] [--base /path/to/an/older/checkout]

``--base`` also times another checkout's CLI in the same run (``git archive <commit> arenabench |
tar -x -C DIR``), so that before/after is a ratio measured under one load. The goal: both answer
in < 1 s on 2 idle cores; on a loaded machine compare user CPU, which load inflates less.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"python -c pass": ["-c", "pass"], "--help": ["-m", "arenabench.cli", "--help"],
            "list": ["-m", "arenabench.cli", "list"]}  # fmt: skip


def time_once(args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, user+sys CPU s) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=cwd, stdout=subprocess.DEVNULL, check=True,
                   env={**os.environ, "PYTHONPATH": str(cwd)})  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--base", type=Path, help="another checkout (holding arenabench/) to time too")
    args = p.parse_args(argv)
    trees = {"this": ROOT, **({"base": args.base} if args.base else {})}
    print(f"load average {os.getloadavg()[0]:.1f}, {args.repeat} runs each (median)")
    print(f"{'tree':<6}{'command':<16}{'wall s':>8}{'cpu s':>8}")
    for name, tree in trees.items():
        for label, cmd in COMMANDS.items():
            runs = [time_once(cmd, tree) for _ in range(args.repeat)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{name:<6}{label:<16}{wall:>8.2f}{cpu:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
