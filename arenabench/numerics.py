"""Transcendental functions whose rounding does not depend on the CPU (issue 40).

numpy picks its float64 ``exp``/``log`` kernels (AVX512F) and ``sin``/``cos``/``tan``/``tanh``/
``expm1``/``log1p``/``power``/... kernels (AVX512_SKX, SVML) at run time by CPU; on an AVX2 CPU it
calls the C library's scalar functions for most of them. The SIMD kernels round differently from
the C library in the last bit, so a simulated judge's answers -- and every published number
downstream -- moved with the CPU (``make test`` failed on an AVX-512 machine: the pointwise
digests of ``tests/benchmarks/test_step_cpu.py``).

These functions call the C library (Python's :mod:`math`) element by element: the same code and
the same rounding on every x86-64 CPU (glibc chooses one variant for every CPU with FMA, i.e. every
AVX2 and AVX-512 CPU), whatever numpy would dispatch. On an AVX2 CPU they are bit-identical to
numpy's own results, so switching to them changed no published number
(``tests/test_numerics.py`` checks both: equality with the C library on every input, and with
numpy wherever numpy runs the C library). Edge cases follow numpy, not :mod:`math`: ``exp``
overflows to ``inf``, ``log(0) = -inf``, ``log(x < 0) = nan``, ``cos(±inf) = nan``; no warnings.

Cost: ~0.1 µs an element. The judge path asks for a few hundred a step, so it is noise beside
everything else (the table2 step benchmark). Code on the published path must use these, not the
numpy ufuncs above: ``tests/test_numerics.py::test_no_dispatched_transcendentals`` reads the
package's source and fails on a direct call.

What stays CPU-dependent, and why it does not reach a published number: numpy's ``logaddexp``
(scalar C-library code, no SIMD kernel), ``sqrt`` and the four arithmetic operations (exactly
rounded by IEEE 754 on every CPU), sums (numpy's pairwise order is fixed in its C source, not by
the vector width); BLAS dot products and LAPACK solves (OpenBLAS picks kernels by CPU) on short
vectors (n ≤ 16 players: its scalar tail, the same on every CPU); torch's kernels, pinned by
:func:`pin_torch_kernels` for the trainer's processes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

__all__ = ["cos", "exp", "log", "pin_torch_kernels"]


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _log(v: float) -> float:
    if v > 0.0:
        return math.log(v)  # +inf -> inf
    return -math.inf if v == 0.0 else math.nan


def _cos(v: float) -> float:
    return math.cos(v) if math.isfinite(v) else math.nan


def _apply(fast: Callable[[float], float], safe: Callable[[float], float], x):
    a = np.asarray(x, dtype=np.float64)
    flat = a.ravel().tolist()
    try:
        vals = list(map(fast, flat))
    except (OverflowError, ValueError):  # an edge case (overflow, log 0, cos inf): numpy's answer
        vals = list(map(safe, flat))
    out = np.array(vals, dtype=np.float64).reshape(a.shape)
    return out[()] if out.ndim == 0 else out


def exp(x):
    """``e**x`` of an array (or scalar), float64, rounded as the C library rounds on any CPU."""
    return _apply(math.exp, _exp, x)


def log(x):
    """Natural log of an array (or scalar), float64, rounded as the C library rounds on any CPU."""
    return _apply(math.log, _log, x)


def cos(x):
    """Cosine of an array (or scalar), float64, rounded as the C library rounds on any CPU."""
    return _apply(math.cos, _cos, x)


# ATen's kernels are chosen per CPU (AVX2, AVX-512): their vectorized reductions and exp/log round
# differently. The trainer's processes ask for the AVX2 set on every CPU that has it (the set the
# published runs used), unless the user chose one; on a CPU without AVX2 nothing is pinned.
TORCH_KERNELS_ENV = "ATEN_CPU_CAPABILITY"


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pin_torch_kernels() -> str | None:
    """Pin ATen's CPU kernel set to AVX2 for this process and its children (before torch runs a
    kernel: ATen reads the variable on its first dispatch). Returns the value in force, or None
    when nothing was pinned (the variable already set by the user, or a CPU without AVX2/FMA,
    e.g. ARM: its kernels differ anyway, docs/reproducibility.md)."""
    if TORCH_KERNELS_ENV in os.environ:
        return os.environ[TORCH_KERNELS_ENV]
    if {"avx2", "fma"} <= _cpu_flags():
        os.environ[TORCH_KERNELS_ENV] = "avx2"
        return "avx2"
    return None
