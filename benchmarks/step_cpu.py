"""Per-step CPU of the judge path of a table2 job: engine + constructor + judge + token
counting + the SNR probe, without the policy (issue 28, item 1).

Each table2 arm that asks a judge runs ``steps`` steps of K = 8 groups of N = 8 on the
``preference`` task, with the engine and judge built as the local trainer builds them
(``conf/judge/calibrated.yaml``, ``conf/task/preference.yaml``, ``conf/reward/<arm>.yaml``: the
calibrated simulated judge counting ``tiny-bpe`` tokens, behind a :class:`JudgeStack`), then
:func:`diagnostics.pointwise_snr` on the same groups. The responses are drawn around one
response per prompt (each token resampled with probability 0.3), so groups hold duplicates as a
concentrated SFT policy's do.

:func:`digest` hashes every output of that path (advantages, rewards and ranks as float hex,
every counter of the engine, the groups and the judge, the probe's numbers): the bit-identity
check of ``tests/benchmarks/test_step_cpu.py``. Run ``python benchmarks/step_cpu.py [--steps S]
[--base DIR]``: CPU seconds per arm (``--base``: also for the ``arenabench`` package under DIR,
in a subprocess, and the ratio).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _table2_judged_arms() -> tuple[str, ...]:
    """table2's arms that ask the judge (``conf/experiment/table2.yaml``; the oracles ask none)."""
    cfg = yaml.safe_load((ROOT / "conf/experiment/table2.yaml").read_text())
    return tuple(a for a in cfg["hydra"]["sweeper"]["params"]["reward"].split(",") if "oracle" not in a)


ARMS = _table2_judged_arms()
JUDGE = yaml.safe_load((ROOT / "conf/judge/calibrated.yaml").read_text())
TASK = yaml.safe_load((ROOT / "conf/task/preference.yaml").read_text())


def make_groups(task, step: int, k: int = 8, n: int = 8, seed: int = 0):
    """K groups of N responses for ``step``: each prompt's base response with tokens resampled."""
    rng = np.random.default_rng([seed, step, 28])
    pid = rng.choice(task.n_prompts, size=k, replace=False)
    base = rng.integers(0, task.vocab, size=(k, 1, task.response_len))
    noise = rng.integers(0, task.vocab, size=(k, n, task.response_len))
    resp = np.where(rng.random((k, n, task.response_len)) < 0.3, noise, base)
    return [task.group(int(p), resp[i]) for i, p in enumerate(pid)]


def run_arm(arm: str, steps: int, faults: dict | None = None, seed: int = 0, sink=None) -> float:
    """CPU seconds of ``steps`` steps of ``arm``; ``sink(step, out, stack, probe)`` sees each."""
    from arenabench import judges, rewards
    from arenabench.diagnostics import pointwise_snr
    from arenabench.engine import build_engine
    from arenabench.judges.stack import JudgeStack
    from arenabench.trainers.local.task import TASKS

    cfg = dict(TASK)
    task = TASKS.get(cfg.pop("name"), **cfg)
    constructor = rewards.build(yaml.safe_load((ROOT / f"conf/reward/{arm}.yaml").read_text()))
    judge = judges.build(dict(JUDGE))
    stack = JudgeStack(judge, None, faults, key_extra={"task": TASK})
    engine = build_engine(stack, seed=seed)
    rng = np.random.default_rng(seed)
    all_groups = [make_groups(task, s, seed=seed) for s in range(steps)]
    t0 = time.process_time()
    for step, groups in enumerate(all_groups):
        out = engine.run(constructor, groups, step=step)
        probe = pointwise_snr(judge, groups, rng, 8, 4)
        if sink is not None:
            sink(step, out, stack, probe)
    return time.process_time() - t0


def _hex(x) -> list[str]:
    return [float(v).hex() for v in np.asarray(x, dtype=float).ravel()]


def digest(arms=ARMS, steps: int = 3, faults: dict | None = None, seed: int = 0) -> dict[str, str]:
    """Per arm, a sha256 of everything the judge path outputs over ``steps`` steps."""
    out = {}
    for arm in arms:
        h = hashlib.sha256()

        def sink(step, res, stack, probe, h=h):
            for r in res.results:
                rec = [_hex(r.reward), _hex(r.advantage), _hex(r.rank), r.comparisons, r.judge_calls]
                rec += [r.waves, r.failures, r.retries, r.lost, sorted(r.flags)]
                h.update(json.dumps(rec).encode())
            st = dict(vars(res.stats))
            st["health"] = {
                k: (float(v).hex() if isinstance(v, float) else v) for k, v in vars(st["health"]).items()
            }
            h.update(json.dumps(st, sort_keys=True, default=str).encode())
            metrics = stack.step_metrics()
            metrics = {k: v for k, v in metrics.items() if "latency" not in k}
            h.update(json.dumps({k: float(v).hex() for k, v in sorted(metrics.items())}).encode())
            h.update(json.dumps({k: float(v).hex() for k, v in sorted(probe.items())}).encode())

        run_arm(arm, steps, faults, seed=seed, sink=sink)
        out[arm] = h.hexdigest()[:16]
    return out


def _cpu(steps: int) -> dict[str, float]:
    return {arm: run_arm(arm, steps) for arm in ARMS}


def _cpu_in(package_dir: str, steps: int) -> dict[str, float]:
    """:func:`_cpu` of the ``arenabench`` package under ``package_dir``, in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_dir, here]))
    cmd = [sys.executable, os.path.abspath(__file__), "--steps", str(steps), "--json"]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--base", help="a directory holding another arenabench package to compare with")
    ap.add_argument("--repeats", type=int, default=3, help="with --base: alternating runs, min kept")
    ap.add_argument("--json", action="store_true", help="print this process's CPU per arm as JSON")
    args = ap.parse_args(argv)
    if args.json:
        print(json.dumps(_cpu(args.steps)))
        return
    this_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": this_dir} | ({"base": args.base} if args.base else {})
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for _ in range(args.repeats if args.base else 1):  # alternating: both see the same load
        for name, d in trees.items():
            runs[name].append(_cpu_in(d, args.steps))
    best = {name: {arm: min(r[arm] for r in rs) for arm in ARMS} for name, rs in runs.items()}
    here, base = best["this"], best.get("base")
    from arenabench import reporting

    print(f"machine: {reporting.machine_line(reporting.machine())}\n")
    print(f"CPU seconds for {args.steps} steps (K = 8, N = 8), engine + judge + tokens + probe,")
    print(f"min of {len(runs['this'])} alternating runs")
    print("| arm | this tree | base | base / this |\n|---|---|---|---|")
    nan = float("nan")
    for arm in ARMS:
        b = base[arm] if base else nan
        print(f"| {arm} | {here[arm]:.3f} | {b:.3f} | {b / here[arm]:.2f} |")
    tot, btot = sum(here.values()), sum(base.values()) if base else nan
    print(f"| total | {tot:.3f} | {btot:.3f} | {btot / tot:.2f} |")


if __name__ == "__main__":
    main()
