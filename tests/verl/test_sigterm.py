"""A verl launch SIGTERMed once Ray is up ends its MLflow run KILLED (issue 29).

Two real CPU launches of ``arenabench-verl --config-name smoke trainer.device=cpu`` in one module
fixture, each in its own session and its own sqlite store:

* ``timeout``: SIGTERM to the launcher alone (what ``timeout`` does) as soon as verl's task runner
  runs in the Ray cluster the launcher started;
* ``scheduler``: SIGTERM to the whole session (a scheduler's preemption: driver, raylet and every
  Ray worker at once) after step 1 was logged, so verl's own MLflow logger — which ends the run
  FINISHED on its way out — is live.

Without :class:`~arenabench.trainers.verl.launch.SigtermGuard` the first ends FAILED or stays
RUNNING and the second aborts (exit -6) with its run RUNNING: Ray's C++ failure-signal handler.
"""

from __future__ import annotations

import os
import signal

import pytest
from launches import finish, launch_run_id, start, wait_for

pytestmark = pytest.mark.slow

RAY_UP = "(TaskRunner"  # verl's task runner printing from its Ray actor: ray.init has returned


def _logged(uri: str, log_path, key: str, step: int) -> bool:
    from mlflow.tracking import MlflowClient

    rid = launch_run_id(log_path.read_text())
    return rid is not None and any(m.step == step for m in MlflowClient(uri).get_metric_history(rid, key))


@pytest.fixture(scope="module")
def terminated(tiny_dir, tmp_path_factory):
    got = {}
    for name in ("timeout", "scheduler"):
        out = tmp_path_factory.mktemp(f"sigterm_{name}")
        uri = f"sqlite:///{out}/mlflow.db"  # start()'s store
        run = start(out, name, ["loss=grpo", "trainer.save_freq=-1"], tiny_dir)
        if name == "timeout":
            wait_for("verl's task runner", run, lambda r=run: RAY_UP in r["log_path"].read_text())
            os.kill(run["proc"].pid, signal.SIGTERM)
        else:
            wait_for(
                "step 1 logged by verl",
                run,
                lambda r=run, u=uri: _logged(u, r["log_path"], "actor/pg_loss", 1),
            )
            os.killpg(run["proc"].pid, signal.SIGTERM)
        got[name] = finish(run, rc_ok=(128 + signal.SIGTERM,))
        got[name]["uri"] = uri
        print(f"{name}: {got[name]['wall_s']:.0f} s")
    return got


@pytest.mark.parametrize("name", ["timeout", "scheduler"])
def test_a_sigterm_once_ray_is_up_closes_the_run_killed(terminated, name):
    from mlflow.tracking import MlflowClient

    got = terminated[name]
    run = MlflowClient(got["uri"]).get_run(got["run_id"])
    assert run.info.status == "KILLED", got["log"][-4000:]
    assert "arenabench-verl: KILLED after" in got["log"]
    # Ray's own handler did not run: it prints this and arms an abort 3 s later
    assert "SIGTERM received" not in got["log"]
    assert got["rc"] == 128 + signal.SIGTERM  # the shell's code for death by SIGTERM
    if name == "scheduler":  # verl's logger was live and wrote step 1; its FINISHED was overwritten
        hist = MlflowClient(got["uri"]).get_metric_history(got["run_id"], "actor/pg_loss")
        assert 1 in [m.step for m in hist]  # (step 2 too when the signal lands late on a loaded host)
