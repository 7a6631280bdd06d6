#!/usr/bin/env bash
# GPU smoke test for the verl integration (issues 7, 30). NOT part of CI: CI machines have no GPU.
# The same loop runs on CPU in CI (tests/verl/test_cpu_e2e.py: `trainer.device=cpu`, the hf rollout
# on the host); this script is what only a GPU can check: CUDA FSDP, and the rollout on the GPU.
#
# Builds the tiny local model and data (no download), then runs 2 verl GRPO steps and 2 verl
# CISPO steps on ONE GPU with arenabench's group reward manager (seeded single-elimination,
# simulated judge), and prints the metrics verl and the reward worker logged to MLflow per step.
#
#   PY=/path/to/gpu-venv/bin/python scripts/gpu_smoke.sh [--rollout vllm|hf] [--dry-run] [WORK_DIR]
#
#   --rollout vllm   (default) verl's vLLM rollout, colocated, with sleep mode. PY needs verl 0.9.1,
#                    vLLM and a CUDA torch:  pip install -e '.[verl]' 'verl[vllm]==0.9.1'
#   --rollout hf     arenabench's hf rollout backend on the GPU (actor_rollout_ref.rollout.name=hf:
#                    transformers generation, bf16): no vLLM. PY needs verl + ray + a CUDA torch
#                    only:  pip install -e '.[verl]' (with a CUDA torch)
#   --dry-run        check the arguments, print what would run and exit 0; needs no GPU and no package
#
# (the CPU venv .venv-verl has a CPU torch and cannot run either mode.) Exit codes: 0 ok, 1 a run
# failed, 2 bad arguments / no GPU / missing packages (then nothing ran: say so, do not report it as run).
set -euo pipefail

usage() { sed -n '10,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PY:-python}"
ROLLOUT=vllm
DRY_RUN=0
WORK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rollout) [ $# -ge 2 ] && [ "${2#-}" = "$2" ] || { echo "gpu_smoke: --rollout needs a value: hf or vllm" >&2; exit 2; }
               ROLLOUT="$2"; shift 2 ;;
    --rollout=*) ROLLOUT="${1#--rollout=}"; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu_smoke: unknown option $1 (valid: --rollout hf|vllm, --dry-run, --help)" >&2; exit 2 ;;
    *) [ -z "$WORK" ] || { echo "gpu_smoke: one WORK_DIR only (got $WORK and $1)" >&2; exit 2; }
       WORK="$1"; shift ;;
  esac
done
case "$ROLLOUT" in
  vllm) MODS="verl vllm ray transfer_queue cachetools arenabench"; OVERRIDES=() ;;
  hf)   MODS="verl ray transfer_queue cachetools arenabench"; OVERRIDES=("actor_rollout_ref.rollout.name=hf") ;;
  *) echo "gpu_smoke: unknown rollout '$ROLLOUT' (valid: hf, vllm)" >&2; exit 2 ;;
esac
if [ -z "$WORK" ] && [ "$DRY_RUN" = 0 ]; then WORK="$(mktemp -d /tmp/arenabench-gpu-smoke.XXXXXX)"; fi
STEP_TIMEOUT="${STEP_TIMEOUT:-1200}"   # seconds per training run (model load + rollout start + 2 steps)
launch_args() {  # the launcher's arguments for one loss
  echo "--config-name smoke loss=$1 arenabench.sweep=gpu_smoke_$ROLLOUT ${OVERRIDES[*]:-}"
}

echo "gpu_smoke: rollout=$ROLLOUT work=${WORK:-<a new /tmp dir>} python=$PY"
echo "gpu_smoke: needs a CUDA torch and the modules: $MODS"
if [ "$DRY_RUN" = 1 ]; then
  for loss in grpo cispo; do
    echo "gpu_smoke: would run: $PY -m arenabench.trainers.verl.launch $(launch_args $loss)"
  done
  echo "gpu_smoke: dry run, nothing was run"
  exit 0
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_smoke: no NVIDIA GPU visible (nvidia-smi); nothing was run" >&2
  exit 2
fi
if ! MODS="$MODS" "$PY" - <<'EOF'
import importlib.util
import os
import sys

import torch

missing = [m for m in os.environ["MODS"].split() if importlib.util.find_spec(m) is None]
if missing or not torch.cuda.is_available():
    print(f"gpu_smoke: missing {missing or ''} cuda={torch.cuda.is_available()}", file=sys.stderr)
    sys.exit(1)
EOF
then
  echo "gpu_smoke: $PY lacks ${MODS// //}/CUDA torch; nothing was run" >&2
  exit 2
fi

nvidia-smi -L
"$PY" -c "import torch, verl, ray; print('torch', torch.__version__, 'verl', verl.__version__, 'ray', ray.__version__)"
[ "$ROLLOUT" = vllm ] && "$PY" -c "import vllm; print('vllm', vllm.__version__)"

echo "== building the tiny model and data in $WORK"
"$PY" -m arenabench.trainers.verl.tiny_model "$WORK"
export ARENABENCH_SMOKE_DIR="$WORK"
export MLFLOW_TRACKING_URI="sqlite:///$WORK/mlflow.db"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"

cd "$REPO"
status=0
for loss in grpo cispo; do
  echo "== verl, 2 steps, loss=$loss, rollout=$ROLLOUT (log: $WORK/$loss.log)"
  start=$(date +%s)
  # shellcheck disable=SC2046  (the arguments hold no spaces)
  if timeout "$STEP_TIMEOUT" "$PY" -m arenabench.trainers.verl.launch $(launch_args "$loss") \
      >"$WORK/$loss.log" 2>&1; then
    echo "   ok (rc=0) in $(( $(date +%s) - start )) s"
    grep -h "hf rollout server" "$WORK/$loss.log" | sed 's/^/   /' || true
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
# per step: verl's actor/* and timing_s/*, the weight-sync check, and the reward worker's metrics
prefixes = ("actor/", "timing_s/", "training/rollout_probs_diff", "judge_", "arena/")
extra = ("critic/score/mean", "critic/advantages/mean", "critic/advantages/max", "response_length/mean")
ok = True
for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]):
    tags = run.data.tags
    print(f"\nrun {run.info.run_id} status={run.info.status} loss={tags.get('loss')} "
          f"constructor={tags.get('constructor')} setting={tags.get('setting')!r}")
    steps = sorted({m.step for m in client.get_metric_history(run.info.run_id, "actor/pg_loss")})
    print(f"  steps with actor/pg_loss: {steps}")
    for k in sorted(k for k in run.data.metrics if k.startswith(prefixes) or k in extra):
        hist = sorted(client.get_metric_history(run.info.run_id, k), key=lambda m: m.step)
        print(f"  {k:44s} " + "  ".join(f"step {m.step}: {m.value:.4g}" for m in hist))
    # the reward worker logs one point per global step, however many barrier flushes it took
    calls = sorted(m.step for m in client.get_metric_history(run.info.run_id, "judge_calls"))
    print(f"  steps with judge_calls:   {calls}")
    ok &= run.info.status == "FINISHED" and len(steps) >= 2 and calls == steps
print("\nsmoke:", "OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
EOF
echo "gpu_smoke: exit $status"
exit $status
