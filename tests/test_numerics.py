"""Portable numerics (issue 40): the transcendental functions on the published path round the
same on every x86-64 CPU (``arenabench/numerics.py``)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from arenabench import numerics as nx

PACKAGE = Path(nx.__file__).parent

# numpy float64 ufuncs that have CPU-dispatched SIMD kernels (AVX512F exp/log; AVX2/AVX-512 tanh;
# SVML on AVX512_SKX for the rest): their last bit depends on the CPU numpy runs on.
DISPATCHED = {
    "exp", "log", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh", "exp2", "log2", "log10", "expm1", "log1p", "cbrt", "power",
    "float_power", "hypot",
}  # fmt: skip
# Where a dispatched ufunc may stay: code whose output is no published number (figure geometry).
ALLOWED = {("reporting.py", "hypot")}


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.concatenate(
        [rng.uniform(-700, 700, 20_000), rng.standard_normal(20_000) * 3, [0.0, -0.0, 1e-300]]
    )


@pytest.mark.parametrize(("fn", "ref"), [(nx.exp, math.exp), (nx.log, math.log), (nx.cos, math.cos)])
def test_equal_to_the_c_library_bit_for_bit(fn, ref):
    x = _inputs()
    if fn is nx.log:
        x = np.abs(x) + 1e-300
    got = fn(x)
    want = np.array([ref(v) for v in x.tolist()])
    assert got.dtype == np.float64 and got.shape == x.shape
    assert got.tobytes() == want.tobytes()


def test_shapes_scalars_and_edge_cases_follow_numpy():
    assert nx.exp(np.zeros((2, 3))).shape == (2, 3)
    assert isinstance(nx.exp(1.0), np.float64) and nx.exp(1.0) == math.e
    assert nx.exp(np.array([1e4, -1e4, np.inf, -np.inf])).tolist() == [np.inf, 0.0, np.inf, 0.0]
    assert np.isnan(nx.exp(np.nan))
    logs = nx.log(np.array([0.0, -1.0, np.inf, np.nan]))
    assert logs[0] == -np.inf and np.isnan(logs[1]) and logs[2] == np.inf and np.isnan(logs[3])
    assert np.isnan(nx.cos(np.array([np.inf, -np.inf, np.nan]))).all()
    assert nx.exp(np.array([])).shape == (0,)


def test_equal_to_numpy_where_numpy_runs_the_c_library():
    """On a CPU without AVX-512 numpy's float64 exp/log/cos are the C library's: switching the
    judges to these changed no bit of a published number (recorded on such a CPU)."""
    from numpy._core._multiarray_umath import __cpu_features__ as cpu

    if cpu.get("AVX512F") or cpu.get("AVX512_SKX"):
        pytest.skip("numpy dispatches AVX-512 kernels here: the case these functions exist for")
    x = _inputs()
    assert nx.exp(x).tobytes() == np.exp(x).tobytes()
    assert nx.cos(x).tobytes() == np.cos(x).tobytes()
    assert nx.log(np.abs(x) + 1e-300).tobytes() == np.log(np.abs(x) + 1e-300).tobytes()


def _dispatched_calls(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"np", "numpy"}
            and node.func.attr in DISPATCHED
        ):
            out.append((node.lineno, node.func.attr))
    return out


def test_no_dispatched_transcendentals():
    """Package code calls arenabench.numerics, never numpy's CPU-dispatched float ufuncs."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, fn in _dispatched_calls(ast.parse(path.read_text(), str(path))):
            if (path.name, fn) not in ALLOWED:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: np.{fn}")
    assert not bad, "use arenabench.numerics instead (issue 40):\n" + "\n".join(bad)


def test_the_guard_sees_a_call():
    assert _dispatched_calls(ast.parse("import numpy as np\ny = np.exp(x) + np.log1p(z)")) == [
        (2, "exp"),
        (2, "log1p"),
    ]


def test_trainer_pins_torch_kernels(monkeypatch):
    monkeypatch.delenv(nx.TORCH_KERNELS_ENV, raising=False)
    monkeypatch.setattr(nx, "_cpu_flags", lambda: {"avx2", "fma", "sse2"})
    assert nx.pin_torch_kernels() == "avx2"
    monkeypatch.setenv(nx.TORCH_KERNELS_ENV, "default")  # the user's choice stands
    assert nx.pin_torch_kernels() == "default"
    monkeypatch.delenv(nx.TORCH_KERNELS_ENV)
    monkeypatch.setattr(nx, "_cpu_flags", lambda: {"neon"})  # no AVX2: nothing pinned
    assert nx.pin_torch_kernels() is None and nx.TORCH_KERNELS_ENV not in __import__("os").environ
