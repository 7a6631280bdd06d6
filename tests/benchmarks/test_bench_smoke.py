"""The benchmark driver's quick mode runs and writes its tables; the wave-count bound holds
structurally (one judge batch, one latency-judge call per wave). No timing assertions."""

import csv
import subprocess
import sys

import pytest
from helpers import ROOT

from arenabench import Engine, judges, rewards
from arenabench.judges.latency import LatencyJudge, Unbatched
from arenabench.sim import simulate_groups

SMOKE = "pointwise,round_robin,seeded_single_elim,reasoning_arena_live,rrc_agr,bt_bracket"
PARTS = "waves,overhead,aggregation,fidelity"  # the trainer part is covered by test_train


@pytest.mark.slow
def test_quick_driver_writes_every_table_and_batches_equal_waves(tmp_path):
    out = tmp_path / "bench"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick", "--out", str(out)]
    cmd += ["--parts", PARTS, "--constructors", SMOKE]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in [
        "README.md",
        "summary.json",
        "waves.md",
        "waves.csv",
        "overhead.md",
        "overhead.csv",
        "aggregation.md",
        "aggregation.csv",
        "fidelity_frontier.md",
        "fidelity_frontier.csv",
        "fidelity_frontier.png",
    ]:
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "waves.csv").open()))
    assert {r["constructor"] for r in rows} == set(SMOKE.split(","))
    for r in rows:
        if r["mode"].startswith("batch"):  # fault-free judge: no retry batches
            assert int(r["batches"]) == int(r["waves"]) == int(r["latency_calls"]), r
    readme = (out / "README.md").read_text()
    for link in ("waves.md", "overhead.md", "aggregation.md", "fidelity_frontier.md"):
        assert f"({link})" in readme
    assert "machine: cpu" in readme


def test_latency_judge_models_batches_and_the_sequential_driver_pays_per_request():
    groups = simulate_groups(3, 8, seed=2)
    cons = rewards.get("seeded_single_elim")
    batched = LatencyJudge(judges.get("calibrated"), per_batch_s=0.0)
    out = Engine(batched).run(cons, groups)
    assert batched.calls == out.stats.judge_batches == out.stats.waves == 4
    assert batched.requests == out.stats.judge_calls == 3 * 2 * 14
    seq = LatencyJudge(judges.get("calibrated"))
    for g, group in enumerate(groups):
        Engine(Unbatched(seq)).run(cons, [group], step=g)
    assert seq.calls == seq.requests == out.stats.judge_calls  # one call per request
    api = LatencyJudge(judges.get("calibrated"), per_request_s=0.5, per_batch_s=0.25, concurrency=32)
    assert [api.latency(n) for n in (0, 1, 32, 33)] == [0.0, 0.75, 0.75, 1.25]
    unlimited = LatencyJudge(judges.get("calibrated"), per_request_s=0.5)
    assert unlimited.latency(1000) == 0.5
