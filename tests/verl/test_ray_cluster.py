"""verl on an existing Ray cluster (issue 44.3): the launcher joins a running cluster
(``+ray_kwargs.ray_init.address`` or ``$RAY_ADDRESS``) instead of starting one and leaves it
running; an unreachable address is one line, exit 2, before any MLflow run opens.

The full test starts a Ray head (``ray start --head --port <free>``) and a second node on this
machine, each in a session of its own, runs the verl CPU smoke (2 steps) joined to it, SIGTERMs
the launcher mid-run (its run KILLED, the cluster still up: both nodes alive), resumes with
``trainer.resume_mode=auto`` (FINISHED, step 2 logged) and stops the cluster it started (by its
own processes' session ids, never ``ray stop``: other Ray clusters on the host are not ours).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from launches import finish, launch_run_id, leftovers, start, wait_for

RESUME_SAVE = (1, "[model,optimizer,extra,hf_model]")  # a checkpoint every step, resumable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_ray_address_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    from arenabench.trainers.verl import launch

    address = f"127.0.0.1:{free_port()}"
    assert "unreachable" in launch.check_ray_address(address)
    monkeypatch.setenv("RAY_ADDRESS", address)
    db = tmp_path / "mlflow.db"
    rc = launch.main(
        ["--config-name", "smoke", "trainer.device=cpu", f"arenabench.tracking_uri=sqlite:///{db}"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"Ray cluster at {address} unreachable" in err[0], err
    assert not db.exists()  # nothing opened


def test_a_joined_cluster_gets_the_env_the_config_reads_but_no_secret(monkeypatch):
    from omegaconf import OmegaConf

    from arenabench.trainers.verl.launch import env_refs

    monkeypatch.setenv("SMOKE_DIR_X", "/data/x")
    monkeypatch.setenv("MY_API_KEY_X", "sk-secret")
    monkeypatch.delenv("UNSET_X", raising=False)
    cfg = OmegaConf.create({"a": "${oc.env:SMOKE_DIR_X}/m", "b": {"c": "${oc.env:MY_API_KEY_X}"},
                            "d": "${oc.env:UNSET_X,fallback}"})  # fmt: skip
    assert env_refs(cfg) == {"SMOKE_DIR_X": "/data/x"}


class Cluster:
    """A Ray head and a second node on localhost, each started in its own session."""

    def __init__(self, root: Path):
        self.root, self.port, self.sids = root, free_port(), []
        self.address = f"127.0.0.1:{self.port}"
        repo = Path(__file__).resolve().parents[2]
        # the cluster's workers import arenabench from this checkout (as a venv install would)
        self.env = {**os.environ, "PYTHONPATH": str(repo), "RAY_USAGE_STATS_ENABLED": "0"}
        self.env.pop("RAY_ADDRESS", None)

    def _ray(self, *args: str) -> None:
        ray = str(Path(sys.executable).parent / "ray")
        ports = [f"--dashboard-agent-listen-port={free_port()}", f"--metrics-export-port={free_port()}",
                 f"--runtime-env-agent-port={free_port()}"]  # fmt: skip
        proc = subprocess.Popen([ray, "start", *args, *ports], env=self.env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        self.sids.append(proc.pid)  # `ray start` daemonizes into the session it ran in: its pid
        said, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, said[-3000:]

    def start(self) -> Cluster:
        # the smoke's own ray_init (num_cpus 8, num_gpus 1: the CPU platform's stand-in GPU) on
        # the head, which the launcher drops when joining; a second node beside it
        try:
            self._ray("--head", f"--port={self.port}", "--num-cpus=8", "--num-gpus=1",
                      "--include-dashboard=false", f"--temp-dir={self.root}")  # fmt: skip
            self._ray(f"--address={self.address}", "--num-cpus=2")
        except BaseException:
            self.stop()  # a node that failed to start: leave no half cluster behind
            raise
        return self

    def processes(self) -> list[psutil.Process]:
        return [p for sid in self.sids for p in leftovers(sid)]

    def raylets(self) -> int:
        """Ray nodes alive: one raylet process each."""
        n = 0
        for p in self.processes():
            try:
                n += p.name() == "raylet" and p.status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                continue
        return n

    def stop(self) -> None:
        procs = self.processes()
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                continue
        _, alive = psutil.wait_procs(procs, timeout=20)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                continue
        psutil.wait_procs(alive, timeout=20)


@pytest.mark.slow
def test_verl_joins_a_running_cluster_survives_a_sigterm_and_resumes(tiny_dir, tmp_path_factory, monkeypatch):
    import tempfile

    # an earlier local ray.init() in the suite turns token auth on and leaves ~/.ray/auth_token; a
    # head started with RAY_AUTH_MODE unset then demands the token and a joining node does not send
    # it (InvalidAuthToken): this test's cluster, launcher and workers all run without token auth
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")

    from mlflow.tracking import MlflowClient

    out = tmp_path_factory.mktemp("ray_cluster")
    # Ray's session folder holds unix sockets: a short path (their limit is ~107 characters)
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))).start()
    try:
        assert cluster.raylets() == 2
        ckpt = out / "ckpt"
        overrides = [
            "loss=grpo",
            "trainer.resume_mode=auto",
            f"+ray_kwargs.ray_init.address={cluster.address}",
        ]
        client = MlflowClient(f"sqlite:///{out}/mlflow.db")

        def logged(run, key, step):
            rid = launch_run_id(run["log_path"].read_text())
            return rid is not None and any(m.step == step for m in client.get_metric_history(rid, key))

        a = start(out, "killed", overrides, tiny_dir, ckpt, RESUME_SAVE)
        tracker = ckpt / "latest_checkpointed_iteration.txt"
        wait_for(
            "step 1 checkpointed and logged",
            a,
            lambda: tracker.exists() and tracker.read_text() == "1" and logged(a, "actor/pg_loss", 1),
        )
        os.kill(a["proc"].pid, signal.SIGTERM)  # the launcher alone: the cluster is not its own
        killed = finish(a, rc_ok=(128 + signal.SIGTERM,))
        assert f"joining the Ray cluster at {cluster.address}" in killed["log"]
        assert client.get_run(killed["run_id"]).info.status == "KILLED", killed["log"][-4000:]
        time.sleep(2)
        assert cluster.raylets() == 2  # not stopped: the launcher did not start it

        resumed = finish(start(out, "resumed", overrides, tiny_dir, ckpt, RESUME_SAVE))
        run = client.get_run(resumed["run_id"])
        assert run.info.status == "FINISHED", resumed["log"][-4000:]
        assert (run.data.tags["resumed_from"], run.data.tags["resume_step"]) == (killed["run_id"], "1")
        assert 2 in [m.step for m in client.get_metric_history(run.info.run_id, "actor/pg_loss")]
        assert cluster.raylets() == 2  # left running again
    finally:
        cluster.stop()
    assert not cluster.processes()
