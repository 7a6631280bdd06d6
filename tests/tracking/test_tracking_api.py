"""The tracking package's public surface: one import place, the shared job-tags builder, and
logging into an existing run (real sqlite MLflow, no mocks)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from helpers import ROOT
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf, open_dict

import arenabench.tracking as tracking
from arenabench.tracking import RunLogger, Tracker, build_job_tags, open_client

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")


def test_public_names_all_import_and_nobody_imports_private_tracking_names():
    """Other modules use ``arenabench.tracking``'s ``__all__``, never a ``_private`` name."""
    assert all(hasattr(tracking, name) for name in tracking.__all__)
    offenders = []
    for path in [*(ROOT / "arenabench").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        if "tracking" in path.relative_to(ROOT).parts[:2]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("arenabench.tracking"):
                offenders += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert offenders == []


def test_build_job_tags_setting_and_strings():
    tags = build_job_tags(
        ["reward=anchor", "seed=3", "+seed=4", "steps=5"],
        not_setting=("seed=",),
        constructor="anchor",
        reward="anchor_v2",
        seed=3,
        sweep=Path("multirun/x"),
        experiment="table2",
        commit="abc",
        extra={"trainer": "verl"},
    )
    assert tags == {
        "constructor": "anchor",
        "reward": "anchor_v2",
        "setting": "reward=anchor +seed=4 steps=5",  # matched as typed unless strip is given
        "seed": "3",
        "sweep": "multirun/x",
        "overrides": "reward=anchor seed=3 +seed=4 steps=5",
        "experiment": "table2",
        "git_commit": "abc",
        "trainer": "verl",
    }
    common = dict(constructor="a", reward="a", seed=0, sweep="s", experiment="e", commit="c")
    stripped = build_job_tags(["+seed=4", "~x=1"], not_setting=("seed=",), strip="+~", **common)
    assert stripped["setting"] == "~x=1"
    assert build_job_tags(["seed=1"], not_setting=("seed=",), **common)["setting"] == "default"
    headed = build_job_tags(["seed=1"], not_setting=("seed=",), setting_head=["smoke"], **common)
    assert headed["setting"] == "smoke"


def test_local_app_job_tags_values(tmp_path):
    """``train.job_tags`` reads its hydra state and keeps the tag values it always had."""
    from arenabench.tracking import git_commit
    from arenabench.train import job_identity, job_tags

    overrides = ["reward=anchor", "seed=3", "steps=5", "tracking.enabled=false", "progress=false"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[*overrides, f"hydra.run.dir={tmp_path}"], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        with open_dict(cfg):
            del cfg["hydra"]
        tags = job_tags(cfg)
    finally:
        HydraConfig.instance().cfg = None
    commit = git_commit() or "unknown"
    assert tags == {
        "constructor": str(cfg.reward.name),
        "reward": "anchor",
        "setting": "reward=anchor steps=5",
        "seed": "3",
        "sweep": str(tmp_path),
        "overrides": " ".join(overrides),
        "experiment": str(cfg.name),
        "git_commit": commit,
        "job_key": job_identity(OmegaConf.to_container(cfg, resolve=True), commit),
    }


def test_run_logger_writes_into_a_run_it_does_not_own(tmp_path):
    """What verl's reward worker does: log into a run another process opened, by id."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with Tracker("attach", uri=uri) as owner:
        run = RunLogger(owner.run_id, uri, flush_every=1)
        run.log_metrics({"judge_calls": 24, "arena/adv_std": math.nan}, step=3)
        client = MlflowClient(tracking_uri=uri)
        assert [(m.step, m.value) for m in client.get_metric_history(owner.run_id, "judge_calls")] == [
            (3, 24.0)
        ]
        assert run.skipped == 1 and client.get_run(owner.run_id).info.status == "RUNNING"
    assert client.get_run(owner.run_id).info.status == "FINISHED"


def test_open_client_must_exist_does_not_create_a_database(tmp_path):
    db = tmp_path / "none" / "mlflow.db"
    with pytest.raises(ValueError, match="no MLflow database"):
        open_client(f"sqlite:///{db}", must_exist=True)
    assert not db.exists()
