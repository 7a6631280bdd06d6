"""The typed run config: conf/ lists exactly RunConfig's keys and defaults; bad keys fail early."""

import dataclasses

import pytest
import yaml
from helpers import CONF
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from arenabench.trainers.local.config import EngineConfig, RunConfig, TrackingConfig, TrainerConfig

GROUPS = ("reward", "judge", "task", "trainer", "tracking", "experiment")


def compose_cfg(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return OmegaConf.to_container(compose("train", overrides=list(overrides)), resolve=True)


def defaults(cls) -> dict:
    return dataclasses.asdict(cls())


def test_train_yaml_scalars_and_engine_are_the_run_config_defaults():
    cfg = yaml.safe_load((CONF / "train.yaml").read_text())
    scalars = {k: v for k, v in cfg.items() if k not in ("defaults", "hydra", "judge", "tracking")}
    expected = {k: v for k, v in defaults(RunConfig).items() if not isinstance(v, dict) or k == "engine"}
    assert scalars == expected


def test_trainer_files_name_every_key_and_grpo_is_the_default():
    files = sorted((CONF / "trainer").glob("*.yaml"))
    assert files
    for f in files:
        assert set(yaml.safe_load(f.read_text())) == set(defaults(TrainerConfig)), f.name
    assert yaml.safe_load((CONF / "trainer" / "grpo.yaml").read_text()) == defaults(TrainerConfig)


def test_tracking_files_name_every_key():
    train_tracking = yaml.safe_load((CONF / "train.yaml").read_text())["tracking"]
    for f in sorted((CONF / "tracking").glob("*.yaml")):
        keys = set(yaml.safe_load(f.read_text())) | set(train_tracking)
        assert keys == set(defaults(TrackingConfig)), f.name


def test_the_composed_default_is_the_run_config_default():
    rc = RunConfig.from_mapping(compose_cfg())
    assert dataclasses.replace(rc, reward=RunConfig().reward, task=RunConfig().task) == RunConfig()
    assert rc.reward["name"] == RunConfig().reward["name"] and rc.task["name"] == RunConfig().task["name"]


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_and_trainer_converts(experiment):
    for trainer in sorted(p.stem for p in (CONF / "trainer").glob("*.yaml")):
        rc = RunConfig.from_mapping(compose_cfg(f"experiment={experiment}", f"trainer={trainer}"))
        assert rc.name == experiment and rc.trainer.algo == trainer


def test_values_are_typed_and_missing_keys_take_the_defaults():
    rc = RunConfig.from_mapping({"seed": 3, "trainer": {"lr": 1, "epochs": 2}, "engine": {}})
    assert rc.seed == 3 and rc.trainer.lr == 1.0 and isinstance(rc.trainer.lr, float)
    assert rc.trainer.epochs == 2
    assert rc.trainer.algo == "grpo" and rc.engine == EngineConfig() and rc.steps == 100
    assert RunConfig.from_mapping(rc) is rc


@pytest.mark.parametrize(
    "values, message",
    [
        ({"progress": "flase"}, "progress must be true or false; got 'flase'"),
        ({"tracking": {"enabled": "yes"}}, "tracking.enabled must be true or false; got 'yes'"),
        ({"seed": "3"}, "seed must be an integer; got '3'"),
        ({"trainer": {"epochs": 2.5}}, "trainer.epochs must be an integer; got 2.5"),
        ({"trainer": {"lr": "0.01"}}, "trainer.lr must be a number; got '0.01'"),
        ({"steps": True}, "steps must be an integer; got True"),
        ({"steps": 0}, "steps must be >= 1; got 0"),
        ({"steps": -5}, "steps must be >= 1; got -5"),
        ({"group_size": 1}, "group_size must be >= 2; got 1"),
        ({"probe_repeats": 1}, "probe_repeats must be >= 2; got 1"),
        ({"trainer": {"lr": 0.0}}, "trainer.lr must be > 0.0; got 0.0"),
        ({"trainer": {"lr": float("nan")}}, "trainer.lr must be > 0.0; got nan"),
        ({"engine": {"max_failed_share": 1.5}}, "engine.max_failed_share must be <= 1.0; got 1.5"),
        ({"engine": {"schedule": "eager"}}, "must be one of auto, lockstep, pipelined; got 'eager'"),
        ({"engine": {"max_inflight": 0}}, "engine.max_inflight must be >= 1; got 0"),
    ],
)
def test_bad_values_are_one_error_naming_what_is_valid(values, message):
    with pytest.raises(ValueError) as e:
        RunConfig.from_mapping(values)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_every_problem_is_named_at_once():
    with pytest.raises(ValueError) as e:
        RunConfig.from_mapping({"steps": 0, "group_size": 1, "stepz": 3})
    msg = str(e.value)
    assert "steps must be >= 1" in msg and "group_size must be >= 2" in msg and "'stepz'" in msg


def test_null_stays_allowed_where_the_default_is_null():
    rc = RunConfig.from_mapping({"engine": {"max_failed_share": None, "max_inflight": None}})
    assert rc.engine.max_failed_share is None and rc.engine.max_inflight is None


def test_unknown_keys_are_one_error_naming_the_valid_keys():
    with pytest.raises(ValueError) as e:
        RunConfig.from_mapping({"stepz": 3, "trainer": {"lr": 1e-3, "judge_retries": 2}})
    msg = str(e.value)
    assert "'stepz'" in msg and "valid top-level keys: name, seed, steps" in msg
    assert "'trainer.judge_retries' (moved to engine.max_retries)" in msg
    assert "valid trainer keys: algo, lr" in msg


def test_a_moved_key_on_the_command_line_fails_before_training():
    """hydra refuses an unknown override; one forced in with `+` still fails before a step."""
    from arenabench.trainers.local.trainer import train

    with pytest.raises(ValueError, match="moved to engine.max_retries"):
        train(compose_cfg("+trainer.judge_retries=8", "steps=1", "tracking=none"), progress=False)


def test_train_takes_a_run_config_or_its_mapping_alike():
    from arenabench.trainers.local.trainer import train

    small = ("steps=2", "tracking=none", "prompts_per_step=2", "group_size=4", "eval_every=0")
    cfg = compose_cfg(*small)
    a = train(cfg, progress=False)
    b = train(RunConfig.from_mapping(cfg), progress=False)
    drop = ("wall_time", "steps_per_s", "judge_latency_p50", "judge_latency_p90")
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def test_the_run_config_is_logged_once_at_the_start(caplog):
    from arenabench.trainers.local.trainer import train

    with caplog.at_level("INFO", logger="arenabench.trainers.local.trainer"):
        train(compose_cfg("steps=1", "tracking=none", "eval_every=0"), progress=False)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("run config:")]
    assert len(logged) == 1 and "max_retries: 2" in logged[0]
