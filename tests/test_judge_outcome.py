"""Judge health as a run outcome, and LLM-judge settings checked before anything runs (issue 43 §4).

A judge that fails every request (refused, a wrong key, garbage) used to end the run FINISHED,
exit 0; now a step with more than ``trainer.max_judge_failure_share`` failed requests (default
0.5), or a first step with every request failed, stops the run FAILED with the judge's last error.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT, compose_cfg

from arenabench.engine import StepStats
from arenabench.trainers.local.config import ConfigError, validate_run
from arenabench.trainers.local.trainer import JudgeHealthError, judge_health, train

SMALL = ["steps=3", "prompts_per_step=2", "group_size=4", "eval_every=0", "probe_size=0", "tracking=none"]


def test_judge_health_rules():
    ok = StepStats(judge_calls=12, retries=2, failures=5, failure_reasons={"timeout: a": 2, "http: b": 3})
    assert judge_health(3, ok, 0.5) is None  # 5 of 10: not more than half
    bad = StepStats(judge_calls=12, retries=2, failures=6, failure_reasons={"timeout: a": 2, "http: b": 4})
    why = judge_health(3, bad, 0.5)
    assert why == (
        "6 of 10 judge requests failed at step 3 (> trainer.max_judge_failure_share=0.5); last error: http: b"
    )
    assert judge_health(3, bad, None) is None and judge_health(3, bad, 0.6) is None
    dead = StepStats(judge_calls=10, retries=0, failures=10, failure_reasons={"outage: refused": 10})
    assert judge_health(0, dead, None).startswith("every judge request of the first step failed (10 of 10)")
    assert judge_health(1, dead, None) is None  # later steps: the share rule only
    assert judge_health(0, StepStats(), 0.5) is None  # a step that asked nothing (an oracle)


def test_a_dead_judge_fails_the_run_with_its_error():
    cfg = compose_cfg(*SMALL, "+judge.faults={rate: 1.0, seed: 0, kinds: [malformed]}")
    tags = {}

    class Recorder:
        def log_metrics(self, metrics, step):
            raise AssertionError("no step of a dead judge is logged")

        def set_tags(self, t):
            tags.update(t)

    with pytest.raises(JudgeHealthError, match=r"first step failed .*last error: malformed verdict: inj"):
        train(cfg, tracker=Recorder(), progress=False)
    assert tags["judge_error"].startswith("every judge request of the first step failed")


def test_a_mostly_failing_judge_stops_by_share_and_the_option_relaxes_it():
    faulty = "+judge.faults={rate: 0.8, seed: 0, kinds: [malformed]}"
    with pytest.raises(JudgeHealthError, match=r"> trainer.max_judge_failure_share=0.5\); last error"):
        train(compose_cfg(*SMALL, faulty, "engine.max_retries=0"), progress=False)
    final = train(
        compose_cfg(*SMALL, faulty, "engine.max_retries=0", "trainer.max_judge_failure_share=null"),
        progress=False,
    )
    assert final["judge_failures"] > 0  # it ran to the end, its failures counted


def test_a_refused_served_judge_fails_the_run_not_finishes_it():
    """The issue's case: an OpenAI-compatible judge whose server refuses every connection."""
    pytest.importorskip("aiohttp")
    cfg = compose_cfg(
        *SMALL,
        "judge=openai",
        "judge.model=m",
        "judge.base_urls=[http://127.0.0.1:9]",  # discard port: connection refused
        "judge.api_key_env=null",
        "judge.retries=0",
        "judge.outage_deadline_s=0",
        "judge.backoff_s=0",
        "judge.max_backoff_s=0",
    )
    with pytest.raises(JudgeHealthError, match=r"first step failed .*last error: outage: http: "):
        train(cfg, progress=False)


# --- LLM-judge settings: one line naming the valid choices, before anything runs -------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["judge=openai"], "judge.model is required for judge kind 'openai'"),
        (["judge=vllm"], "judge.model is required for judge kind 'vllm'"),
        (["judge=openai", "judge.model=m", "judge.timeout_s=-1"], "timeout_s must be > 0; got -1"),
        (["judge=openai", "judge.model=m", "judge.outage_deadline_s=-2"], "outage_deadline_s must be >= 0"),
        (["judge=openai", "judge.model=m", "judge.rubric=poetry"],
         "unknown judge.rubric 'poetry'; available rubrics: deep_research, math_reasoning, open_writing"),
        (["judge=vllm", "judge.model=m", "judge.rubric=poetry"], "unknown judge.rubric 'poetry'"),
        (["judge=openai", "judge.model=m", "judge.base_urls=[]"], "judge.base_urls must name at least one"),
        (["judge=openai", "judge.model=m", "judge.base_urls=[127.0.0.1:8000]"], "must start with http://"),
        (["judge=openai", "judge.model=m", "judge.temperature=-1"], "temperature must be >= 0"),
        (["judge=openai", "judge.model=m", "judge.max_reply_chars=0"], "max_reply_chars must be >= 1"),
        (["judge=openai", "judge.model=m", "judge.api_key_env=my-key"], "api_key_env must be the NAME"),
    ],
)  # fmt: skip
def test_llm_judge_settings_are_checked_before_a_run(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate_run(compose_cfg(*overrides))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_pasted_key_is_refused_and_never_echoed():
    key = "sk-proj-AbC123very-secret-value"
    with pytest.raises(ConfigError) as e:
        validate_run(compose_cfg("judge=openai", "judge.model=m", f"judge.api_key_env={key}"))
    msg = str(e.value)
    assert "api_key_env must be the NAME of the environment variable" in msg and "not shown" in msg
    assert key not in msg and "AbC123" not in msg


def test_an_unset_key_variable_for_a_remote_server_is_an_error(monkeypatch):
    monkeypatch.delenv("ARENABENCH_TEST_KEY", raising=False)
    remote = ["judge=openai", "judge.model=m", "judge.base_urls=[https://judge.example.com]",
              "judge.api_key_env=ARENABENCH_TEST_KEY"]  # fmt: skip
    with pytest.raises(ConfigError, match="names ARENABENCH_TEST_KEY, which is not set"):
        validate_run(compose_cfg(*remote))
    monkeypatch.setenv("ARENABENCH_TEST_KEY", "sk-x")
    validate_run(compose_cfg(*remote))
    # a server on this machine (vllm serve) usually has no auth: the unset variable is allowed
    monkeypatch.delenv("ARENABENCH_TEST_KEY")
    validate_run(compose_cfg("judge=openai", "judge.model=m", "judge.api_key_env=ARENABENCH_TEST_KEY"))
    validate_run(compose_cfg("judge=openai", "judge.model=m", "judge.api_key_env=null"))


@pytest.mark.slow
def test_train_cli_refuses_an_llm_judge_without_model_and_a_pasted_key(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store}/mlflow.db"}
    env.pop("HYDRA_FULL_ERROR", None)
    key = "sk-live-0123456789abcdef"
    for args, message in [
        (["judge=openai"], "judge.model is required for judge kind 'openai'"),
        (["judge=openai", "judge.model=m", f"judge.api_key_env={key}"], "api_key_env must be the NAME"),
    ]:
        p = subprocess.run(
            [sys.executable, "-m", "arenabench.train", *args, "steps=1", "progress=false",
             f"hydra.run.dir={tmp_path}/h"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert p.returncode == 2, p.stderr[-2000:]
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and message in err[0] and "Traceback" not in p.stderr
        assert key not in p.stderr + p.stdout
    assert not (store / "mlflow.db").exists()  # nothing ran, nothing was stored
    leaked = [f for f in tmp_path.rglob("*") if f.is_file() and key in f.read_text(errors="replace")]
    assert leaked == [] or all("overrides.yaml" in str(f) or "config.yaml" in str(f) for f in leaked)


def test_the_sweep_line_shows_judge_failures():
    from hydra.core.utils import JobReturn, JobStatus

    from arenabench.sweep import job_line

    ret = JobReturn()
    ret.status, ret.return_value = JobStatus.COMPLETED, 0.5
    final = {"eval_sampled_quality": 2.5, "judge_calls": 2000.0, "judge_failures": 37.0, "steps": 200}
    line = job_line(1, 2, 10.0, ["seed=0"], ret, {"wall_s": 3.0, "dir": "/x/0", "final": final})
    assert "10 judge calls/step, 37 judge failures, 3.0 s" in line


@pytest.mark.slow
def test_train_cli_dead_judge_run_is_failed_with_its_error_in_the_store(tmp_path):
    """End to end: ``arenabench-train`` with a judge that fails everything exits non-zero and its
    MLflow run is FAILED, the judge's error in its ``judge_error`` tag (it was FINISHED, exit 0)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MPLBACKEND": "Agg"}
    p = subprocess.run(
        [sys.executable, "-m", "arenabench.train", "name=dead", "steps=2", "prompts_per_step=2",
         "group_size=4", "eval_every=0", "probe_size=0", "progress=false",
         "+judge.faults={rate: 1.0, seed: 0, kinds: [timeout]}", f"hydra.run.dir={tmp_path}/h"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode != 0 and "JudgeHealthError" in p.stderr
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("dead").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["judge_error"].startswith("every judge request of the first step failed")
    assert "last error: timeout" in run.data.tags["judge_error"]
