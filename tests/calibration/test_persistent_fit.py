"""The persistent model (``calibrate --model persistent``, issue 39): its simulator reduces to the
gap model's without the new terms, each term moves the statistic that identifies it, the fit
recovers known parameters, and the CLI writes a loadable preset."""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from arenabench import cli, judges
from arenabench.calibration import judge_data, load_files, measure
from arenabench.calibration.fit import _Draws, simulate
from arenabench.calibration.persistent import (
    _PDraws,
    fit_persistent,
    folded_moments,
    gold_length_pool,
    simulate_persistent,
    surface_scale,
)
from arenabench.judges.ordinal import OrdinalJudge

FIX = Path(__file__).parent / "fixtures"
MANUAL = FIX / "llmbar" / "Adversarial_Manual"


@pytest.fixture(scope="module")
def like():
    return judge_data(load_files([MANUAL]), "GPT-4")


def judge(**kw):
    base = dict(
        grid=(0, 9),
        cutpoints=[-1.5, -1.2, -0.8, -0.5, -0.2, 0.0, 0.3, 0.6, 0.9],
        point_noise=0.4,
        pair_noise=0.5,
        position_bias=0.2,
        tokenizer=None,
    )
    return OrdinalJudge(**{**base, **kw})


def test_without_the_new_terms_it_is_the_gap_model_where_the_gap_is_positive(like):
    # gap_mu = 6, gap_sigma = 0.5: |6 + 0.5 g| = 6 + 0.5 g for every draw here, so the two simulators
    # see the same latent values from the same base draws
    pool = gold_length_pool(like)
    a = simulate_persistent(judge(), 6.0, 0.5, like, _PDraws(3000, 5, pool), surface_scale(like))
    b = simulate(judge(), 6.0, 0.5, like, _Draws(3000, 5))
    for f in ("s_a", "s_b", "v_ab", "v_ba", "scores"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_each_term_moves_the_statistic_that_identifies_it(like):
    pool, sc = gold_length_pool(like), surface_scale(like)
    draws = _PDraws(10000, 1, pool)

    def stats(**kw):
        return {
            k: v["value"]
            for k, v in measure(
                simulate_persistent(judge(**kw), 1.0, 1.0, like, draws, sc), n_boot=0, persistence=True
            ).items()
        }

    # the same total error variance of a pairwise call (2 ps^2 + pair_noise^2 = 0.64) and of a score
    # (ps^2 + point_noise^2 = 0.36), split differently: per-order accuracy about equal, but
    # persistent error makes both orders (and the scores) wrong together
    base = stats(pair_noise=0.8, point_noise=0.6)
    pers = stats(persistent_sd=0.4, pair_noise=math.sqrt(0.32), point_noise=math.sqrt(0.2))
    surf = stats(surface_beta=1.0)
    assert pers["pair_accuracy"] == pytest.approx(base["pair_accuracy"], abs=0.02)
    assert pers["pair_both_wrong"] > base["pair_both_wrong"] + 0.02
    assert pers["pair_wrong_given_other_wrong"] > base["pair_wrong_given_other_wrong"] + 0.1
    assert pers["point_wrong_given_pair_both_wrong"] > base["point_wrong_given_pair_both_wrong"] + 0.05
    # the length term: the length coefficients, and nothing length-related without it
    assert surf["pair_length_coef"] > 0.3 and surf["point_length_coef"] > 0.3
    assert abs(base["pair_length_coef"]) < 0.1 and abs(pers["pair_length_bias_index"]) < 0.05


def test_folded_moments():
    m, s = folded_moments(0.0, 1.0)
    assert m == pytest.approx(math.sqrt(2 / math.pi)) and s == pytest.approx(math.sqrt(1 - 2 / math.pi))
    m, s = folded_moments(5.0, 0.5)
    assert m == pytest.approx(5.0) and s == pytest.approx(0.5, rel=1e-6)


def test_no_gold_is_refused_with_the_reason():
    data = judge_data(load_files([FIX / "fastchat"]), "gpt-4-turbo") if (FIX / "fastchat").exists() else None
    if data is None:
        like = judge_data(load_files([MANUAL]), "GPT-4")
        data = like
        data.gold = np.zeros_like(data.gold)
    with pytest.raises(ValueError, match="needs gold labels"):
        fit_persistent(data, n_sim=500, maxfev=5)


@pytest.mark.slow
def test_fit_recovers_persistent_sd_and_beta(like):
    truth = judge(persistent_sd=0.6, surface_beta=0.4)
    pool, sc = gold_length_pool(like), surface_scale(like)
    data = simulate_persistent(truth, 1.0, 1.0, like, _PDraws(4000, 99, pool), sc)
    f = fit_persistent(data, n_sim=4000, maxfev=700)  # deterministic: 0.68, 0.30, 0.47
    assert f.params["persistent_sd"] == pytest.approx(0.6, abs=0.2)
    assert f.params["surface_beta"] == pytest.approx(0.4, abs=0.15)
    assert f.params["pair_noise"] == pytest.approx(0.5, rel=0.35)


@pytest.mark.slow
def test_calibrate_cli_persistent_writes_a_loadable_preset(tmp_path, capsys):
    out = tmp_path / "mine.yaml"
    argv = [
        "calibrate",
        str(MANUAL),
        "--model",
        "persistent",
        "--out",
        str(out),
        "--n-sim",
        "2000",
        "--explain-table",
        str(tmp_path / "explain.md"),
    ]
    assert cli.main(argv) == 0
    cfg = yaml.safe_load(out.read_text())
    assert cfg["surface_feature"] == "length" and cfg["persistent_sd"] >= 0
    assert cfg["provenance"]["surface"]["n_responses"] == 26
    assert "--model persistent" in cfg["provenance"]["command"]
    j = judges.get(str(out))
    assert isinstance(j, OrdinalJudge) and j.persistent_sd == cfg["persistent_sd"]
    assert "| pair_both_wrong |" in (tmp_path / "explain.md").read_text()


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "name,judge_name", [("gpt4_llmbar_persistent", "GPT-4"), ("chatgpt_llmbar_persistent", "ChatGPT")]
)
def test_committed_persistent_preset_reproduces_its_fit_table(name, judge_name):
    """Re-simulate the committed YAML on fresh draws: every target's simulated value is within 0.03
    of the YAML's fitted value (the fit is not an artefact of its draws), and its provenance says
    what produced it."""
    path = ROOT / "conf" / "judge" / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"{name} not generated yet (make judges)")
    cfg = yaml.safe_load(path.read_text())
    prov = cfg.pop("provenance")
    assert prov["command"].startswith(
        f"arenabench calibrate data/judgments/llmbar --judge {judge_name} --model persistent"
    )
    assert prov["surface"]["feature"] == cfg["surface_feature"] == "length"
    data = judge_data(load_files([ROOT / "data/judgments/llmbar"]), judge_name)
    j = judges.build(cfg)
    assert isinstance(j, OrdinalJudge) and j.persistent_sd > 0
    gap = prov["recorded_gap"]
    sim = simulate_persistent(
        j, gap["mu"], gap["sigma"], data, _PDraws(20000, 2024, gold_length_pool(data)), prov["surface"]
    )
    got = {k: v["value"] for k, v in measure(sim, n_boot=0, persistence=True).items()}
    for t in prov["targets"]:
        assert got[t] == pytest.approx(prov["fit"][t]["fitted"], abs=0.03 if "coef" not in t else 0.15), t
