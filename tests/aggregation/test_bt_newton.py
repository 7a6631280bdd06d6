"""The Bradley-Terry fit is Newton's method to the exact MAP (issue 17): its gradient vanishes to
round-off, a warm start changes nothing but the path, and it agrees with the L-BFGS-B path that
fits above DENSE_FIT strengths."""

import importlib

import numpy as np
import pytest

bt = importlib.import_module("arenabench.aggregation.bradley_terry")


def _problem(n, m, seed, hard=False, weighted=False):
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, m)
    j = (i + 1 + rng.integers(0, n - 1, m)) % n
    o = np.ones(m) if hard else rng.choice([0.1, 0.5, 0.9, 0.3], m)
    w = rng.uniform(0.5, 2.0, m) if weighted else None
    return i, j, o, w


def _gradient(theta, i, j, o, w, l2):
    """The objective's gradient, written out as in the module docstring."""
    n = len(theta)
    w = np.ones(len(i)) if w is None else w
    gd = w * (1 / (1 + np.exp(-(theta[i] - theta[j]))) - o)
    return 2 * l2 * theta + np.bincount(i, gd, minlength=n) - np.bincount(j, gd, minlength=n)


CASES = [
    (n, m, hard, weighted)
    for n, m in [(2, 3), (8, 18), (8, 36), (16, 60), (64, 200), (200, 900)]
    for hard, weighted in [(False, False), (True, False), (False, True)]
]


@pytest.mark.parametrize("n,m,hard,weighted", CASES)
def test_newton_reaches_the_optimum(n, m, hard, weighted):
    i, j, o, w = _problem(n, m, seed=n + m, hard=hard, weighted=weighted)
    theta = bt.bradley_terry(n, i, j, o, weight=w)
    seen = np.zeros(n, bool)
    seen[i] = seen[j] = True
    assert np.abs(_gradient(theta, i, j, o, w, 0.1)[seen]).max() < 1e-12


@pytest.mark.parametrize("n,m", [(8, 36), (16, 60), (64, 200)])
def test_newton_agrees_with_lbfgs(n, m, monkeypatch):
    i, j, o, _ = _problem(n, m, seed=3)
    newton = bt.bradley_terry(n, i, j, o)
    monkeypatch.setattr(bt, "DENSE_FIT", 0)  # every fit by L-BFGS-B
    lbfgs = bt.bradley_terry(n, i, j, o)
    np.testing.assert_allclose(newton, lbfgs, atol=1e-6)  # L-BFGS-B stops ~1e-8..1e-7 short


@pytest.mark.parametrize("seed", range(5))
def test_warm_start_changes_only_the_path(seed):
    n = 12
    i, j, o, _ = _problem(n, 50, seed)
    cold = bt.bradley_terry(n, i, j, o)
    far = np.random.default_rng(seed).normal(0, 10, n)  # a poor start needs the line search
    previous = bt.bradley_terry(n, i[:-5], j[:-5], o[:-5])  # a live tournament's last wave
    np.testing.assert_allclose(bt.bradley_terry(n, i, j, o, init=far), cold, atol=1e-12)
    np.testing.assert_allclose(bt.bradley_terry(n, i, j, o, init=previous), cold, atol=1e-12)


def test_large_strengths_converge():
    n = 10
    i, j = np.triu_indices(n, 1)  # a perfect order and a weak prior: strengths of several units
    theta = bt.bradley_terry(n, i, j, 1.0, l2=1e-4)
    assert np.all(np.diff(theta) < 0) and theta[0] - theta[-1] > 10
    assert np.abs(_gradient(theta, i, j, np.ones(len(i)), None, 1e-4)).max() < 1e-12


@pytest.mark.parametrize("init", [np.zeros(2), np.array([0.0, np.nan, 0.0])])
def test_bad_init_is_an_error(init):
    with pytest.raises(ValueError, match="init must be 3 finite strengths"):
        bt.bradley_terry(3, [0], [1], [1.0], init=init)
