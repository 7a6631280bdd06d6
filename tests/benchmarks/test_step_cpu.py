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

Re-recorded once since (issue 41 item 4, 2026-12-06): table2 gained the ``listwise`` and
``kwise_knockout`` arms, and the simulated judges now bill their pointwise requests
(``PromptTokens.charge_points``; the SNR probe scores every arm's groups pointwise, so every digest's
token counters moved). With ``charge_points`` made a no-op the eight earlier arms' digests equal the
previous values exactly (checked when re-recording): nothing but the token counters changed.
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
    "pointwise": "8a484a7b855815d5",
    "anchor": "19627d671a4a8ab4",
    "round_robin": "41ad4619438bf086",
    "seeded_single_elim": "389dd4d51ba49189",
    "double_elim": "e6a0e2bceb78c4c6",
    "swiss": "965ab6e1046acb47",
    "listwise": "d85e9c621e85920f",
    "kwise_knockout": "4f4a2879b07c7979",
    "pointwise_rank": "c3edbbdad2618356",
    "pointwise_budget": "278bc9f4828678c6",
}
WITH_FAULTS = {
    "pointwise": "125076786a31b620",
    "anchor": "985799e75f0bd6e2",
    "round_robin": "92b006f675625711",
    "seeded_single_elim": "9b270e886aae7c4a",
    "double_elim": "190cb51668a5cf52",
    "swiss": "caea05a949636827",
    "listwise": "678911bb14591a2e",
    "kwise_knockout": "200a7eb0fbd2bdb2",
    "pointwise_rank": "b1e03166031d3c0b",
    "pointwise_budget": "126e4e646c211fe9",
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
