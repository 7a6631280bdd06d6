"""Bradley-Terry fits give the same bits whatever the caller's BLAS threads (issue 17)."""

import importlib

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")
# the package re-exports the function under the module's name: fetch the module itself
bt = importlib.import_module("arenabench.aggregation.bradley_terry")


def _blas_threads():
    return [x["num_threads"] for x in threadpoolctl.threadpool_info() if x["user_api"] == "blas"]


@pytest.mark.parametrize("n", [2, 8, 16, 64])
def test_one_blas_thread_gives_the_same_fit(n):
    """Up to UNSPLIT_FIT strengths OpenBLAS never splits a fit's calls: the same bits on any
    number of threads, so those fits skip the (~20 µs) limit."""
    rng = np.random.default_rng(n)
    m = 3 * n
    i = rng.integers(0, n, m)
    j = (i + 1 + rng.integers(0, n - 1, m)) % n
    o = rng.random(m)
    assert n <= bt.UNSPLIT_FIT
    with threadpoolctl.threadpool_limits(1, "blas"):
        one = bt.bradley_terry(n, i, j, o)
    with threadpoolctl.threadpool_limits(2, "blas"):
        two = bt.bradley_terry(n, i, j, o)
    assert one.tobytes() == two.tobytes()


def test_a_larger_fit_runs_on_one_thread_whatever_the_caller():
    """Above UNSPLIT_FIT a threaded Cholesky may add in another order (last-bit differences):
    the fit limits BLAS to one thread, so the caller's setting changes nothing."""
    n = 128
    rng = np.random.default_rng(n)
    i = rng.integers(0, n, 3 * n)
    j = (i + 1 + rng.integers(0, n - 1, 3 * n)) % n
    o = rng.random(3 * n)
    with threadpoolctl.threadpool_limits(1, "blas"):
        one = bt.bradley_terry(n, i, j, o)
    with threadpoolctl.threadpool_limits(2, "blas"):
        two = bt.bradley_terry(n, i, j, o)
    assert one.tobytes() == two.tobytes()


def test_the_limit_is_lifted_after_the_fit():
    with threadpoolctl.threadpool_limits(2, "blas"):
        before = _blas_threads()
        with bt.one_blas_thread():
            inside = _blas_threads()
        after = _blas_threads()
    assert after == before and all(t == 1 for t in inside)
