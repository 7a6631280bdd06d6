"""What training S seeds of one arm as one batch could save (issue 28): a step's torch work at
K·N = 64 rows vs one batch of S × 64 rows.

The torch part of a local-trainer step — KV-cached rollout sampling, the reference forward, the
update forward, backward, AdamW — on the table2 policy (the preference task's vocabulary and
lengths, ``conf/trainer/grpo.yaml``'s sizes, one torch thread), in CPU seconds per 64 rows.
If per-op overhead dominated, S × 64 rows would cost about what 64 do; if the kernels' work does,
the cost per 64 rows stays flat. The ratio bounds what batching seeds (``vmap`` over stacked
weights, a numerics change) could buy on the torch part; the engine, the judge and the metrics
are per seed either way. ``python benchmarks/batch_ceiling.py --out results/bench``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

from arenabench import reporting

ROWS = 64  # K·N of a table2 step


def step_cpu(batch: int, reps: int) -> float:
    """CPU seconds of one torch step on ``batch`` rows (mean over ``reps`` after a warm-up)."""
    import torch
    import yaml

    from arenabench.trainers.local.policy import TinyLM, response_logits, sample, token_logprobs
    from arenabench.trainers.local.task import TASKS

    task = TASKS.get("preference")
    tc = yaml.safe_load((common.ROOT / "conf" / "trainer" / "grpo.yaml").read_text())
    dims = (task.vocab, task.prompt_len + task.response_len, tc["d_model"], tc["n_layer"], tc["n_head"])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, ref = TinyLM(*dims), TinyLM(*dims).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    prompts = torch.as_tensor(task.prompts[torch.randint(0, task.n_prompts, (batch,), generator=gen).numpy()])
    temp = torch.full((batch,), float(tc["temperature"]))

    def step():
        resp = sample(model, prompts, task.response_len, temp, gen, True)
        with torch.no_grad():
            response_logits(ref, prompts, resp, 1.0)
        loss = -token_logprobs(response_logits(model, prompts, resp, 1.0), resp).mean()  # (GRPO's
        # clipped ratio is a few elementwise ops more on [rows, 8])
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    c = time.process_time()
    for _ in range(reps):
        step()
    return (time.process_time() - c) / reps


def main(argv=None) -> None:
    ap = common.parser(__doc__)
    args = ap.parse_args(argv)
    sizes = (1, 2) if args.quick else (1, 2, 4, 8)
    m = common.machine()
    rows = []
    for s in sizes:
        cpu = step_cpu(ROWS * s, 4 if args.quick else max(10, 80 // s))
        rows.append({"seeds_batched": s, "rows": ROWS * s, "cpu_ms_per_step": 1e3 * cpu,
                     "cpu_ms_per_64_rows": 1e3 * cpu / s})  # fmt: skip
    base = rows[0]["cpu_ms_per_64_rows"]
    for r in rows:
        r["vs_unbatched"] = r["cpu_ms_per_64_rows"] / base
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reporting.write_csv(out / "batch_ceiling.csv", rows)
    best = min(r["vs_unbatched"] for r in rows)
    body = (
        "The torch part of a table2 step (rollouts, reference and update forwards, backward, AdamW) "
        f"on 64 rows vs S × 64 rows in one batch. Best: {best:.2f}× the unbatched CPU per 64 rows, so "
        f"batching seeds could save at most {1 - best:.0%} of the torch part of a step (the engine, "
        "judge and metrics stay per seed), and it changes numerics (more rows round differently).\n\n"
        + "\n".join(common.quick_note(args.quick))
        + "\n"
        + reporting.md_table(rows, list(rows[0]))
    )
    reporting.write_md(
        out / "batch_ceiling.md", "Batching seeds: the ceiling", m, "python benchmarks/batch_ceiling.py", body
    )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
