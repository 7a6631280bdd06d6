"""Does the TRL example learn? Its policy's true quality before and after training, over seeds,
against a control that cannot learn the task.

Two arms, paired by seed (same start, same prompt order, same sampling seed, same evaluation):

* ``judge`` — the example as it ships (:mod:`arenabench.trainers.trl.example`'s defaults);
* ``control`` — the same run with ``--quality constant``: the simulated judge gives every
  completion the same hidden quality, so its tournaments rank only its own noise (and its position
  and length biases). The optimizer still takes steps of the same size on advantages of the same
  scale; only the information about the task is gone. A rise that the control shows too is an
  artifact (of sampling, evaluation or optimization), not learning from the judge.

``improvement`` = true quality after − before (:func:`example.train_and_evaluate`: a fixed
evaluation set, sampled as in training). Used by ``experiments/trl_learning.py`` (the published
numbers, docs/trl.md) and ``tests/trainers/trl/test_trl_learning.py`` (the test that fails when
the example stops learning).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arenabench.stats import paired_t, t_interval

#: arm → the flags it adds to the example's command line
ARMS: dict[str, list[str]] = {"judge": [], "control": ["--quality", "constant"]}


def run_arm(arm: str, seed: int, out_dir: str | Path, argv: Sequence[str] = ()) -> dict[str, Any]:
    """One training run of ``arm`` at ``seed``: a row with the true quality before/after, the
    per-step curve, the judge calls and the wall time."""
    import torch

    from arenabench.trainers.trl import example

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(1)  # the example's numbers are single-threaded: reproducible on any CPU count
    args = example.parser().parse_args(["--out-dir", str(out_dir), "--seed", str(seed), *argv, *ARMS[arm]])
    t0 = time.perf_counter()
    out = example.train_and_evaluate(args)
    return {
        "arm": arm,
        "seed": seed,
        "before": out["before"],
        "after": out["after"],
        "improvement": out["after"] - out["before"],
        "judge_calls": int(out["reward"].totals["judge_calls"]),
        "judge_failures": int(out["reward"].totals["failures"]),
        "steps": args.steps,
        "wall_s": time.perf_counter() - t0,
        "curve": out["curve"],
    }


def study(
    seeds: Sequence[int],
    out_dir: str | Path,
    argv: Sequence[str] = (),
    progress: bool = True,
    jobs: int = 1,
) -> list[dict[str, Any]]:
    """Every arm at every seed (rows in the order seed, arm); ``jobs`` > 1 runs them in that many
    processes (spawned; the shared start is built first, here). Each run is one thread either way,
    so the rows do not depend on ``jobs``."""
    import torch

    from arenabench.trainers.trl import example

    # the shared start is built here, single-threaded like the runs: on a loaded machine the two
    # threads of one niced process wait for each other (seen: the build wrote nothing in 16 min)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        example.start_model(example.parser().parse_args(["--out-dir", str(out_dir), *argv]))
    finally:
        torch.set_num_threads(threads)
    todo = [(arm, seed) for seed in seeds for arm in ARMS]
    if jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(run_arm, arm, seed, out_dir, list(argv)) for arm, seed in todo]
            rows = [f.result() for f in futures]
    else:
        rows = [run_arm(arm, seed, out_dir, argv) for arm, seed in todo]
    if progress:
        for r in rows:
            print(
                f"seed {r['seed']} {r['arm']}: true quality {r['before']:.3f} -> {r['after']:.3f} "
                f"({r['improvement']:+.3f}), {r['judge_calls']} judge calls, {r['wall_s']:.0f} s",
                flush=True,
            )
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: before, after and improvement (mean, 95% t interval); and the paired difference
    of improvements, judge − control, by seed (mean, 95% CI, paired t-test p)."""
    out: dict[str, Any] = {}
    by_arm = {a: sorted((r for r in rows if r["arm"] == a), key=lambda r: r["seed"]) for a in ARMS}
    for arm, rs in by_arm.items():
        out[arm] = {k: t_interval([r[k] for r in rs]) for k in ("before", "after", "improvement")}
    if [r["seed"] for r in by_arm["judge"]] != [r["seed"] for r in by_arm["control"]]:
        raise ValueError("the arms must be paired by seed")
    out["judge_minus_control"] = paired_t(
        [r["improvement"] for r in by_arm["judge"]], [r["improvement"] for r in by_arm["control"]]
    )
    return out


__all__ = ["ARMS", "run_arm", "study", "summary"]
