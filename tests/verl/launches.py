"""Real ``arenabench-verl`` launches as child processes: start one in its own session, wait
for it (or for a condition while it runs), and check that it left no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

import arenabench

REPO = Path(arenabench.__file__).resolve().parents[1]
STEPS = 2  # conf/verl/smoke.yaml
RUN_TIMEOUT_S = 900


def leftovers(sid: int) -> list[psutil.Process]:
    """Processes still alive in the session a launch ran in (its Ray cluster, if leaked)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def start(
    out: Path,
    name: str,
    overrides: list[str],
    tiny_dir: Path,
    ckpt: Path | None = None,
    save: tuple[int, str] = (STEPS, "[hf_model]"),
) -> dict:
    """One ``arenabench-verl`` process in its own session (not waited for); ``save``: verl's
    save frequency and contents."""
    d = out / name
    d.mkdir()
    args = [
        "--config-name",
        "smoke",
        "trainer.device=cpu",
        f"arenabench.tracking_uri=sqlite:///{out}/mlflow.db",
        "arenabench.sweep=cpu_e2e",
        f"arenabench.group_log={d}/groups.jsonl",
        f"trainer.rollout_data_dir={d}/rollouts",
        f"trainer.default_local_dir={ckpt or d / 'ckpt'}",
        f"trainer.save_freq={save[0]}",
        f"actor_rollout_ref.actor.checkpoint.save_contents={save[1]}",
        *overrides,
    ]
    env = {
        **os.environ,
        "ARENABENCH_SMOKE_DIR": str(tiny_dir),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    env.pop("MLFLOW_RUN_ID", None)
    log = d / "launch.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "arenabench.trainers.verl.launch", *args],
            cwd=REPO,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return {"dir": d, "proc": proc, "log_path": log, "t0": time.monotonic(), "name": name}


def launch_run_id(log_text: str) -> str | None:
    lines = [x for x in log_text.splitlines() if x.startswith("arenabench-verl: MLflow run ")]
    return lines[0].split()[3] if lines else None


def finish(run: dict, rc_ok=(0,), kill_session: bool = False) -> dict:
    """Wait for a launch; assert its exit code and that it left no process behind."""
    proc = run["proc"]
    try:
        rc = proc.wait(timeout=max(1.0, RUN_TIMEOUT_S - (time.monotonic() - run["t0"])))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = "timeout"
    # Ray's workers exit on their own once the launcher's ray.shutdown() took the raylet down;
    # give them a moment, then whatever is left in the session is a leak (or, after a SIGKILL of
    # the launcher, the rest of the preempted job: ended here as a node loss would)
    if kill_session:
        for p in leftovers(proc.pid):
            p.kill()
    _, leaked = psutil.wait_procs(leftovers(proc.pid), timeout=60)
    for p in leaked:  # ours (same session): end them so one failure does not starve the rest
        p.kill()
    text = run["log_path"].read_text()
    name = run["name"]
    assert rc in rc_ok, (
        f"{name}: arenabench-verl exited {rc} after {time.monotonic() - run['t0']:.0f} s:\n{text[-6000:]}"
    )
    assert not leaked, f"{name}: the launch left processes behind: {[p.pid for p in leaked]}"
    return {
        "dir": run["dir"],
        "run_id": launch_run_id(text),
        "wall_s": time.monotonic() - run["t0"],
        "log": text,
        "rc": rc,
    }


def wait_for(what: str, run: dict, cond, timeout_s: float = RUN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert run["proc"].poll() is None, (
            f"{run['name']} ended before {what}:\n{run['log_path'].read_text()[-6000:]}"
        )
        if cond():
            return
        time.sleep(0.5)
    os.killpg(run["proc"].pid, signal.SIGKILL)
    raise AssertionError(f"{run['name']}: no {what} in {timeout_s} s:\n{run['log_path'].read_text()[-6000:]}")
