"""Issue 44.1: sweeps through hydra's submitit launcher with arenabench's stacked seeds. On
``submitit_local`` (the same code path as ``submitit_slurm``, local processes): a 2-arm x 2-seed
sweep gives the same runs as the local launcher's, metric for metric and bit for bit, and each
arm's seeds trained in one scheduler job (2 jobs, not 4)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the cluster extra")

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy")

TINY = ["reward=pointwise,anchor", "seed=0,1", "steps=3", "trainer.d_model=16", "eval_every=2",
        "probe_size=2", "prompts_per_step=2", "group_size=4", "progress=false", "name=submitit"]  # fmt: skip


def sweep(tmp_path, launcher: str, *extra: str) -> subprocess.CompletedProcess:
    uri = f"sqlite:///{tmp_path / launcher / 'mlflow.db'}"
    (tmp_path / launcher).mkdir()
    cmd = [sys.executable, "-m", "arenabench.train", "-m", *TINY, f"hydra/launcher={launcher}",
           f"hydra.sweep.dir={tmp_path / launcher / 'sweep'}", f"tracking.uri={uri}", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


def runs(tmp_path, launcher: str) -> dict:
    """{(arm, seed): {metric: [(step, value), ...]}} of every FINISHED run."""
    from arenabench.tracking import open_client, search_all

    client = open_client(f"sqlite:///{tmp_path / launcher / 'mlflow.db'}", must_exist=True)
    exp = client.get_experiment_by_name("submitit")
    out = {}
    for r in search_all(client, exp.experiment_id):
        assert r.info.status == "FINISHED"
        hist = {
            k: sorted((m.step, m.value) for m in client.get_metric_history(r.info.run_id, k))
            for k in r.data.metrics
            if k not in ("wall_time", "steps_per_s") and "latency" not in k  # clocks, not results
        }
        out[(r.data.params["reward.name"], r.data.params["seed"])] = hist
    return out


def test_a_100_job_sweep_is_10_scheduler_jobs():
    """table2's grid (10 arms x 10 seeds): one scheduler job per arm, its 10 seeds together."""
    from arenabench.sweep import bundles

    arms = [f"reward=a{i}" for i in range(10)]
    jobs = [[arm, f"seed={s}"] for arm in arms for s in range(10)]
    groups = bundles(jobs, 10, workers=1)  # what the stacked launcher submits
    assert len(groups) == 10 and all({jobs[i][0] for i in g} == {jobs[g[0]][0]} for g in groups)
    assert sorted(i for g in groups for i in g) == list(range(100))
    assert len(bundles(jobs, 4, workers=1)) == 30  # batch_seeds=4: 4 + 3 + 3 seeds per arm


@pytest.mark.slow
def test_submitit_local_runs_equal_the_local_launchers(tmp_path):
    sweep(tmp_path, "arenabench", "hydra.launcher.n_jobs=1")
    sweep(tmp_path, "submitit_local")
    local, sub = runs(tmp_path, "arenabench"), runs(tmp_path, "submitit_local")
    assert sorted(sub) == [("anchor", "0"), ("anchor", "1"), ("pointwise", "0"), ("pointwise", "1")]
    assert sub == local
    assert all(len(h["quality_mean"]) == 3 for h in sub.values())
    # one scheduler job per arm: each trained its two seeds as one stacked batch
    jobs = sorted(p.name for p in (tmp_path / "submitit_local" / "sweep" / ".submitit").rglob("*_result.pkl"))
    assert len(jobs) == 2, jobs


def test_no_experiment_sets_a_launcher_key():
    """An experiment that sets ``hydra.launcher.*`` (e.g. ``n_jobs``) breaks
    ``hydra/launcher=submitit_slurm`` given on the command line (its schema has no such key): the
    experiments pin the launcher by the defaults list only (docs/cluster.md)."""
    from pathlib import Path

    import yaml

    conf = Path(__file__).resolve().parents[1] / "conf" / "experiment"
    for path in sorted(conf.glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text()) or {}
        assert "launcher" not in (cfg.get("hydra") or {}), path.name
