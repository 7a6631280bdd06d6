"""Crash-resume: a sweep SIGKILLed mid-run and restarted with the same command finishes, re-pays no
judge call already answered (judgment cache + a deterministic training loop), shows the killed
run FAILED and the new one FINISHED, and does not re-run the job that had finished — exactly one
FINISHED run per job (real hydra multirun, joblib workers, sqlite MLflow, sqlite cache)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, compose_cfg
from mlflow.tracking import MlflowClient

from arenabench.tracking import IDENTITY_TAG, Tracker, finished_run, owner_alive, owner_tags
from arenabench.train import job_identity
from arenabench.trainers.local.trainer import train

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
SMALL = ["trainer.d_model=16", "eval_every=0"]


class Recorder:
    """A tracker stand-in that keeps every step's metrics."""

    def __init__(self):
        self.steps: dict[int, dict] = {}

    def log_metrics(self, metrics, step):
        self.steps[step] = dict(metrics)


# --------------------------------------------------------------------------- pieces


def test_a_rerun_is_answered_from_the_cache_and_replays_the_run_exactly(tmp_path):
    """Same config ⇒ same trajectories ⇒ every judge request a cache hit; faults sit behind the
    cache, so the replay reaches no (faulty) judge at all; failures are never cached."""
    cache = f"judge.cache={tmp_path}/j.sqlite"
    over = ["reward=round_robin", "steps=6", "tracking=none", *SMALL, cache]
    first, again = Recorder(), Recorder()
    train(compose_cfg(*over, "judge.faults={rate:0.2,seed:0}", "engine.max_retries=8"), tracker=first)
    train(compose_cfg(*over, "judge.faults={rate:0.2,seed:0}", "engine.max_retries=8"), tracker=again)

    def per_step(rec, key):  # judge_calls is cumulative (engine requests, retries included)
        vals = [rec.steps[s][key] for s in range(6)]
        return [b - a for a, b in zip([0.0, *vals], vals, strict=False)]

    calls = per_step(first, "judge_calls")
    # the first run pays every request it sends (a failed one is not cached: its retry pays again)
    assert [first.steps[s]["cache_misses"] for s in range(6)] == calls and min(calls) > 400
    assert [again.steps[s]["cache_misses"] for s in range(6)] == [0.0] * 6
    unique = [c - r for c, r in zip(calls, per_step(first, "judge_retries"), strict=True)]
    assert [again.steps[s]["cache_hits"] for s in range(6)] == unique == per_step(again, "judge_calls")
    assert first.steps[5]["judge_faults"] > 0 and again.steps[5]["judge_faults"] == 0
    for s in range(6):
        for k in ("quality_mean", "adv_std", "loss", "kl"):
            assert again.steps[s][k] == first.steps[s][k], (s, k)
    # a faulty run whose final failures were not cached: a rerun asks exactly those again
    over2 = ["reward=round_robin", "steps=1", "tracking=none", *SMALL, f"judge.cache={tmp_path}/k.sqlite"]
    lossy, redo = Recorder(), Recorder()
    train(compose_cfg(*over2, "judge.faults={rate:0.5,seed:0}", "engine.max_retries=0"), tracker=lossy)
    train(compose_cfg(*over2), tracker=redo)
    assert lossy.steps[0]["judge_failures"] > 0
    assert redo.steps[0]["cache_misses"] == lossy.steps[0]["judge_failures"]


def test_job_identity_ignores_display_tracking_and_cache_location_only():
    cfg = compose_cfg("steps=3")
    key = job_identity(cfg, "abc")
    same = compose_cfg("steps=3", "progress=false", "tracking=none", "judge.cache=/x.sqlite")
    assert job_identity(same, "abc") == key
    assert job_identity(compose_cfg("steps=4"), "abc") != key
    assert job_identity(compose_cfg("steps=3", "judge.faults={rate:0.1}"), "abc") != key
    assert job_identity(cfg, "def") != key


@pytest.mark.slow
def test_stale_running_runs_of_dead_owners_are_failed_live_and_foreign_ones_kept(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs
    me = owner_tags()
    assert owner_alive(me) is True
    assert owner_alive({**me, "owner_start": "1"}) is False  # our pid, recycled by a later process
    assert owner_alive({**me, "owner_host": "elsewhere"}) is None
    cases = {
        "dead": {**me, "owner_pid": str(dead.pid), "owner_start": ""},
        "live": me,
        "foreign": {**me, "owner_host": "elsewhere"},
        "other_job": {**me, "owner_pid": str(dead.pid)},
    }
    t0 = Tracker("stale", uri=uri)  # creates the store and experiment
    t0.finish()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("stale").experiment_id
    ids = {}
    for name, tags in cases.items():
        key = "other" if name == "other_job" else "K"
        ids[name] = client.create_run(exp, tags={**tags, IDENTITY_TAG: key}).info.run_id
    with Tracker("stale", uri=uri, identity="K") as t:
        assert t.stale_failed == [ids["dead"]]
    status = {n: client.get_run(i).info.status for n, i in ids.items()}
    assert status == {"dead": "FAILED", "live": "RUNNING", "foreign": "RUNNING", "other_job": "RUNNING"}
    assert "died without closing the run" in client.get_run(ids["dead"]).data.tags["failed_reason"]
    done = finished_run("stale", "K", uri=uri)
    assert done is not None and done.info.run_id == t.run_id
    assert finished_run("stale", "nope", uri=uri) is None
    assert finished_run("no_such_experiment", "K", uri=uri) is None
    assert finished_run("stale", "K", uri=f"sqlite:///{tmp_path}/none.db") is None
    assert not (tmp_path / "none.db").exists()


# --------------------------------------------------------------------------- the real thing


def _runs(db: Path) -> list[tuple]:
    """(run_id, status, max logged step, owner pid, steps param) per run, read-only and lock-free
    (polling must not take the store's write lock from the jobs)."""
    if not db.exists():
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute(
                "select r.run_uuid, r.status,"
                " (select max(step) from metrics m where m.run_uuid = r.run_uuid),"
                " (select value from tags t where t.run_uuid = r.run_uuid and t.key = 'owner_pid'),"
                " (select value from params p where p.run_uuid = r.run_uuid and p.key = 'steps')"
                " from runs r"
            ).fetchall()
        finally:
            con.close()
    except sqlite3.Error:  # tables not created yet, or a write in progress
        return []


def _history(client, run_id, key):
    return [m.value for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]


@pytest.mark.slow
def test_sigkilled_sweep_restarted_with_the_same_command_loses_and_duplicates_nothing(tmp_path):
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    short, long_ = 4, 100
    cmd = [
        sys.executable,
        "-m",
        "arenabench.train",
        "-m",
        "experiment=table2",
        "reward=anchor",
        "seed=0",
        f"steps={short},{long_}",  # job 0 finishes quickly; job 1 is killed mid-run
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={tmp_path}/sweep",
        f"judge.cache={tmp_path}/judgments.sqlite",
        "tracking.flush_every=1",  # every step in MLflow as it happens
        *SMALL,
        "progress=false",
    ]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MPLBACKEND": "Agg"}
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    victim = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            runs = _runs(db)
            short_done = any(r[4] == str(short) and r[1] == "FINISHED" for r in runs)
            mid = [r for r in runs if r[4] == str(long_) and r[1] == "RUNNING" and (r[2] or -1) >= 5]
            if short_done and mid:
                victim = mid[0]
                os.kill(int(victim[3]), signal.SIGKILL)  # the job's own process (a joblib worker)
                break
            time.sleep(0.2)
        assert victim is not None, (proc.poll(), _runs(db), (tmp_path / "first.log").read_text()[-3000:])
        assert proc.wait(120) != 0  # the sweep dies with its worker
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    client = MlflowClient(tracking_uri=uri)
    killed = client.get_run(victim[0])
    assert killed.info.status == "RUNNING"  # SIGKILL: nobody could close it
    done_before = max(m.step for m in client.get_metric_history(victim[0], "quality_mean"))
    assert 5 <= done_before < long_ - 1

    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    said = again.stdout + again.stderr  # hydra logs to stdout
    # the sweep launcher keeps each job's log in <job dir>/console.log (the console gets one line a job)
    said += "".join(p.read_text() for p in sorted((tmp_path / "sweep").glob("*/console.log")))
    assert "skipping" in said and "already FINISHED" in said and "runs of dead processes" in said

    exp = client.get_experiment_by_name("table2")
    runs = client.search_runs([exp.experiment_id])
    by_job: dict[str, list] = {}
    for r in runs:
        by_job.setdefault(r.data.params["steps"], []).append(r)
    assert sorted(by_job) == sorted([str(short), str(long_)])
    assert [r.info.status for r in by_job[str(short)]] == ["FINISHED"]  # not re-run
    statuses = sorted(r.info.status for r in by_job[str(long_)])
    assert statuses == ["FAILED", "FINISHED"]  # exactly one FINISHED per job
    killed = client.get_run(victim[0])
    assert killed.info.status == "FAILED" and "died without closing" in killed.data.tags["failed_reason"]
    (new,) = [r for r in by_job[str(long_)] if r.info.status == "FINISHED"]
    assert new.data.tags[IDENTITY_TAG] == killed.data.tags[IDENTITY_TAG]

    new_id, old_id = new.info.run_id, victim[0]
    misses = _history(client, new_id, "cache_misses")
    hits = _history(client, new_id, "cache_hits")
    assert len(misses) == long_
    # every step the killed run got through is replayed from the cache: no judge call re-paid
    assert misses[: done_before + 1] == [0.0] * (done_before + 1)
    assert all(h > 0 for h in hits[: done_before + 1])
    assert sum(misses[done_before + 1 :]) > 0  # the rest was new work, paid once
    # ... because the replay is exact (deterministic CPU loop): the same curves up to the kill
    for key in ("quality_mean", "loss", "kl"):
        assert _history(client, new_id, key)[: done_before + 1] == _history(client, old_id, key)
