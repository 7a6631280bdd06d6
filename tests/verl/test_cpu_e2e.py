"""verl's whole training loop on CPU: ``arenabench-verl --config-name smoke trainer.device=cpu``.

Three real launches (``main_ppo``, Ray, the v1 trainer, the agent loop calling our reward manager
through the uid barrier, the ``arenabench`` advantage estimator, FSDP2 actor and ref, the ``hf``
rollout with verl's naive weight sync, verl's MLflow logger) share ONE module fixture: 2 GRPO
steps writing a judgment cache, 2 CISPO steps, and the GRPO run again on that cache. Each takes
~1.5-2 min on 2 cores; every test below only reads what they left behind.

Topology: K = 2 prompts x N = 4 samples, ``seeded_single_elim`` (2N - 2 = 6 comparisons per
group, both orders), the calibrated simulated judge.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import arenabench
from arenabench import judges, rewards
from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE, mask_unreliable
from arenabench.engine import Engine
from arenabench.trainers.verl.scoring import overlap_quality
from arenabench.types import Group, Trajectory

pytestmark = pytest.mark.slow

REPO = Path(arenabench.__file__).resolve().parents[1]
K, N, STEPS, LR = 2, 4, 2, 1e-6  # conf/verl/smoke.yaml
CALLS_PER_STEP = K * (2 * N - 2) * 2  # groups x comparisons x both orders
RUN_TIMEOUT_S = 900


def _leftovers(sid: int) -> list[psutil.Process]:
    """Processes still alive in the session a launch ran in (its Ray cluster, if leaked)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _launch(out: Path, name: str, overrides: list[str], tiny_dir: Path) -> dict:
    """One ``arenabench-verl`` process in its own session; its files and MLflow run id."""
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
        f"trainer.default_local_dir={d}/ckpt",
        f"trainer.save_freq={STEPS}",
        "actor_rollout_ref.actor.checkpoint.save_contents=[hf_model]",
        *overrides,
    ]
    env = {
        **os.environ,
        "ARENABENCH_SMOKE_DIR": str(tiny_dir),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    env.pop("MLFLOW_RUN_ID", None)
    log = d / "launch.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "arenabench.trainers.verl.launch", *args],
            cwd=REPO,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = "timeout"
    # Ray's workers exit on their own once the launcher's ray.shutdown() took the raylet down;
    # give them a moment, then whatever is left in the session is a leak
    _, leaked = psutil.wait_procs(_leftovers(proc.pid), timeout=60)
    for p in leaked:  # ours (same session): end them so one failure does not starve the rest
        p.kill()
    text = log.read_text()
    assert rc == 0, (
        f"{name}: arenabench-verl exited {rc} after {time.monotonic() - t0:.0f} s:\n{text[-6000:]}"
    )
    assert not leaked, f"{name}: the launch left processes behind: {[p.pid for p in leaked]}"
    run_id = next(
        line.split()[3] for line in text.splitlines() if line.startswith("arenabench-verl: MLflow run ")
    )
    return {"dir": d, "run_id": run_id, "wall_s": time.monotonic() - t0, "log": text}


@pytest.fixture(scope="module")
def runs(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu_e2e")
    cache = f"+arenabench.judge.cache={out}/judgments.sqlite"
    got = {
        "grpo": _launch(out, "grpo", ["loss=grpo", cache], tiny_dir),
        "cispo": _launch(out, "cispo", ["loss=cispo"], tiny_dir),
        "grpo_cached": _launch(out, "grpo_cached", ["loss=grpo", cache], tiny_dir),
    }
    got["uri"] = f"sqlite:///{out}/mlflow.db"
    for name in ("grpo", "cispo", "grpo_cached"):
        print(f"{name}: {got[name]['wall_s']:.0f} s")
    return got


def _history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return sorted((m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key))


def _groups(run: dict) -> list[dict]:
    return [json.loads(line) for line in (run["dir"] / "groups.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name,loss", [("grpo", "vanilla"), ("cispo", "cispo")])
def test_the_run_finishes_with_one_point_per_step_and_the_exact_judge_calls(runs, name, loss):
    from mlflow.tracking import MlflowClient

    run = MlflowClient(runs["uri"]).get_run(runs[name]["run_id"])
    assert run.info.status == "FINISHED"
    # verl's trainer process created the reward worker sized to the step (reward_workers.py)
    assert f"arenabench: reward worker max_concurrency={K * N + 1000}" in runs[name]["log"]
    assert (run.data.tags["trainer"], run.data.tags["loss"]) == ("verl", loss)
    steps = list(range(1, STEPS + 1))
    # verl's own logger: one point per step
    assert [s for s, _ in _history(runs["uri"], run.info.run_id, "actor/pg_loss")] == steps
    # the reward worker's: one point per step however many barrier flushes scored it
    calls = _history(runs["uri"], run.info.run_id, "judge_calls")
    assert calls == [(s, float(CALLS_PER_STEP * s)) for s in steps]  # cumulative
    assert _history(runs["uri"], run.info.run_id, "arena/step_groups") == [(s, float(K)) for s in steps]
    for key in (
        "arena/flushes",
        "arena/flush_groups",
        "arena/zero_adv_share",
        "arena/groups",
        "judge_failures",
    ):
        assert [s for s, _ in _history(runs["uri"], run.info.run_id, key)] == steps, key
    flushes = [v for _, v in _history(runs["uri"], run.info.run_id, "arena/flushes")]
    assert all(1 <= f <= K for f in flushes)
    assert _history(runs["uri"], run.info.run_id, "judge_failures") == [(s, 0.0) for s in steps]


@pytest.mark.parametrize("name", ["grpo", "cispo"])
def test_every_logged_group_has_the_engines_advantages_and_verl_trained_on_them(runs, name):
    groups = _groups(runs[name])
    assert len(groups) == K * STEPS
    assert sorted(g["global_steps"] for g in groups) == [s for s in range(1, STEPS + 1) for _ in range(K)]
    # rebuild each engine run (a barrier flush) from the logged texts and replay it
    by_run: dict[int, list[dict]] = {}
    for g in groups:
        by_run.setdefault(g["run"], []).append(g)
    for run, flush in sorted(by_run.items()):
        flush.sort(key=lambda g: g["position"])
        assert [g["position"] for g in flush] == list(range(flush[0]["flush_groups"]))
        built = []
        for g in flush:
            assert g["sessions"] == list(range(N))  # every sibling, in verl's session order
            trajs = tuple(
                Trajectory(f"{g['uid']}:{k}", t, n, {"quality": overlap_quality(t, g["ground_truth"])})
                for k, (t, n) in enumerate(zip(g["texts"], g["n_tokens"], strict=True))
            )
            meta = {"uid": g["uid"], "data_source": g["data_source"], "answer": g["ground_truth"]}
            built.append(Group(g["prompt"], trajs, anchor=0, meta=meta))
        out = Engine(judges.get("calibrated"), seed=0).run(rewards.get("seeded_single_elim"), built, step=run)
        advs, masked = mask_unreliable(out.results, DEFAULT_MAX_FAILED_SHARE)
        assert masked == 0
        for g, res, adv in zip(flush, out.results, advs, strict=True):
            assert g["advantages"] == [float(a) for a in adv]  # exactly the engine's
            assert g["judge_calls"] == res.judge_calls == (2 * N - 2) * 2
            assert sorted(g["advantages"]) != [0.0] * N
    # what verl trained on (its rollout dump: rm_scores summed, which the pass-through estimator
    # makes the advantage) is each session's logged advantage and text
    dumped = {}
    for step in range(1, STEPS + 1):
        for line in (runs[name]["dir"] / "rollouts" / f"{step}.jsonl").read_text().splitlines():
            row = json.loads(line)
            uid, session, _ = row["uid"].rsplit("_", 2)
            dumped[(uid, int(session))] = row
    assert len(dumped) == K * N * STEPS
    for g in groups:
        for k in range(N):
            row = dumped[(g["uid"], k)]
            assert row["output"] == g["texts"][k] and row["step"] == g["global_steps"]
            assert row["score"] == pytest.approx(g["advantages"][k], abs=1e-6)  # float32 in verl


@pytest.mark.parametrize("name", ["grpo", "cispo"])
def test_the_policy_weights_changed(runs, name, tiny_dir):
    from safetensors.torch import load_file

    before = load_file(tiny_dir / "model" / "model.safetensors")
    after = load_file(
        runs[name]["dir"] / "ckpt" / f"global_step_{STEPS}" / "actor" / "huggingface" / "model.safetensors"
    )
    assert set(after) <= set(before) and after
    diffs = {k: float((after[k].float() - before[k].float()).abs().max()) for k in after}
    # AdamW at lr 1e-6: the first step moves every weight by ~lr, the second by about as much
    assert all(d > 0 for d in diffs.values()), diffs
    assert LR <= max(diffs.values()) < 4 * STEPS * LR, diffs


@pytest.mark.parametrize("name", ["grpo", "cispo"])
def test_rollout_and_actor_log_probs_agree(runs, name):
    """The hf rollout's log-probs vs the FSDP actor's on the same tokens (verl's own metric, in
    probability space), after every weight sync: both float32 with eager attention."""
    steps = list(range(1, STEPS + 1))
    valid = _history(runs["uri"], runs[name]["run_id"], "training/rollout_probs_diff_valid")
    assert valid == [(s, 1.0) for s in steps]
    diff = _history(runs["uri"], runs[name]["run_id"], "training/rollout_probs_diff_max")
    # ~3e-9 seen. The tiny model's token probabilities are ~1e-3, so the bound must be tight to
    # catch a missed sync: the initial vs the step-2 weights differ by ~1e-6 on the same measure
    assert [s for s, _ in diff] == steps and all(0 <= v < 1e-7 for _, v in diff), diff


def test_a_cached_rerun_pays_no_judge_call(runs):
    first, again = runs["grpo"]["run_id"], runs["grpo_cached"]["run_id"]
    steps = list(range(1, STEPS + 1))
    # the first run filled the cache: only rematches inside a group were hits
    misses = _history(runs["uri"], first, "arena/cache_misses")
    assert [s for s, _ in misses] == steps and misses[-1][1] > 0
    # the rerun sampled the same rollouts (per-session random streams) and asked the same questions
    assert _history(runs["uri"], again, "arena/cache_misses") == [(s, 0.0) for s in steps]
    assert _history(runs["uri"], again, "arena/cache_hits") == [(s, float(CALLS_PER_STEP * s)) for s in steps]
    assert _history(runs["uri"], again, "judge_calls") == _history(runs["uri"], first, "judge_calls")

    def by_uid_free(groups):
        return sorted((g["global_steps"], g["prompt"], g["texts"], g["advantages"]) for g in groups)

    assert by_uid_free(_groups(runs["grpo_cached"])) == by_uid_free(_groups(runs["grpo"]))
