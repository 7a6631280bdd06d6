"""The engine's short-list mean (``kinds.mean``) is ``float(np.mean(xs))`` bit for bit (issue 17: a lighter
engine must not change a single result)."""

import math
import struct

import numpy as np
import pytest

from arenabench.kinds import mean

SPECIALS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    0.2,
    0.3,
    0.5,
    5e-324,
    -5e-324,
    1.7976931348623157e308,
    -1.7976931348623157e308,
]


def _bits(x: float) -> bytes:
    return struct.pack("<d", float(x))


def _values(rng, k):
    out = []
    for _ in range(k):
        r = rng.integers(5)
        if r == 0:
            out.append(SPECIALS[rng.integers(len(SPECIALS))])
        elif r == 1:
            out.append(float(rng.random()))
        elif r == 2:
            out.append(1.0 - float(rng.random()))
        elif r == 3:
            out.append(float(rng.standard_normal() * 10.0 ** float(rng.integers(-300, 300))))
        else:
            out.append(float(rng.integers(0, 21)) / 2)
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7, 8, 9])
def test_mean_is_numpys_bit_for_bit(k):
    rng = np.random.default_rng(k)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(20_000):
            xs = _values(rng, k)
            want, got = float(np.mean(xs)), mean(xs)
            assert _bits(want) == _bits(got) or (math.isnan(want) and math.isnan(got)), xs


def test_mean_of_numpy_scalars_and_signed_zeros():
    assert _bits(mean([np.float64(-0.0)])) == _bits(np.mean([-0.0])) == _bits(0.0)
    assert _bits(mean([-0.0, -0.0])) == _bits(np.mean([-0.0, -0.0]))
    assert mean([np.float64(0.1), np.float64(0.2)]) == float(np.mean([0.1, 0.2]))
    assert type(mean([np.float64(0.25)])) is float
