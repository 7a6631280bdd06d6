"""The TRL example's MLflow run tells the truth after a kill (issue 29): a SIGKILLed training's run
is closed FAILED by the next launch of the same job, and a SIGTERMed one closes itself KILLED
(exit 143) — statuses read back from a real sqlite store. Two real launches of
``python -m arenabench.trainers.trl.example --report-to mlflow`` on the tiny local model."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import arenabench

pytestmark = [pytest.mark.trl, pytest.mark.slow]

REPO = Path(arenabench.__file__).resolve().parents[1]


def _start(tmp_path: Path, name: str, uri: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    cmd = [
        sys.executable, "-m", "arenabench.trainers.trl.example", "--report-to", "mlflow",
        "--steps", "10000", "--out-dir", str(tmp_path / "out"), "--run-name", "killme",
        "--prompts-per-step", "1", "--num-generations", "2", "--max-completion-length", "4",
        "--init", "random", "--eval-samples", "0",  # run records, not learning: no SFT, no evaluation
    ]  # fmt: skip
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_EXPERIMENT_NAME": "trl-kill",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("MLFLOW_RUN_ID", None)
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


def _training(uri: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> str:
    """The run id once TRL logged a training step into it (the process is mid-training)."""
    from mlflow.tracking import MlflowClient

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        lines = [x for x in log.read_text().splitlines() if x.startswith("MLflow run ")]
        if lines:
            run_id = lines[0].split()[2]
            if MlflowClient(uri).get_metric_history(run_id, "loss"):
                return run_id
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"no training step logged in {timeout_s} s:\n{log.read_text()[-3000:]}")


def test_a_killed_trl_run_is_failed_by_the_next_launch_and_a_terminated_one_is_killed(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first, log1 = _start(tmp_path, "first", uri)
    dead = _training(uri, first, log1)
    os.killpg(first.pid, signal.SIGKILL)  # preempted without warning: nobody can close the run
    first.wait(60)
    client = MlflowClient(uri)
    assert client.get_run(dead).info.status == "RUNNING", log1.read_text()[-3000:]

    second, log2 = _start(tmp_path, "second", uri)
    live = _training(uri, second, log2)
    closed = client.get_run(dead)  # closed by the relaunch of the same job
    context = f"{closed.info.status} {closed.data.tags}\n{log2.read_text()[-3000:]}"
    assert closed.info.status == "FAILED", context
    assert "died without closing the run" in closed.data.tags.get("failed_reason", ""), context
    os.kill(second.pid, signal.SIGTERM)  # a scheduler's polite stop
    rc = second.wait(120)
    assert rc == 128 + signal.SIGTERM, log2.read_text()[-3000:]
    run = client.get_run(live)
    assert run.info.status == "KILLED" and run.info.end_time is not None, (
        f"{run.info.status}\n{log2.read_text()[-3000:]}"
    )
    assert (run.data.tags["trainer"], run.data.tags["job_key"]) == (
        "trl",
        client.get_run(dead).data.tags["job_key"],
    )
    assert len(client.get_metric_history(live, "loss")) >= 1  # what it logged before the signal is kept
