"""``calibrate`` writes its preset through the YAML emitter: no data text can add a key (issue 43 §3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arenabench import judges
from arenabench.calibration.fit import Fit, preset_yaml
from arenabench.judges.ordinal import OrdinalJudge

ROOT = Path(__file__).resolve().parents[2]
PARAM_KEYS = (
    "grid",
    "cutpoints",
    "point_noise",
    "pair_noise",
    "position_bias",
    "tie_margin",
    "rejudge_share",
)
EVIL = "gpt\nfaults: {rate: 0.5}\r\nkind: simulated\x85seed: 7\u2028tie_margin: 9\u2029# x"


def _fit() -> Fit:
    """A Fit with the committed MT-bench preset's parameters (exact floats, as fitted)."""
    cfg = yaml.safe_load((ROOT / "conf/judge/gpt4turbo_mtbench.yaml").read_text())
    params = {k: v for k, v in cfg.items() if k not in ("kind", "seed", "tokenizer", "rubric", "provenance")}
    rows = [
        dict(
            statistic="pair_tie_rate", role="target", measured=0.1, lo=0.05, hi=0.15, fitted=0.11, inside=True
        )
    ]
    return Fit(params, 0.3, 1.1, {}, {}, ["pair_tie_rate"], 0.01, 10, 100, rows)


@pytest.mark.parametrize("where", ["description", "sources", "command", "name"])
def test_data_text_cannot_inject_keys(tmp_path, where):
    f = _fit()
    args = {"name": "mine", "description": "a judge", "sources": ["s1"], "command": "arenabench calibrate x"}
    args[where] = [EVIL] if where == "sources" else EVIL
    text = preset_yaml(f, args["name"], args["description"], args["sources"], args["command"])
    cfg = yaml.safe_load(text)
    assert "faults" not in cfg and cfg["kind"] == "ordinal" and cfg["seed"] == 0
    assert {k: cfg[k] for k in f.params} == f.params  # the fitted values, exactly
    prov = cfg["provenance"]
    if where == "description":
        assert prov["judge"] == EVIL  # kept verbatim, as data
    if where == "sources":
        assert prov["sources"] == [EVIL]
    if where == "command":
        assert prov["command"] == EVIL
    for line in text.splitlines():  # every line is a comment or YAML the emitter wrote
        assert line.startswith(("#", " ", "-")) or ":" in line
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    j = judges.get(str(path))
    assert isinstance(j, OrdinalJudge) and j.tie_margin == f.params["tie_margin"]
    assert not hasattr(j, "faults")


@pytest.mark.parametrize("name", ["gpt4_llmbar", "chatgpt_llmbar", "gpt4turbo_mtbench"])
def test_committed_presets_still_load(name):
    """The committed fitted files are not regenerated: they load with the values they hold."""
    cfg = yaml.safe_load((ROOT / "conf/judge" / f"{name}.yaml").read_text())
    j = judges.get(name)
    assert isinstance(j, OrdinalJudge)
    assert j.pair_noise == cfg["pair_noise"] and j.tie_margin == cfg["tie_margin"]
    assert list(j.cutpoints) == cfg["cutpoints"]
