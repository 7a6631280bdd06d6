"""A verl launch whose ``ray.init`` fails exits at once with one clear error, its MLflow run
FAILED, and no Ray process left (issue 29).

The failure is the one seen on this loaded host (``/tmp/ray/session_*/logs/raylet.err``: the
raylet dies while starting because its dashboard agent failed or was late, and ``ray.init``
gives up 30 s later with "The current node timed out during startup"), made deterministic: the
metrics-export port Ray's agent must bind is held by this test. By then ``ray.init`` has started
the GCS, the dashboard and a reaper but not recorded the node, so ``ray.shutdown()`` stops
nothing: before the fix the launcher waited 60 s with ``gcs_server`` running and printed Ray's
traceback, and only Ray's reaper cleaned up, as the launcher's exit closed its pipe (on this loaded
host: minutes after the error).
"""

from __future__ import annotations

import socket
import time

import pytest
from launches import finish, leftovers, start

pytestmark = pytest.mark.slow

RAY_PROCS = ("gcs_server", "raylet")
REPORTED = "arenabench-verl: FAILED after"  # printed once the launcher closed the run


@pytest.fixture(scope="module")
def failed(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ray_start")
    with socket.socket() as held:  # the port Ray's metrics agent must bind: taken
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        run = start(
            out,
            "ray_start",
            ["loss=grpo", "trainer.save_freq=-1", f"+ray_kwargs.ray_init._metrics_export_port={port}"],
            tiny_dir,
        )
        proc, seen, at_report, last, timeline = run["proc"], set(), None, set(), []
        while proc.poll() is None:  # which Ray processes were alive when the launcher reported
            reported = REPORTED in run["log_path"].read_text()  # read first: the snapshot is later
            now = set()
            for p in leftovers(proc.pid):
                try:
                    if p.pid != proc.pid and p.status() != "zombie" and p.name() in RAY_PROCS:
                        now.add(p.name())
                except Exception:
                    continue
            if not timeline or timeline[-1][1] != sorted(now):
                timeline.append((round(time.monotonic() - run["t0"], 1), sorted(now)))
            seen |= now
            last = now
            if reported and at_report is None:
                at_report = now
                timeline.append((round(time.monotonic() - run["t0"], 1), "launcher reported"))
            time.sleep(0.1)
        timeline.append((round(time.monotonic() - run["t0"], 1), "launcher exited"))
        if at_report is None and REPORTED in run["log_path"].read_text():
            at_report = last  # it exited within a poll of reporting: the last look while it ran
        got = finish(run, rc_ok=(1,))
    got.update(uri=f"sqlite:///{out}/mlflow.db", seen=seen, at_report=at_report, timeline=timeline)
    print(f"ray_start: {got['wall_s']:.0f} s; Ray processes seen (s since start): {timeline}")
    return got


def test_the_launcher_stops_what_ray_init_started_before_it_reports(failed):
    assert set(RAY_PROCS) & failed["seen"], failed["timeline"]  # ray.init did start a node
    # when the launcher had closed the run, its Ray node was gone (not left to Ray's reaper, which
    # stops it only once the launcher's exit closes the reaper's pipe)
    assert failed["at_report"] == set(), failed["timeline"]
    # (and finish() checked that nothing at all is left in the launch's session)


def test_one_clear_error_and_the_run_closed_failed(failed):
    from mlflow.tracking import MlflowClient

    log = failed["log"]
    assert failed["rc"] == 1
    errors = [x for x in log.splitlines() if x.startswith("arenabench-verl: Ray did not start (")]
    assert len(errors) == 1, log[-4000:]
    assert "timed out during startup" in errors[0] and "processes it had started" in errors[0]
    assert "Traceback" not in log
    run = MlflowClient(failed["uri"]).get_run(failed["run_id"])
    assert run.info.status == "FAILED"
    assert run.data.tags["failed_reason"].startswith("Ray did not start (")
