"""A short warm-start training run gives the same numbers at numpy's lowest dispatch level as at
the CPU's own (issue 40): the judge path and the trainer's numpy code round the same on any CPU;
torch's kernels are pinned by the trainer itself (``arenabench.numerics.pin_torch_kernels``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT

CODE = """
import json, sys
sys.path.insert(0, {tests!r})
from helpers import compose_cfg
from arenabench.trainers.local import TORCH_KERNELS
from arenabench.trainers.local.trainer import train
out = {{}}
for reward in ("pointwise", "seeded_single_elim"):
    cfg = compose_cfg(f"reward={{reward}}", "init=sft", "steps=4", "eval_every=2", "tracking=none")
    final = train(cfg, progress=False)
    out[reward] = {{k: float(v).hex() for k, v in final.items() if isinstance(v, (int, float))
                   and "latency" not in k and k not in ("wall_time", "steps_per_s")}}
print(json.dumps([TORCH_KERNELS, out]))
"""
LOWEST_NUMPY = (
    "SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX "
    "AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
)


def _run(extra_env: dict) -> list:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    env.update(extra_env, PYTHONPATH=str(ROOT))
    code = CODE.format(tests=str(ROOT / "tests"))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_training_numbers_do_not_depend_on_numpy_dispatch():
    native = _run({})
    lowest = _run({"NPY_DISABLE_CPU_FEATURES": LOWEST_NUMPY})
    assert native[0] == lowest[0]  # the same ATen kernel set (avx2 on an AVX2/AVX-512 CPU)
    assert native[1] == lowest[1]
    assert set(native[1]["pointwise"]) >= {"eval_sampled_quality", "judge_calls"}
