"""experiments/anchor_bias.py (issue 31.3): it measures on the slow test's groups, and a small run
writes both tables with a row per cell."""

import importlib.util
import sys

import numpy as np
import pandas as pd
from conftest import make_group
from helpers import ROOT

from arenabench import sim

spec = importlib.util.spec_from_file_location("anchor_bias", ROOT / "experiments" / "anchor_bias.py")
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)


def test_the_script_measures_on_the_slow_tests_groups():
    """One builder (``sim.equal_quality_groups``) for the script and the slow test, and it gives
    the groups the published numbers were measured on (``make_group`` per prompt, as before)."""
    sys.path.insert(0, str(ROOT / "tests" / "rewards"))
    import test_single_elim_anchor as slow

    assert ab.equal_quality_groups is slow.equal_quality_groups is sim.equal_quality_groups
    rng = np.random.default_rng(11)
    before = [
        make_group([1.7 + 0.3 * rng.standard_normal()] * 8, anchor=0, prompt=f"eq{g}") for g in range(5)
    ]
    for mine, theirs in zip(sim.equal_quality_groups(5, 8), before, strict=True):
        assert mine.prompt == theirs.prompt and mine.anchor == theirs.anchor == 0
        assert [(t.id, t.text, t.length, t.meta) for t in mine.trajectories] == [
            (t.id, t.text, t.length, t.meta) for t in theirs.trajectories
        ]
        assert mine.meta == theirs.meta


def test_a_small_run_writes_every_cell(tmp_path, monkeypatch):
    argv = ["anchor_bias.py", "--out", str(tmp_path), "--rules", "mean,neutral", "--judges", "integer"]
    argv += ["--sizes", "4", "--groups", "30", "--fidelity-groups", "20"]
    monkeypatch.setattr(sys, "argv", argv)
    ab.main()
    bias = pd.read_csv(tmp_path / "bias.csv")
    assert sorted(bias.rule) == ["mean", "neutral"] and (bias.groups == 30).all() and (bias.se > 0).all()
    fid = pd.read_csv(tmp_path / "fidelity.csv")
    assert fid.rule.tolist() == ["neutral"] and fid.base.tolist() == ["mean"]
    assert fid.d_kendall_tau_lo[0] <= fid.d_kendall_tau[0] <= fid.d_kendall_tau_hi[0]
    md = (tmp_path / "anchor_bias.md").read_text()
    assert "| `integer` | 4 |" in md and "| `integer` | 4 | neutral |" in md
