"""Issue 27, item 2: every bad value is one error naming the valid choices, before anything runs.

One test per class of bad input: a mistyped boolean, an out-of-range number, an unknown name
(constructor, judge preset, judge kind, task, loss), a constructor parameter of the wrong type, and,
end to end through ``arenabench-train`` and ``arenabench``, exit status 2 with one line on stderr,
no traceback and no MLflow run (nor store) left behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT, compose_cfg

from arenabench import rewards
from arenabench.trainers.local.config import ConfigError, validate_run


@pytest.mark.parametrize("spec", ["rrc_scr:cara=flase", "rrc_scr:cara=yes", "rrc_scr:cara=1"])
def test_a_boolean_parameter_takes_only_true_or_false(spec):
    """YAML 1.1 reads yes/on as true and a typo as a (truthy) string: both would turn CARA on."""
    with pytest.raises(ValueError, match=r"rrc_scr': cara must be true or false; got"):
        rewards.from_spec(spec)


def test_spec_values_are_typed_strictly_and_case_insensitively():
    assert rewards.parse_spec("rrc_scr:cara=TRUE:alpha=1e-3:votes=3") == (
        "rrc_scr",
        {"cara": True, "alpha": 0.001, "votes": 3},
    )
    assert rewards.from_spec("rrc_scr:cara=false").cara is False
    assert rewards.parse_spec("swiss:rounds=null")[1] == {"rounds": None}
    with pytest.raises(ValueError, match="votes must be an integer; got 2.5"):
        rewards.from_spec("round_robin:votes=2.5")
    with pytest.raises(ValueError, match="alpha must be a number; got 'high'"):
        rewards.from_spec("rrc_scr:alpha=high")
    with pytest.raises(ValueError, match=r"rounds must be an integer \(or null\); got 'two'"):
        rewards.from_spec("swiss:rounds=two")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["reward=rrc_scr", "reward.cara=flase"], "cara must be true or false; got 'flase'"),
        (["progress=flase"], "progress must be true or false; got 'flase'"),
        (["steps=-5"], "steps must be >= 1; got -5"),
        (["steps=0"], "steps must be >= 1; got 0"),
        (["group_size=1"], "group_size must be >= 2; got 1"),
        (["trainer.lr=0"], "trainer.lr must be > 0.0; got 0"),
        (["judge.preset=calbrated"], "unknown judge preset 'calbrated'; registered: bradley_terry"),
        (["judge.kind=vlm"], "unknown judge kind 'vlm'; registered: simulated, ordinal, vllm, openai"),
        (["+judge.pair_noise=loud"], "pair_noise must be a number; got 'loud'"),
        (["reward.name=round_robn"], "Did you mean 'round_robin'?"),
        (["task.name=copy"], "unknown task 'copy'; registered: chain, hackable, preference, rlvr"),
        (["trainer.algo=ppo"], "unknown trainer.algo 'ppo'; choices: cispo, grpo"),
        (["init.kind=warm"], "init kind must be one of random, sft; got 'warm'"),
        (["engine.schedule=eager"], "engine.schedule must be one of auto, lockstep, pipelined"),
        (  # a rule measured and not taken runs only in experiments/anchor_bias.py
            ["reward=seeded_single_elim", "reward.anchor_seed=h2h"],
            "seeded_single_elim: anchor_seed must be one of auto, mean, lattice, record; got 'h2h'",
        ),
    ],
)
def test_validate_run_names_the_problem_and_the_choices(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate_run(compose_cfg(*overrides))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_every_conf_variant_validates():
    for reward in sorted(p.stem for p in (ROOT / "conf" / "reward").glob("*.yaml")):
        task = ["task=rlvr"] if reward in ("adaptive", "rlvr") else []
        validate_run(compose_cfg(f"reward={reward}", *task))
    for judge in ("calibrated", "cot", "integer", "noiseless", "position_gap", "bradley_terry"):
        validate_run(compose_cfg(f"judge={judge}"))


def _train(tmp_path, *args):
    """``arenabench-train`` as a user runs it, storing into ``tmp_path/store/mlflow.db``."""
    store = tmp_path / "store"
    store.mkdir(exist_ok=True)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}/mlflow.db", "HYDRA_FULL_ERROR": ""}
    env.pop("HYDRA_FULL_ERROR")
    return subprocess.run(
        [sys.executable, "-m", "arenabench.train", *args, "progress=false", f"hydra.run.dir={tmp_path}/h",
         f"hydra.sweep.dir={tmp_path}/hm"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _one_line_exit_2(p, prog: str, message: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{prog}: error:") and message in err[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_train_cli_rejects_bad_values_before_any_run_or_sweep(tmp_path):
    p = _train(tmp_path, "steps=-5")
    _one_line_exit_2(p, "arenabench-train", "steps must be >= 1; got -5")
    # a sweep: every job's config is checked before the first one starts
    p = _train(tmp_path, "-m", "reward=rrc_scr", "reward.cara=true,flase", "seed=0,1", "steps=1")
    _one_line_exit_2(p, "arenabench-train", "cara must be true or false; got 'flase'")
    assert "4 jobs, none started" in p.stderr
    p = _train(tmp_path, "-m", "seed=0,x", "steps=1")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert not (tmp_path / "store" / "mlflow.db").exists()  # no run, FAILED or otherwise: no store


@pytest.mark.slow
def test_train_cli_store_errors_are_one_line_and_create_nothing(tmp_path):
    missing = tmp_path / "typo"
    p = _train(tmp_path, "steps=1", f"tracking.uri=sqlite:///{missing}/mlflow.db")
    _one_line_exit_2(p, "arenabench-train", f"folder {missing} does not exist")
    assert not missing.exists()
    bad = tmp_path / "bad.db"
    bad.write_text("not a database\n" * 100)
    p = _train(tmp_path, "steps=1", f"tracking.uri=sqlite:///{bad}")
    _one_line_exit_2(p, "arenabench-train", f"cannot open MLflow store {bad}: ")


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["fidelity", "-N", "1"], "group size must be >= 2"),
        (["fidelity", "--constructors", "rrc_scr:cara=flase"], "cara must be true or false"),
        (["fidelity", "--judge", "calbrated"], "Did you mean 'calibrated'?"),
        (["fidelity", "--groups", "0"], "groups must be >= 1"),
    ],
)
def test_arenabench_cli_bad_input_is_one_line_exit_2(args, message):
    p = subprocess.run([sys.executable, "-m", "arenabench", *args], capture_output=True, text=True, cwd=ROOT)
    _one_line_exit_2(p, "arenabench", message)
