"""Issue 44.2: a shared MLflow tracking server as the multi-node store. A real ``mlflow server``
(sqlite backend, a free port), two sweeps writing into it at once from two processes (the
local launcher's stacked seeds; the bulk metric flush falls back to the REST API), every run
FINISHED with every metric point, and ``arenabench compare`` reads them back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT
from helpers.mlflow_server import MlflowServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy")]

STEPS = 3
TINY = ["trainer.d_model=16", "eval_every=0", "probe_size=2", "prompts_per_step=2", "group_size=4",
        "progress=false", "name=cluster", "hydra/launcher=arenabench", "hydra.launcher.n_jobs=1"]  # fmt: skip


def test_two_sweeps_at_once_into_one_server(tmp_path):
    srv = MlflowServer(tmp_path / "server").start()
    try:
        env = {**os.environ, "MLFLOW_TRACKING_URI": srv.uri, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "arenabench.train",
                    "-m",
                    f"reward={arm}",
                    "seed=0,1",
                    f"steps={STEPS}",
                    f"hydra.sweep.dir={tmp_path}/{arm}",
                    *TINY,
                ],  # fmt: skip
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for arm in ("pointwise", "anchor")
        ]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)

        from arenabench.tracking import open_client, search_all

        client = open_client(srv.uri)
        exp = client.get_experiment_by_name("cluster")
        runs = search_all(client, exp.experiment_id)
        assert sorted((r.data.params["reward.name"], r.data.params["seed"]) for r in runs) == [
            ("anchor", "0"), ("anchor", "1"), ("pointwise", "0"), ("pointwise", "1")]  # fmt: skip
        assert {r.info.status for r in runs} == {"FINISHED"}
        for r in runs:
            keys = [k for k in r.data.metrics if not k.endswith("_nan_steps")]
            assert "quality_mean" in keys and "snr" in keys
            for k in keys:
                steps = sorted(m.step for m in client.get_metric_history(r.info.run_id, k))
                assert steps == list(range(STEPS)), (r.info.run_id, k, steps)
            arts = {a.path for a in client.list_artifacts(r.info.run_id)}
            assert {"config.yaml", "final_metrics.json", "curves.png"} <= arts

        said = subprocess.run(
            [sys.executable, "-m", "arenabench", "compare", "--experiment", "cluster",
             "--metric", "quality_mean", "--sweep", "all", "--uri", srv.uri],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr[-2000:]
        assert "pointwise" in said.stdout and "anchor" in said.stdout, said.stdout
    finally:
        srv.kill()
