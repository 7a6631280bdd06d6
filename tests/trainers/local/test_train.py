"""The local trainer, the hydra app and its MLflow runs (real hydra, real sqlite MLflow)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from helpers import CONF, ROOT, compose_cfg

from arenabench.trainers.local.task import TASKS
from arenabench.trainers.local.trainer import STEP_METRICS, train

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def first_job(experiment):
    """The overrides of an experiment's first sweep job (first value of every swept param)."""
    text = (CONF / "experiment" / f"{experiment}.yaml").read_text()
    params = yaml.safe_load(text)["hydra"]["sweeper"]["params"]
    return [f"{k}={str(v).split(',')[0]}" for k, v in params.items()]


def train_cli(*args, uri, timeout=300):
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, "-m", "arenabench.train", *args, "progress=false"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def runs_of(uri, experiment):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    return client, client.search_runs([exp.experiment_id])


def test_task_quality_is_hidden_and_rlvr_verifiable():
    from arenabench import verifiers

    task = TASKS.get("rlvr", n_prompts=4)
    resp = np.tile(np.arange(8), (2, 1))
    resp[0, -1] = task.targets[0]  # right answer
    resp[1, -1] = (task.targets[0] + 1) % task.vocab  # wrong answer
    g = task.group(0, resp)
    assert "quality" not in g.trajectories[0].text  # the policy only sees tokens
    assert g.trajectories[0].text.endswith(f"Answer: t{task.targets[0]}")
    np.testing.assert_array_equal(verifiers.get("exact_match")(g), [1.0, 0.0])
    q = task.quality(np.zeros(2, int), resp)
    v = task.values[0]
    expected = task.answer_bonus + task.scale * (v[resp[0, -1]] - v[resp[1, -1]]) / task.response_len
    assert q[0] - q[1] == pytest.approx(expected)
    assert q[0] == pytest.approx(task.base + task.scale * v[resp[0]].mean() + task.answer_bonus)


@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_first_job_of_every_experiment_runs_3_steps_into_mlflow(experiment, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = train_cli(f"experiment={experiment}", *first_job(experiment), "steps=3", "eval_every=2", uri=uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, runs = runs_of(uri, experiment)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run = runs[0]
    for m in STEP_METRICS:
        hist = client.get_metric_history(run.info.run_id, m)
        assert [h.step for h in hist] == [0, 1, 2], m
    for m in ("eval_win_rate", "eval_quality"):
        assert [h.step for h in client.get_metric_history(run.info.run_id, m)] == [0, 2]
    assert (
        run.data.params["steps"] == "3" and run.data.params["group_size"] == "8" or experiment == "group_size"
    )
    assert run.data.tags["constructor"] == run.data.params["reward.name"]
    reward = dict(o.split("=") for o in first_job(experiment)).get("reward")
    assert run.data.tags["reward"] == (reward or run.data.params["reward.name"])
    assert run.data.tags["git_commit"]
    # the start: a shipped SFT checkpoint (docs/reproducibility.md), its content hash as a tag
    from arenabench.trainers.local.sft import manifest

    assert run.data.tags["init_source"] == "published"
    assert run.data.tags["init_sha256"] in {e["sha256"] for e in manifest().values()}
    if experiment == "reasoning_arena":  # both objectives: the verifier's pass rate beside quality
        for m in ("eval_pass_rate", "eval_greedy_pass_rate", "eval_answer_elsewhere"):
            assert [h.step for h in client.get_metric_history(run.info.run_id, m)] == [0, 2], m
    assert {"config.yaml", "curves.png", "final_metrics.json"} <= {
        a.path for a in client.list_artifacts(run.info.run_id)
    }


@pytest.mark.slow
def test_multirun_two_parallel_jobs_one_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = train_cli(
        "-m",
        "experiment=table2",
        "reward=pointwise,anchor",  # command-line sweeps replace the experiment's sweeper params
        "seed=0",
        "steps=3",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={tmp_path}/sweep",
        uri=uri,
        timeout=600,  # two worker processes start (imports) before the first job: slow under load
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, runs = runs_of(uri, "table2")
    assert sorted(r.data.tags["constructor"] for r in runs) == ["anchor", "pointwise"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert len({r.data.tags["sweep"] for r in runs}) == 1
    # the sweep launcher (arenabench/sweep.py): one line per job with k/n, elapsed, ETA and the
    # primary metric; config dumps and job logs in files, not on the console
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert [ln[:5] for ln in lines] == ["[1/2]", "[2/2]"], proc.stdout
    assert all("elapsed, ETA" in ln and "eval_sampled_quality" in ln for ln in lines), lines
    assert sorted(ln.split(" | ")[1] for ln in lines) == ["reward=anchor", "reward=pointwise"]
    assert "prompts_per_step" not in proc.stdout + proc.stderr  # no config dump
    for job in ("0", "1"):
        assert "prompts_per_step" in (tmp_path / "sweep" / job / "console.log").read_text()
        assert (tmp_path / "sweep" / job / ".hydra" / "config.yaml").exists()
    tsv = (tmp_path / "sweep" / "jobs.tsv").read_text().splitlines()
    assert len(tsv) == 3 and all(row.split("\t")[2] == "COMPLETED" for row in tsv[1:])


@pytest.mark.slow
def test_the_launcher_stacks_seeds_into_the_runs_they_are_alone(tmp_path):
    """Jobs that differ only in seed train as one stacked batch in one worker (arenabench/sweep.py),
    each still its own hydra job and MLflow run, with the numbers of the unstacked sweep
    (``batch_seeds=1``) bit for bit; jobs.tsv says which batch each job was in."""
    from mlflow.tracking import MlflowClient

    histories, dumps = {}, {}
    for batch in (10, 1):
        uri = f"sqlite:///{tmp_path}/b{batch}.db"
        sweep = tmp_path / f"sweep{batch}"
        proc = train_cli(
            "-m", "experiment=table2", "reward=pointwise,anchor", "seed=0,1,2", "steps=3",
            "hydra.launcher.n_jobs=2", f"hydra.launcher.batch_seeds={batch}", f"hydra.sweep.dir={sweep}",
            uri=uri, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        tsv = [row.split("\t") for row in (sweep / "jobs.tsv").read_text().splitlines()]
        assert tsv[0][-1] == "batch" and [r[-1] for r in tsv[1:]] == [str(3 if batch > 1 else 1)] * 6
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
        assert len(lines) == 6 and all(("stacked batch of 3" in ln) == (batch > 1) for ln in lines), lines
        for job in range(6):
            assert "prompts_per_step" in (sweep / str(job) / "console.log").read_text()
        # a batch derives its later seeds' configs from its first (sweep.seed_variant): the
        # .hydra dumps are hydra's own compositions, as in the unstacked sweep
        dumps[batch] = {
            (job, name): (sweep / str(job) / ".hydra" / name)
            .read_text()
            .replace(str(sweep), "SWEEP")
            .replace(f"b{batch}.db", "bB.db")
            .replace(f"batch_seeds={batch}", "batch_seeds=B")
            .replace(f"batch_seeds: {batch}", "batch_seeds: B")
            for job in range(6)
            for name in ("config.yaml", "hydra.yaml", "overrides.yaml")
        }
        client, runs = runs_of(uri, "table2")
        assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
        histories[batch] = {
            (r.data.tags["reward"], r.data.tags["seed"]): {
                key: [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, key)]
                for key in r.data.metrics
                if key not in ("wall_time", "judge_latency_p50", "judge_latency_p90", "steps_per_s")
            }
            for r in runs
        }
        assert isinstance(client, MlflowClient)
    assert histories[10] == histories[1]
    assert dumps[10] == dumps[1]
    assert len({str(h["quality_mean"]) for h in histories[1].values()}) == 6  # six different runs


@pytest.mark.slow
def test_a_job_that_dies_closes_its_run_as_failed(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    # a bad task parameter is a config error: one line, exit 2, before any MLflow run
    proc = train_cli("name=dies", "task.n_prompts=0", "steps=3", uri=uri)
    assert proc.returncode == 2 and "n_prompts must be >= 1" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
    # a judge cache that cannot be created fails inside the job, after its MLflow run was opened
    (tmp_path / "a_file").write_text("")
    proc = train_cli("name=dies", f"judge.cache={tmp_path}/a_file/cache.sqlite", "steps=3", uri=uri)
    assert proc.returncode != 0
    _, runs = runs_of(uri, "dies")
    assert [r.info.status for r in runs] == ["FAILED"]


@pytest.mark.parametrize(
    "override,group",
    [("reward=round_robn", "reward"), ("judge=perfect", "judge"), ("experiment=tabel2", "experiment")],
)
def test_unknown_config_name_lists_the_choices(override, group, tmp_path):
    proc = train_cli(override, "steps=1", uri=f"sqlite:///{tmp_path}/m.db", timeout=120)
    assert proc.returncode != 0
    assert f"Available options in '{group}'" in proc.stderr
    listed = {"reward": "round_robin", "judge": "calibrated", "experiment": "table2"}[group]
    assert listed in proc.stderr


def test_bad_trainer_algo_names_the_choices():
    cfg = compose_cfg("trainer.algo=ppo", "steps=1", "tracking=none")
    with pytest.raises(ValueError, match="cispo.*grpo|grpo.*cispo"):
        train(cfg, progress=False)


@pytest.mark.slow
def test_snr_of_the_pointwise_arm_falls_as_quality_rises(tmp_path):
    """snr_dynamics' judge and N, K from a random init (the sweep itself now starts warm), fixed
    seed: as true quality climbs into the saturated top of the pointwise scale, σ_group/σ_noise
    falls (the run logs it to MLflow)."""
    from arenabench.tracking import Tracker

    cfg = compose_cfg("experiment=snr_dynamics", "init=random", "reward=pointwise", "seed=0", "steps=120")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with Tracker("snr_dynamics", run_name="pointwise", uri=uri) as tr:
        train(cfg, tracker=tr, progress=False)
        run_id = tr.run_id
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    snr = np.array([m.value for m in sorted(client.get_metric_history(run_id, "snr"), key=lambda m: m.step)])
    q = np.array(
        [m.value for m in sorted(client.get_metric_history(run_id, "quality_mean"), key=lambda m: m.step)]
    )
    assert len(snr) == 120
    quarter = len(snr) // 4
    assert q[-quarter:].mean() > q[:quarter].mean() + 0.5
    assert snr[-quarter:].mean() < 0.7 * snr[:quarter].mean()


def test_training_improves_true_quality_with_a_tournament():
    cfg = compose_cfg("reward=seeded_single_elim", "steps=60", "tracking=none", "eval_every=0")
    final = train(cfg, progress=False)
    assert final["eval_win_rate"] > 0.7  # greedy answers beat the initial policy's
    assert 0 < final["judge_calls"] <= 60 * 8 * 28 * 2  # ≤ 2N−2 comparisons × 2 orders (dedup)
    assert final["judge_failures"] == 0


@pytest.mark.parametrize("reward", ["seeded_single_elim", "reasoning_arena_live"])
def test_pipelined_schedule_trains_exactly_as_lockstep(reward):
    """``engine.schedule=pipelined`` changes when a group's matches go out, not what they return:
    the same rewards every step and the same final metrics (judge batches aside)."""

    def run(schedule):
        seen = []
        cfg = compose_cfg(f"reward={reward}", "steps=3", "tracking=none", "eval_every=0",
                          f"engine.schedule={schedule}", "engine.max_inflight=5")  # fmt: skip
        final = train(cfg, progress=False, on_step=lambda s, g, o: seen.append([r.reward for r in o.results]))
        return seen, final

    lock, lock_final = run("lockstep")
    pipe, pipe_final = run("pipelined")
    for a, b in zip(lock, pipe, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    # clocks, and the backend's calls: a batch judge answers one call per batch, so they count batches
    clocks = ("wall_time", "steps_per_s", "judge_backend_calls")
    keep = [k for k in lock_final if "latency" not in k and k not in clocks]
    assert {k: lock_final[k] for k in keep} == {k: pipe_final[k] for k in keep}


def test_the_final_eval_is_the_last_steps_which_a_second_eval_would_repeat_exactly():
    """The last step (eval_every > 0) evaluates the policy the run ends with; ``final`` reuses
    those numbers instead of evaluating again — exact, because an eval of a policy is a
    deterministic function of it (greedy decoding, and sampling from a fixed-seed generator)."""
    import torch

    from arenabench.trainers.local.policy import TinyLM
    from arenabench.trainers.local.step_metrics import sampled_eval
    from arenabench.trainers.local.trainer import greedy_eval

    class Log:
        def __init__(self):
            self.steps = []

        def log_metrics(self, m, step):
            self.steps.append((step, dict(m)))

    log = Log()
    cfg = compose_cfg("reward=pointwise", "steps=3", "tracking=none", "eval_every=2")
    final = train(cfg, tracker=log, progress=False)
    last_step, last = log.steps[-1]
    evals = ("eval_win_rate", "eval_quality", "eval_sampled_quality")
    assert last_step == 2 and {k: final[k] for k in evals} == {k: last[k] for k in evals}

    task = TASKS.get("preference")
    torch.manual_seed(0)
    policy = TinyLM(task.vocab, task.prompt_len + task.response_len)
    ref = np.zeros((task.n_prompts, task.response_len), dtype=np.int64)
    once = greedy_eval(policy, ref, task) | sampled_eval(policy, task)
    assert once == greedy_eval(policy, ref, task) | sampled_eval(policy, task)
