"""arenabench-verl: every example composes with verl's config; MLflow runs land where compare reads."""

import math

import pytest
from omegaconf import OmegaConf

from arenabench.trainers.verl import launch, reward_workers

EXAMPLES = ["arenarl_long_n8", "arenarl_n16", "reasoning_arena_cispo", "smoke"]


def test_the_examples_are_the_files_in_conf_verl():
    assert launch.examples() == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_dry_run_prints_a_full_config(name, smoke_env, capsys):
    assert launch.main(["--config-name", name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    cfg = OmegaConf.create(out)
    # verl's own sections are all there ...
    for key in ("actor_rollout_ref", "critic", "data", "algorithm", "trainer", "reward", "ray_kwargs"):
        assert key in cfg
    # ... wired to our manager, estimator and logger
    assert cfg.reward.reward_manager.name == "ArenaRewardManager"
    assert cfg.reward.reward_manager.module.path == launch.MANAGER_MODULE
    assert cfg.reward.num_workers == 1
    assert cfg.algorithm.adv_estimator == "arenabench"
    assert "mlflow" in cfg.trainer.logger
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == launch.ADV_MODULE
    assert cfg.actor_rollout_ref.rollout.val_kwargs.n == cfg.actor_rollout_ref.rollout.n
    assert "warning" not in out


@pytest.mark.parametrize("loss", ["grpo", "cispo", "gspo"])
def test_every_example_passes_verls_own_validation_with_every_loss(loss, smoke_env):
    for name in EXAMPLES:
        assert launch.verl_validate(launch.compose(name, [f"loss={loss}"])) is None, name
    bad = launch.compose("arenarl_n16", ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null"])
    assert "log_prob_micro_batch_size" in launch.verl_validate(bad)


def test_example_settings(smoke_env):
    n16 = launch.compose("arenarl_n16")
    long8 = launch.compose("arenarl_long_n8")
    ra = launch.compose("reasoning_arena_cispo")
    got = {
        name: (c.actor_rollout_ref.rollout.n, c.data.train_batch_size, c.actor_rollout_ref.actor.optim.lr)
        for name, c in (("n16", n16), ("long8", long8), ("ra", ra))
    }
    assert got == {"n16": (16, 8, 1e-6), "long8": (8, 4, 1e-6), "ra": (8, 16, 1e-6)}
    assert n16.arenabench.reward.name == "seeded_single_elim"
    assert ra.arenabench.reward.name == "adaptive"
    assert ra.actor_rollout_ref.actor.policy_loss.loss_mode == "cispo"
    assert (ra.actor_rollout_ref.actor.clip_ratio_low, ra.actor_rollout_ref.actor.clip_ratio_high) == (
        10.0,
        0.2,
    )
    assert n16.actor_rollout_ref.actor.policy_loss.loss_mode == "vanilla"
    assert n16.arenabench.judge.kind == "openai" and long8.arenabench.judge.rubric == "deep_research"


def test_reward_and_judge_shorthands_pick_our_groups_not_verls(smoke_env):
    cfg = launch.compose("smoke", ["reward=round_robin", "judge=noiseless", "loss=gspo"])
    assert cfg.arenabench.reward.name == "round_robin"
    assert cfg.arenabench.judge.preset == "noiseless"
    assert cfg.reward.reward_manager.name == "ArenaRewardManager"  # verl's reward section is intact
    assert cfg.actor_rollout_ref.actor.policy_loss.loss_mode == "gspo"
    assert launch.translate(["reward=x", "+judge=y", "reward.num_workers=1"]) == [
        "reward@arenabench.reward=x",
        "+judge@arenabench.judge=y",
        "reward.num_workers=1",
    ]


def test_bad_names_and_wiring_are_reported(smoke_env, capsys):
    assert launch.main(["--config-name", "nope", "--dry-run"]) == 2
    assert "unknown verl config 'nope'" in capsys.readouterr().err
    assert launch.main(["--config-name", "smoke", "reward=nope", "--dry-run"]) == 2
    cfg = launch.compose("smoke", ["algorithm.adv_estimator=grpo", "reward.num_workers=4"])
    problems = launch.check_wiring(cfg)
    assert len(problems) == 2 and "num_workers=4" in problems[0] and "second time" in problems[1]
    assert (
        launch.check_wiring(
            launch.compose(
                "smoke", ["algorithm.norm_adv_by_std_in_grpo=false", "algorithm.adv_estimator=grpo"]
            )
        )
        == []
    )


def test_steps_beyond_rays_default_slots_are_sized_not_refused(smoke_env):
    """verl 0.9.1: the reward worker gets a slot per sample of the largest step (reward_workers);
    any other verl keeps Ray's 1000 and the launcher refuses more, naming the limit and the fix."""
    big = launch.compose("smoke", ["data.train_batch_size=512", "actor_rollout_ref.rollout.n=16"])
    assert launch.check_wiring(big) == []
    assert reward_workers.slots(big) == 512 * 16 + reward_workers.RAY_DEFAULT_SLOTS
    (problem,) = launch.check_wiring(big, verl_version="0.10.0")
    assert problem.startswith("8192 samples per step (batch size x n) > 1000") and "verl==0.9.1" in problem
    val = launch.compose("smoke", ["data.val_batch_size=300"])  # 300 x val n 4 > 2 x 4 training
    assert reward_workers.samples_per_step(val) == 1200
    assert launch.check_wiring(val) == [] and len(launch.check_wiring(val, verl_version="0.10.0")) == 1
    assert launch.check_wiring(launch.compose("smoke"), verl_version="0.10.0") == []  # 8 samples
    (problem,) = launch.check_wiring(launch.compose("smoke", ["data.val_batch_size=null"]))
    assert problem.startswith("data.val_batch_size=null makes verl send the whole dataset at once")


def test_verl_mlflow_logger_writes_a_run_that_compare_reads(smoke_env, tmp_path, monkeypatch):
    """The launcher opens the run (tags as the local trainer's); verl's own Tracking logger,
    handed MLFLOW_RUN_ID, logs into it; arenabench compare finds it by constructor."""
    import mlflow
    from verl.utils.tracking import Tracking

    from arenabench import compare

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    overrides = ["reward=round_robin", "arenabench.seed=3", f"arenabench.tracking_uri={uri}"]
    cfg = launch.compose("smoke", overrides)
    tags = launch.job_tags(cfg, "smoke", overrides)
    assert tags["setting"] == "smoke reward@arenabench.reward=round_robin"
    assert (tags["constructor"], tags["reward"], tags["seed"], tags["loss"]) == (
        "round_robin",
        "round_robin",
        "3",
        "vanilla",
    )

    def verl_logs_into(run) -> None:  # what verl's trainer does in its TaskRunner
        monkeypatch.setenv("MLFLOW_TRACKING_URI", run.uri)
        monkeypatch.setenv("MLFLOW_RUN_ID", run.run_id)
        try:
            tracker = Tracking(
                project_name="verl_smoke",
                experiment_name="smoke",
                default_backend=["mlflow"],
                config=OmegaConf.to_container(cfg, resolve=True),
            )
            tracker.log({"critic/score/mean": 0.25, "actor/pg_loss": -0.5}, step=1)
            tracker.log({"critic/score/mean": 0.5, "actor/pg_loss": -0.25}, step=2)
            tracker.finish(exit_code=0)  # verl's logger ends the run FINISHED
        finally:
            if mlflow.active_run() is not None:
                mlflow.end_run()

    run = launch.start_mlflow_run(cfg, tags)
    got_uri, run_id = run.uri, run.run_id
    verl_logs_into(run)
    run.finish("FINISHED")
    df = compare.load_runs("verl_smoke", uri=got_uri)
    assert list(df["run_id"]) == [run_id]
    row = df.iloc[0]
    assert (row["constructor"], row["trainer"], row["sweep"]) == ("round_robin", "verl", "verl/verl_smoke")
    assert row["critic/score/mean"] == 0.5 and math.isclose(row["actor/pg_loss"], -0.25)
    summary = compare.summarize(df, metric="critic/score/mean", by="constructor")
    assert summary.loc[0, "mean"] == 0.5
    assert len(df.attrs["metrics"]) == 2 and mlflow.MlflowClient(got_uri).get_run(run_id).data.params
    # a failed launch is FAILED even though verl's logger ended the run FINISHED
    failed = launch.start_mlflow_run(cfg, tags)
    verl_logs_into(failed)
    failed.finish("FAILED")
    statuses = compare.load_runs("verl_smoke", uri=got_uri, include_failed=True).set_index("run_id")["status"]
    assert statuses.to_dict() == {run_id: "FINISHED", failed.run_id: "FAILED"}
    # artifacts live next to the database, as the local trainer's do
    exp = mlflow.MlflowClient(got_uri).get_experiment_by_name("verl_smoke")
    assert exp.artifact_location.startswith((tmp_path / "mlruns").as_uri())
