"""Local-trainer throughput: steps/s at K=8, N=8 on the CPU (goal ≥ 5 steps/s on 2 cores).

Writes results/bench/trainer_speed.{json,md}. Run: ``python benchmarks/trainer_speed.py``.
Each constructor trains ``--steps`` steps (no tracking, no eval) after a 5-step warm-up run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from arenabench.trainers.local.trainer import train

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def config(reward: str, steps: int) -> dict:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train", overrides=[f"reward={reward}", f"steps={steps}", "tracking=none", "eval_every=0"]
        )
    return OmegaConf.to_container(cfg, resolve=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rewards", default="pointwise,seeded_single_elim,round_robin,reasoning_arena_live")
    ap.add_argument("--out", default="results/bench")
    args = ap.parse_args()
    rows = []
    train(config("pointwise", 5), progress=False)  # warm-up (imports, allocator)
    for reward in args.rewards.split(","):
        t0 = time.perf_counter()
        final = train(config(reward, args.steps), progress=False)
        dt = time.perf_counter() - t0
        rows.append(
            {
                "reward": reward,
                "steps": args.steps,
                "seconds": dt,
                "steps_per_s": args.steps / dt,
                "judge_calls_per_step": final["judge_calls"] / args.steps,
            }
        )
        print(rows[-1])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"K": 8, "N": 8, "cpus": os.cpu_count(), "python": platform.python_version(), "threads": 1}
    (out / "trainer_speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Local trainer throughput (K = 8 prompts × N = 8 samples, 1 torch thread)",
        "",
        f"command: `python benchmarks/trainer_speed.py --steps {args.steps}`; {meta}",
        "",
        "| reward | steps/s | judge calls/step |",
        "|---|---|---|",
    ] + [f"| {r['reward']} | {r['steps_per_s']:.1f} | {r['judge_calls_per_step']:.0f} |" for r in rows]
    (out / "trainer_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
