"""Issue 43 #5: a tracking server's outage costs at most one flush window, retried, and the run
is closed truthfully (FAILED with the reason) instead of hanging. Against a real ``mlflow
server`` process (sqlite backend, a free port), SIGKILLed mid-run and at the final flush."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from helpers import ROOT
from helpers.mlflow_server import MlflowServer, free_port

from arenabench.tracking import HTTP_RETRY_DEFAULTS, Tracker, TrackingUnavailable, open_client

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")


@pytest.fixture
def http_env():
    """MLflow's HTTP retry variables as the tracker sets them, restored after the test."""
    saved = {k: os.environ.pop(k, None) for k in HTTP_RETRY_DEFAULTS}
    yield
    for k, v in saved.items():
        os.environ.pop(k, None)
        if v is not None:
            os.environ[k] = v


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MlflowServer(tmp_path_factory.mktemp("mlflow_server")).start()
    yield srv
    srv.kill()


KEYS = ("loss", "snr")


def metrics(step: int) -> dict[str, float]:
    return {"loss": 1.0 / (step + 1), "snr": float(step) + 0.5}


def stored(uri: str, run_id: str) -> tuple[str, dict[str, list[tuple[int, float]]], dict]:
    client = open_client(uri)
    run = client.get_run(run_id)
    hist = {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in KEYS}
    return run.info.status, hist, run.data.tags


def expected(steps) -> dict[str, list[tuple[int, float]]]:
    return {k: [(s, metrics(s)[k]) for s in steps] for k in ("loss", "snr")}


def test_an_unreachable_server_is_one_error_before_a_run(http_env):
    uri = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"^MLflow tracking server http://127\.0\.0\.1:\d+ unreachable: "):
        open_client(uri)
    assert time.monotonic() - t0 < 10  # one request, no retries (today: ~4 min)


@pytest.mark.slow
def test_the_app_says_one_line_and_exits_2(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "arenabench.train", "steps=1", f"tracking.uri={uri}",
           f"hydra.run.dir={tmp_path}/out"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unreachable" in lines[0] and uri in lines[0], proc.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.log"))


@pytest.mark.slow
def test_outages_mid_run_and_at_the_final_flush(server, http_env):
    uri = server.uri
    # 1. killed mid-run, back within retry_s: every point stored, the run FINISHED
    with Tracker("outage", uri=uri, flush_every=2, retry_s=120) as t:
        for s in range(4):
            t.log_metrics(metrics(s), step=s)
        server.kill()
        for s in range(4, 8):
            t.log_metrics(metrics(s), step=s)  # flushes fail: points kept
        assert t.flush_failures >= 1 and t._pending
        server.start()
        for s in range(8, 10):
            t.log_metrics(metrics(s), step=s)
        assert t._pending == []  # the window after the outage wrote everything
    assert stored(uri, t.run_id)[:2] == ("FINISHED", expected(range(10)))

    # 2. killed at the final flush, back while it retries: every point stored, FINISHED
    t = Tracker("outage", uri=uri, flush_every=100, retry_s=120)
    for s in range(5):
        t.log_metrics(metrics(s), step=s)
    server.kill()
    back = threading.Thread(target=server.start)
    back.start()
    t.finish()
    back.join()
    assert stored(uri, t.run_id)[:2] == ("FINISHED", expected(range(5)))

    # 3. an outage longer than retry_s stops the job; the server back, the run closes FAILED with
    # the reason and every point logged
    with (
        pytest.raises(TrackingUnavailable) as info,
        Tracker("outage", uri=uri, flush_every=1, retry_s=2) as t,
    ):
        t.log_metrics(metrics(0), step=0)
        server.kill()
        try:
            for s in range(1, 100):
                t.log_metrics(metrics(s), step=s)
        except TrackingUnavailable:
            server.start()
            raise
    assert "unreachable for" in str(info.value) and "\n" not in str(info.value)
    status, hist, tags = stored(uri, t.run_id)
    assert status == "FAILED"
    assert tags["failed_reason"].startswith("TrackingUnavailable: MLflow tracking server")
    assert hist == expected(range(s + 1))

    # 4. killed at the final flush for good: bounded (today: 8 min of hanging), one line naming
    # the run, which stays RUNNING (nobody can write it) with every earlier window stored
    t = Tracker("outage", uri=uri, flush_every=3, retry_s=2)
    for s in range(7):
        t.log_metrics(metrics(s), step=s)
    server.kill()
    t0 = time.monotonic()
    with pytest.raises(TrackingUnavailable, match="stays RUNNING") as info:
        t.finish()
    assert time.monotonic() - t0 < 30 and "\n" not in str(info.value)
    status, hist, _ = stored(f"sqlite:///{server.db}", t.run_id)  # the server's own store
    assert status == "RUNNING" and hist == expected(range(6))  # the last window (step 6) lost
