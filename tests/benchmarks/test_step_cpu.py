"""The judge path of a table2 step (engine, constructors, simulated judge, token counting, SNR
probe) is bit-identical to before its speed-ups (issue 28 item 1).

The expected digests were recorded by ``benchmarks/step_cpu.py``'s :func:`digest` run against
the package at commit 32ef398 (before the speed-ups), exported read-only::

    git archive 32ef398 arenabench conf | tar -x -C /tmp/base
    cd /tmp && PYTHONPATH=/tmp/base:<repo>/benchmarks python -c \\
        "import step_cpu; print(step_cpu.digest(steps=3)); print(step_cpu.digest(steps=3, faults=F))"

with ``F = FAULTS`` below. Each digest covers, per step, every group's rewards, advantages and
ranks (float hex), its counters and flags, the step's engine stats and comparison health, the
judge stack's step metrics (tokens prompt / cached / completion, cache counters) and the probe's
numbers. A change that alters any of them must say so and re-record them the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import ROOT

from benchmarks import step_cpu

FAULTS = {"rate": 0.2, "seed": 0, "kinds": ["raise", "malformed", "nan"], "timeout_s": 0}

PLAIN = {
    "pointwise": "c7c2981fbecddc3a",
    "anchor": "4159c29314b278fc",
    "round_robin": "8c1d490327afb77e",
    "seeded_single_elim": "ce9a4400d5899239",
    "double_elim": "a5ebff9d5542c735",
    "swiss": "69375f3188ea1973",
    "pointwise_rank": "97cabf7a4bca25b0",
    "pointwise_budget": "49651aab99b7f7f4",
}
WITH_FAULTS = {
    "pointwise": "05e4cf94c7a110b6",
    "anchor": "0468cb4e33e0e9f4",
    "round_robin": "f18a21d4abaaee77",
    "seeded_single_elim": "4abc7e6a91aeae69",
    "double_elim": "920d0bfabf7e51e7",
    "swiss": "5407fbce5c02d611",
    "pointwise_rank": "23fcbec98054608f",
    "pointwise_budget": "3728a7f4f8b950af",
}


def test_table2_judge_path_is_bit_identical():
    assert step_cpu.digest(steps=3) == PLAIN


def test_table2_judge_path_with_faults_is_bit_identical():
    """Retries and failures (20% injected faults) take the slow paths; counted the same."""
    assert step_cpu.digest(steps=3, faults=FAULTS) == WITH_FAULTS


# Every dispatch level numpy can be held below (all but its SSE3 baseline) and ATen's baseline
# kernels: the digests must not move (issue 40). They cannot force a *higher* level than the CPU
# has; that side is covered by construction (arenabench/numerics.py, tests/test_numerics.py).
LOWEST_DISPATCH = {
    "NPY_DISABLE_CPU_FEATURES": "SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2 AVX512F AVX512CD AVX512_KNL "
    "AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
    "ATEN_CPU_CAPABILITY": "default",
}


def test_digests_do_not_depend_on_the_cpu_dispatch_level():
    code = (
        "import json; from benchmarks import step_cpu; "
        f"print(json.dumps([step_cpu.digest(steps=3), step_cpu.digest(steps=3, faults={FAULTS!r})]))"
    )
    env = {**os.environ, **LOWEST_DISPATCH, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [PLAIN, WITH_FAULTS]


def test_digest_sees_a_change():
    """The digest can fail: another engine seed (other tournament draws, probe picks) changes it."""
    assert step_cpu.digest(("swiss",), steps=1, seed=1) != step_cpu.digest(("swiss",), steps=1)
