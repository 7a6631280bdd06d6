"""Small Bradley-Terry fits run on one BLAS thread, with the same numbers as on the caller's
BLAS threads (issue 17)."""

import importlib

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")
# the package re-exports the function under the module's name: fetch the module itself
bt = importlib.import_module("arenabench.aggregation.bradley_terry")


def _blas_threads():
    return [x["num_threads"] for x in threadpoolctl.threadpool_info() if x["user_api"] == "blas"]


@pytest.mark.parametrize("n", [2, 8, 16, 64, 128])  # 128: above UNSPLIT_FIT, limited
def test_one_blas_thread_gives_the_same_fit(n, monkeypatch):
    rng = np.random.default_rng(n)
    m = 3 * n
    i = rng.integers(0, n, m)
    j = (i + 1 + rng.integers(0, n - 1, m)) % n
    o = rng.random(m)
    limited = bt.bradley_terry(n, i, j, o)
    monkeypatch.setattr(bt, "SMALL_FIT", 0)  # the caller's BLAS threads, as before
    with threadpoolctl.threadpool_limits(2, "blas"):
        threaded = bt.bradley_terry(n, i, j, o)
    assert limited.tobytes() == threaded.tobytes()


def test_the_limit_is_lifted_after_the_fit():
    with threadpoolctl.threadpool_limits(2, "blas"):
        before = _blas_threads()
        with bt.one_blas_thread():
            inside = _blas_threads()
        after = _blas_threads()
    assert after == before and all(t == 1 for t in inside)
