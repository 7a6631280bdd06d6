"""conf/ stays in step with the registry: a file per constructor, every parameter, its default."""

import dataclasses

import pytest
import yaml
from helpers import CONF

from arenabench import judges, rewards


@pytest.mark.parametrize("name", rewards.names())
def test_reward_conf_matches_constructor(name):
    cfg = yaml.safe_load((CONF / "reward" / f"{name}.yaml").read_text())
    params = {k: v for k, v in cfg.items() if k != "name"}
    assert cfg["name"] == name
    fields = {
        f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default
        for f in dataclasses.fields(rewards.REGISTRY.lookup(name))
        if f.init  # state such as AGR's anchor pool is not configuration
    }
    assert params == fields
    assert rewards.get(name, **params) == rewards.get(name)


VARIANTS = sorted(p.stem for p in (CONF / "reward").glob("*.yaml") if p.stem not in rewards.names())


@pytest.mark.parametrize("variant", VARIANTS)
def test_reward_variants_build(variant):
    """Extra reward files (e.g. rrc_scr_cara) name a registered constructor and valid params."""
    cfg = yaml.safe_load((CONF / "reward" / f"{variant}.yaml").read_text())
    c = rewards.get(cfg.pop("name"), **cfg)
    assert c != type(c)()  # a variant differs from the defaults


@pytest.mark.parametrize("preset", judges.presets())
def test_judge_conf_builds_the_preset(preset):
    cfg = yaml.safe_load((CONF / "judge" / f"{preset}.yaml").read_text())
    assert cfg["preset"] == preset
    assert judges.get(cfg["preset"], seed=cfg["seed"]).config == judges.get(preset).config


@pytest.mark.parametrize("kind", ["vllm", "openai"])
def test_llm_judge_conf_lists_every_parameter_with_its_default(kind):
    """conf/judge/{vllm,openai}.yaml name every backend parameter; defaults match the code."""
    import inspect

    cfg = yaml.safe_load((CONF / "judge" / f"{kind}.yaml").read_text())
    assert cfg.pop("kind") == kind
    params = inspect.signature(judges.judge_class(kind).__init__).parameters
    expected = {n: p.default for n, p in params.items() if n not in ("self", "llm")}
    assert set(cfg) == set(expected)
    for name, default in expected.items():
        if default is inspect.Parameter.empty:
            assert cfg[name] == "???" or name == "base_urls", name  # required: the user sets it
        elif name == "engine_kwargs":
            assert cfg[name]["gpu_memory_utilization"] == 0.2  # the CPU setting documented in the README
        elif default is None or isinstance(default, dict):
            assert cfg[name] in (None, {}), name
        else:
            got = cfg[name]
            assert (list(got) if isinstance(got, list) else got) == (
                list(default) if isinstance(default, tuple | list) else default
            ), name


def test_judge_factory_errors_name_the_choices():
    with pytest.raises(ValueError, match="registered: simulated, ordinal, vllm, openai"):
        judges.build({"kind": "vlm"})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['temp'\].*valid: \['model'"):
        judges.build({"kind": "vllm", "model": "m", "temp": 0.5})
    assert judges.build({"kind": "simulated", "preset": "cot"}).config == judges.get("cot").config


def test_every_judge_preset_logs_as_valid_mlflow_params():
    """A fitted judge's YAML (provenance included) becomes MLflow params under `judge.`: every key
    must be one MLflow accepts, or a run under that judge dies after it opened (issue 39: explain
    columns named ``persistent_sd=0`` did)."""
    import re

    from arenabench.tracking.params import flatten

    ok = re.compile(r"^[/\w.\- :]{1,250}$")
    for path in sorted((CONF / "judge").glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text()) or {}
        bad = [k for k in flatten({"judge": cfg}) if not ok.match(k)]
        assert not bad, f"{path.name}: keys MLflow refuses: {bad[:5]}"
