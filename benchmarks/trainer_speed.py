"""Local-trainer throughput and peak memory at K=8, N=8 on the CPU (goal ≥ 5 steps/s on 2 cores).

Writes results/bench/trainer.{md,csv} and trainer_speed.json. Run:
``python benchmarks/trainer_speed.py``. Each reward trains in a fresh process (so peak RSS is
its own): a 5-step warm-up run, then ``--steps`` timed steps (no tracking, no eval), then 3
steps under tracemalloc for the peak of Python-heap allocations (numpy included; torch's CPU
allocator is not traced — RSS covers it).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import resource
import sys
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from arenabench import reporting

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

CONF = str(common.ROOT / "conf")
DEFAULT_REWARDS = "pointwise,seeded_single_elim,round_robin,reasoning_arena_live"


def config(reward: str, steps: int) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(
            "train", overrides=[f"reward={reward}", f"steps={steps}", "tracking=none", "eval_every=0"]
        )
    return OmegaConf.to_container(cfg, resolve=True)


def _rss_mib() -> float:
    """Peak resident set size of this process so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def bench_one(reward: str, steps: int, warmup: int = 5) -> dict:
    """Runs in a fresh process: warm-up, timed steps, then a short traced run."""
    from arenabench.trainers.local.trainer import train

    base = _rss_mib()  # after imports: what the interpreter, torch and arenabench cost
    train(config(reward, warmup), progress=False)
    t0 = time.perf_counter()
    final = train(config(reward, steps), progress=False)
    dt = time.perf_counter() - t0
    peak = _rss_mib()
    tracemalloc.start()
    train(config(reward, 3), progress=False)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "reward": reward,
        "steps": steps,
        "seconds": dt,
        "steps_per_s": steps / dt,
        "judge_calls_per_step": final["judge_calls"] / steps,
        "rss_after_imports_mib": base,
        "peak_rss_mib": peak,
        "peak_rss_over_imports_mib": peak - base,
        "tracemalloc_peak_mib": traced / 2**20,
    }


def run(
    out: Path,
    quick: bool = False,
    steps: int | None = None,
    rewards: str | None = None,
    m: dict | None = None,
) -> dict:
    steps = steps or (3 if quick else 100)
    names = (rewards or ("pointwise" if quick else DEFAULT_REWARDS)).split(",")
    m = m or common.machine()
    rows = []
    for reward in names:
        # a fresh interpreter per reward: ru_maxrss is a high-water mark of the whole process
        with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
            rows.append(pool.submit(bench_one, reward, steps, 1 if quick else 5).result())
        r = rows[-1]
        common.progress(
            "trainer",
            f"{reward:<22} {r['steps_per_s']:.1f} steps/s, peak RSS {r['peak_rss_mib']:.0f} MiB "
            f"(+{r['peak_rss_over_imports_mib']:.0f} over imports), "
            f"tracemalloc {r['tracemalloc_peak_mib']:.1f} MiB",
        )
    out.mkdir(parents=True, exist_ok=True)
    meta = {"K": 8, "N": 8, "torch_threads": 1, **m}
    (out / "trainer_speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    reporting.write_csv(out / "trainer.csv", rows)
    cols = {
        "reward": "reward",
        "steps_per_s": "steps/s",
        "judge_calls_per_step": "judge calls/step",
        "peak_rss_mib": "peak RSS MiB",
        "peak_rss_over_imports_mib": "over imports MiB",
        "tracemalloc_peak_mib": "tracemalloc peak MiB",
    }
    base = next((r for r in rows if r["reward"] == "pointwise"), rows[0])
    s = {
        "steps_per_s": {r["reward"]: r["steps_per_s"] for r in rows},
        "relative_to": base["reward"],
        "relative": {r["reward"]: r["steps_per_s"] / base["steps_per_s"] for r in rows},
        "peak_rss_mib": max(r["peak_rss_mib"] for r in rows),
        "min_steps_per_s": min(r["steps_per_s"] for r in rows),
    }
    body = [
        f"K = 8 prompts × N = 8 samples, 1 torch thread, {steps} timed steps after a warm-up, "
        "no tracking, no "
        "eval; each reward in a fresh process (peak RSS = its own high-water mark; `over imports` subtracts "
        "the interpreter + torch + arenabench after import). Goal ≥ 5 steps/s on 2 cores: min "
        f"{s['min_steps_per_s']:.1f} steps/s.",
        "",
        "Relative to pointwise: " + reporting.listing(s["relative"], ".2f", label="{}") + ".",
    ]
    body += common.quick_note(quick)
    cmd = f"python benchmarks/trainer_speed.py --steps {steps}"
    reporting.write_md(
        out / "trainer.md",
        "Local trainer throughput and memory",
        m,
        cmd,
        "\n".join(body) + "\n\n" + reporting.md_table(rows, cols),
    )
    return s


def main(argv=None) -> None:
    ap = common.parser(__doc__)
    ap.add_argument(
        "--steps", type=int, default=None, help="timed steps per reward (default 100; 3 with --quick)"
    )
    ap.add_argument("--rewards", default=None, help=f"comma list (default {DEFAULT_REWARDS})")
    args = ap.parse_args(argv)
    print(run(Path(args.out), args.quick, args.steps, args.rewards))


if __name__ == "__main__":
    main()
