"""A served judge killed inside a full verl launch (issue 29): the launch finishes, MLflow has
each step's outage counters, and no group is scored on partial evidence.

One real CPU launch (``arenabench-verl --config-name smoke trainer.device=cpu``: 2 GRPO steps,
K = 2 prompts x N = 4, ``seeded_single_elim``) whose judge is the served test judge
(``arenabench/judges/stub_server.py``, a real server process, replies delayed so that a kill
finds requests in flight), with the client's outage deadline cut to ``DEADLINE_S``:

* step 1, a **short outage**: SIGKILLed once it answered a few of the step's requests, restarted
  ``SHORT_S`` later: everything is resent and answered, nothing lost, no group masked;
* step 2, a **long outage**: SIGKILLed the same way and restarted ``DEADLINE_S + LONG_EXTRA_S``
  later: the requests it cut off pass the deadline and are lost, the groups that asked them are
  masked (advantage 0, counted in ``outage_groups``), the requests sent after it are answered.

Read back from the sqlite MLflow store, the group log and verl's rollout dump.
"""

from __future__ import annotations

import json
import time

import pytest
from launches import STEPS, finish, start

from arenabench.judges.stub_server import ServerProcess, free_port

pytestmark = pytest.mark.slow

K, N = 2, 4  # conf/verl/smoke.yaml
# groups x comparisons x both orders: the served judge runs at temperature 0, so seeded_single_elim's
# default (anchor_seed=auto) plays record, 2N - 3 comparisons (the anchor sits the bracket out)
REQUESTS_PER_STEP = K * (2 * N - 3) * 2
DEADLINE_S = 20.0  # the client's outage_deadline_s: well above a restart on a loaded host
SHORT_S = 1.0  # step 1: back well inside the deadline (plus the restart's own start)
LONG_EXTRA_S = 4.0  # step 2: back this long after the deadline of the cut-off requests
KILL_AFTER = 4  # answered requests of the step before the kill
DELAY_S = 0.3  # per reply, 4 at a time: a step's judging takes ~2 s, so a kill finds it busy


def _answered(log) -> int:
    """Replies the server wrote (every process it ran as: one log across restarts)."""
    try:
        return sum(1 for line in log.read_text().splitlines() if line.strip() == "200")
    except FileNotFoundError:
        return 0


def _wait(what: str, run: dict, cond, timeout_s: float = 900.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert run["proc"].poll() is None, (
            f"the launch ended before {what}:\n{run['log_path'].read_text()[-6000:]}"
        )
        assert time.monotonic() < deadline, f"no {what} in {timeout_s} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def outage(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_outage")
    log = out / "answered.log"
    srv = ServerProcess(free_port(), log=log, extra=("--delay", str(DELAY_S)))
    srv.start()
    outages = []
    try:
        run = start(
            out,
            "outage",
            [
                "loss=grpo",
                "trainer.save_freq=-1",
                "judge=openai",
                f"arenabench.judge.base_urls={srv.url}",
                "arenabench.judge.model=stub",
                "arenabench.judge.max_concurrency=4",
                "arenabench.judge.timeout_s=30",
                "arenabench.judge.retries=2",
                "+arenabench.judge.backoff_s=0.1",
                "+arenabench.judge.max_backoff_s=0.5",
                f"+arenabench.judge.outage_deadline_s={DEADLINE_S}",
            ],
            tiny_dir,
        )
        for step, away_s in ((1, SHORT_S), (2, DEADLINE_S + LONG_EXTRA_S)):
            before = (step - 1) * REQUESTS_PER_STEP  # step 1 loses nothing: all answered
            _wait(f"step {step}'s judging", run, lambda b=before: _answered(log) >= b + KILL_AFTER)
            t0 = time.monotonic()
            srv.kill()
            time.sleep(away_s)
            srv.start()
            outages.append(time.monotonic() - t0)
        got = finish(run)
    finally:
        srv.kill()
    got.update(uri=f"sqlite:///{out}/mlflow.db", outages=outages, server_answered=_answered(log))
    print(f"outage: {got['wall_s']:.0f} s, outages {[round(x, 1) for x in outages]} s")
    return got


def _points(uri: str, run_id: str, key: str) -> dict[int, float]:
    from mlflow.tracking import MlflowClient

    return {m.step: m.value for m in MlflowClient(uri).get_metric_history(run_id, key)}


def _groups(run: dict) -> list[dict]:
    return [json.loads(line) for line in (run["dir"] / "groups.jsonl").read_text().splitlines()]


KEYS = (
    "judge_backend_calls",
    "judge_answered",
    "judge_resent",
    "judge_lost",
    "judge_outage_s",
    "outage_groups",
    "judge_calls",
    "judge_failures",
    "arena/masked_groups",
    "actor/pg_loss",
)


def test_the_run_finishes_with_each_steps_outage_counters(outage):
    from mlflow.tracking import MlflowClient

    uri, rid = outage["uri"], outage["run_id"]
    assert MlflowClient(uri).get_run(rid).info.status == "FINISHED"
    got = {k: _points(uri, rid, k) for k in KEYS}
    for key in KEYS:
        assert sorted(got[key]) == list(range(1, STEPS + 1)), key
    calls = got["judge_calls"]  # the engine's requests, cumulative (no re-asks: nothing failed sporadically)
    asked = {1: calls[1], 2: calls[2] - calls[1]}
    assert asked == {1: REQUESTS_PER_STEP, 2: REQUESTS_PER_STEP}
    for s in (1, 2):
        # every post answered, resent or lost; every engine request answered or lost, once
        assert (
            got["judge_backend_calls"][s]
            == got["judge_answered"][s] + got["judge_resent"][s] + got["judge_lost"][s]
        )
        assert got["judge_answered"][s] + got["judge_lost"][s] == asked[s]
        assert got["judge_resent"][s] > 0 and got["judge_outage_s"][s] > 0, s
    # step 1: the server was back within the deadline: all resent and answered, nothing masked
    assert got["judge_lost"][1] == 0 and got["outage_groups"][1] == 0
    assert got["arena/masked_groups"][1] == 0 and got["judge_failures"][1] == 0
    # the outage seconds the client saw: about the kill-to-healthy time (plus a backoff and the
    # resends' own replies), not a cumulative or a per-request sum
    assert got["judge_outage_s"][1] <= outage["outages"][0] + 5.0
    # step 2: the cut-off requests were lost after the deadline; their groups masked and counted
    assert got["judge_lost"][2] > 0 and got["judge_failures"][2] == got["judge_lost"][2]
    assert got["judge_outage_s"][2] >= DEADLINE_S
    assert 1 <= got["outage_groups"][2] <= K
    assert got["arena/masked_groups"][2] == got["outage_groups"][2]  # cumulative: step 1 masked none
    # the server answered at least what the client counted (a reply written just before a kill
    # may be lost on the way and resent)
    assert outage["server_answered"] >= got["judge_answered"][1] + got["judge_answered"][2]


def test_no_group_is_scored_on_partial_evidence(outage):
    uri, rid = outage["uri"], outage["run_id"]
    groups = _groups(outage)
    assert sorted(g["global_steps"] for g in groups) == [s for s in range(1, STEPS + 1) for _ in range(K)]
    lost = _points(uri, rid, "judge_lost")
    outage_groups = _points(uri, rid, "outage_groups")
    for step in (1, 2):
        these = [g for g in groups if g["global_steps"] == step]
        assert sum(g["lost"] for g in these) == lost[step]
        assert sum(g["lost"] > 0 for g in these) == outage_groups[step]
        for g in these:
            assert g["masked"] == float(g["lost"] > 0)  # any lost request masks the group
            if g["masked"]:
                assert g["advantages"] == [0.0] * N
            else:  # a group with all its evidence is ranked
                assert g["failures"] == 0 and sorted(g["advantages"]) != [0.0] * N
    # what verl trained on (its rollout dump: the score is the advantage): the masked groups' zeros
    masked = {g["uid"] for g in groups if g["masked"]}
    assert masked  # step 2's long outage masked at least one group
    for step in (1, 2):
        for line in (outage["dir"] / "rollouts" / f"{step}.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row["uid"].rsplit("_", 2)[0] in masked:
                assert row["score"] == 0.0
