"""The fit: it recovers known parameters, the committed presets reproduce their source
statistics within the CIs, and ``arenabench calibrate`` writes a preset the judges can load."""

import math
from pathlib import Path

import pytest
import yaml

from arenabench import cli, judges
from arenabench.calibration import judge_data, load_files, measure
from arenabench.calibration.fit import _Draws, fit, simulate
from arenabench.judges.ordinal import OrdinalJudge

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"
PRESETS = {  # preset → (vendored files, judge)
    "gpt4_llmbar": ("data/judgments/llmbar", "GPT-4"),
    "chatgpt_llmbar": ("data/judgments/llmbar", "ChatGPT"),
    "gpt4turbo_mtbench": ("data/judgments/fastchat-gpt-4-turbo", "gpt-4-turbo"),
}


@pytest.mark.slow
def test_fit_recovers_the_parameters_of_simulated_judgments():
    """Judgments simulated from a known judge (LLMBar-like parts) → the fit finds it again."""
    like = judge_data(load_files([FIX / "llmbar" / "Adversarial_Manual"]), "GPT-4")
    truth = OrdinalJudge(
        grid=(0, 9),
        cutpoints=[-1.5, -1.2, -0.8, -0.5, -0.2, 0.0, 0.3, 0.6, 0.9],
        point_noise=0.4,
        pair_noise=0.5,
        position_bias=0.2,
    )
    data = simulate(truth, 1.0, 1.0, like, _Draws(4000, seed=99))
    f = fit(data, n_sim=4000, maxfev=600)
    assert f.params["pair_noise"] == pytest.approx(0.5, rel=0.25)
    assert f.params["position_bias"] == pytest.approx(0.2, abs=0.06)
    assert f.params["point_noise"] == pytest.approx(0.4, rel=0.4)
    assert f.gap_mean == pytest.approx(1.0, rel=0.25)
    assert all(r["inside"] for r in f.rows if r["role"] == "target")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_committed_preset_reproduces_its_source_statistics(name):
    """Re-measure the vendored source, re-simulate the committed YAML (fresh draws): every fit
    target lies inside its 95% CI, and so does every target in the YAML's own fit table."""
    cfg = yaml.safe_load((ROOT / "conf" / "judge" / f"{name}.yaml").read_text())
    prov = cfg.pop("provenance")
    path, judge = PRESETS[name]
    assert prov["command"].startswith(f"arenabench calibrate {path} --judge {judge} ")
    assert all("@" in s and ":" in s for s in prov["sources"])  # repo@commit:path
    data = judge_data(load_files([ROOT / path]), judge)
    measured = measure(data)
    gap = prov["recorded_gap"]
    sim = simulate(judges.build(cfg), gap["mean"], gap["sd"], data, _Draws(20000, seed=2024))
    got = {k: v["value"] for k, v in measure(sim, n_boot=0).items()}
    for t in prov["targets"]:
        assert measured[t]["lo"] <= got[t] <= measured[t]["hi"], (t, got[t], measured[t])
        row = prov["fit"][t]
        assert row["inside"] and row["measured"] == pytest.approx(measured[t]["value"], abs=1e-4)
    for k in (k for k in measured if k.startswith("hist_")):
        assert got[k] == pytest.approx(measured[k]["value"], abs=0.01)


@pytest.mark.slow
def test_calibrate_cli_writes_a_loadable_preset(tmp_path, capsys):
    out = tmp_path / "mine.yaml"
    argv = [
        "calibrate",
        str(FIX / "llmbar" / "Adversarial_Manual"),
        "--out",
        str(out),
        "--n-sim",
        "2000",
        "--format",
        "csv",
        "--plot",
        str(tmp_path / "fit.png"),
    ]
    assert cli.main(argv) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0] == "statistic,role,measured,lo,hi,fitted,inside"
    cfg = yaml.safe_load(out.read_text())
    assert cfg["kind"] == "ordinal" and cfg["grid"] == [0, 9] and len(cfg["cutpoints"]) == 9
    assert all("sha256" in s for s in cfg["provenance"]["sources"])  # no sources.json above the fixture
    j = judges.get(str(out))
    assert isinstance(j, OrdinalJudge) and math.isclose(j.pair_noise, cfg["pair_noise"])
    assert (tmp_path / "fit.png").stat().st_size > 10_000
    assert cli.main(["calibrate", str(FIX / "llmbar"), "--out", str(out)]) == 2
    assert "several judges (ChatGPT, GPT-4): pick one with --judge" in capsys.readouterr().err
