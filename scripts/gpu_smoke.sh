#!/usr/bin/env bash
# GPU smoke test for the verl integration (issue 7). NOT part of CI: CI machines have no GPU.
# The same loop runs on CPU in CI (tests/verl/test_cpu_e2e.py: `trainer.device=cpu`, an hf rollout
# instead of vLLM); this script is what only a GPU can check: vLLM rollout, CUDA FSDP, sleep mode.
#
# Builds the tiny local model and data (no download), then runs 2 verl GRPO steps and 2 verl
# CISPO steps on ONE GPU with vLLM rollout and arenabench's group reward manager (seeded
# single-elimination, simulated judge), and prints the metrics verl logged to MLflow.
#
#   PY=/path/to/gpu-venv/bin/python scripts/gpu_smoke.sh [WORK_DIR]
#
# PY must have arenabench installed with verl 0.9.x, vLLM and a CUDA torch, e.g.
#   pip install -e '.[verl]' 'verl[vllm]==0.9.1' cachetools TransferQueue
# (the CPU venv .venv-verl has no vLLM and cannot run this). Exit codes: 0 ok, 1 a run failed,
# 2 no GPU / missing packages (then nothing ran: say so, do not report it as run).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PY:-python}"
WORK="${1:-$(mktemp -d /tmp/arenabench-gpu-smoke.XXXXXX)}"
STEP_TIMEOUT="${STEP_TIMEOUT:-1200}"   # seconds per training run (model load + vLLM start + 2 steps)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_smoke: no NVIDIA GPU visible (nvidia-smi); nothing was run" >&2
  exit 2
fi
if ! "$PY" - <<'EOF'
import importlib.util
import sys

import torch

mods = ("verl", "vllm", "ray", "transfer_queue", "cachetools", "arenabench")
missing = [m for m in mods if importlib.util.find_spec(m) is None]
if missing or not torch.cuda.is_available():
    print(f"gpu_smoke: missing {missing or ''} cuda={torch.cuda.is_available()}", file=sys.stderr)
    sys.exit(1)
EOF
then
  echo "gpu_smoke: $PY lacks verl/vLLM/CUDA torch; nothing was run" >&2
  exit 2
fi

nvidia-smi -L
"$PY" -c "import torch, verl, vllm; print('torch', torch.__version__, 'verl', verl.__version__, 'vllm', vllm.__version__)"

echo "== building the tiny model and data in $WORK"
"$PY" -m arenabench.trainers.verl.tiny_model "$WORK"
export ARENABENCH_SMOKE_DIR="$WORK"
export MLFLOW_TRACKING_URI="sqlite:///$WORK/mlflow.db"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"

cd "$REPO"
status=0
for loss in grpo cispo; do
  echo "== verl, 2 steps, loss=$loss (log: $WORK/$loss.log)"
  start=$(date +%s)
  if timeout "$STEP_TIMEOUT" "$PY" -m arenabench.trainers.verl.launch --config-name smoke "loss=$loss" \
      "arenabench.sweep=gpu_smoke" >"$WORK/$loss.log" 2>&1; then
    echo "   ok in $(( $(date +%s) - start )) s"
  else
    rc=$?
    echo "   FAILED (rc=$rc) after $(( $(date +%s) - start )) s; last lines:"
    tail -n 40 "$WORK/$loss.log"
    status=1
  fi
done

echo "== metrics logged to $MLFLOW_TRACKING_URI (experiment verl_smoke)"
"$PY" - <<'EOF' || status=1
import os
import sys

from mlflow.tracking import MlflowClient

uri = os.environ["MLFLOW_TRACKING_URI"]
client = MlflowClient(uri)
exp = client.get_experiment_by_name("verl_smoke")
if exp is None:
    sys.exit("no verl_smoke experiment: no run logged")
keys = (
    "critic/score/mean", "critic/advantages/mean", "critic/advantages/max", "actor/pg_loss", "actor/pg_clipfrac",
    "actor/ppo_kl", "actor/kl_loss", "actor/entropy", "response_length/mean", "judge_calls", "judge_failures",
    "arena/zero_adv_share", "arena/adv_std", "arena/flushes", "arena/flush_groups", "arena/timed_out_groups",
    "training/rollout_probs_diff_max", "timing_s/step",
)
ok = True
for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]):
    tags = run.data.tags
    print(f"\nrun {run.info.run_id} status={run.info.status} loss={tags.get('loss')} "
          f"constructor={tags.get('constructor')} setting={tags.get('setting')!r}")
    steps = sorted({m.step for m in client.get_metric_history(run.info.run_id, "actor/pg_loss")})
    print(f"  steps with actor/pg_loss: {steps}")
    for k in keys:
        hist = client.get_metric_history(run.info.run_id, k)
        if hist:
            print(f"  {k:28s} " + "  ".join(f"step {m.step}: {m.value:.4g}" for m in sorted(hist, key=lambda m: m.step)))
    # the reward worker logs one point per global step, however many barrier flushes it took
    calls = sorted(m.step for m in client.get_metric_history(run.info.run_id, "judge_calls"))
    print(f"  steps with judge_calls:   {calls}")
    ok &= run.info.status == "FINISHED" and len(steps) >= 2 and calls == steps
print("\nsmoke:", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
EOF
exit $status
