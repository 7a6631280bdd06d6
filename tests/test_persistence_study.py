"""experiments/persistence_study.py's phase grid (issue 39 item 4): a cell moves only the share of
a comparison's error that repeats; every call's error variance stays the base fit's."""

import importlib.util
import math

import pytest
from helpers import ROOT

spec = importlib.util.spec_from_file_location(
    "persistence_study", ROOT / "experiments" / "persistence_study.py"
)
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)

BASE = ps.judge_conf(ps.BASE_JUDGE)


def _pair_var(c):  # a comparison's error: fresh difference noise + both responses' persistent draws
    return c["pair_noise"] ** 2 + 2 * c["persistent_sd"] ** 2


def _point_var(c):  # a score's error: fresh noise + the response's persistent draw
    return c["point_noise"] ** 2 + c["persistent_sd"] ** 2


@pytest.mark.parametrize("share", ps.SHARES)
@pytest.mark.parametrize("beta", ps.BETAS)
def test_a_cell_holds_each_calls_error_and_sets_the_repeating_share(share, beta):
    cell = {**BASE, **ps.cell_overrides(share, beta, BASE)}
    assert _pair_var(cell) == pytest.approx(_pair_var(BASE), abs=2e-6)
    assert _point_var(cell) == pytest.approx(_point_var(BASE), abs=2e-6)
    assert ps.comparison_share(cell) == pytest.approx(share, abs=1e-6)
    assert cell["surface_beta"] == beta
    assert ps.cell_name(share, beta) == f"phase_r{share:g}_b{beta:g}"


def test_the_base_fit_sits_at_its_own_share():
    """GPT-4's persistent fit: 2·0.611016² / (0.399629² + 2·0.611016²) = 0.8238."""
    psd, pair = BASE["persistent_sd"], BASE["pair_noise"]
    assert ps.comparison_share(BASE) == pytest.approx(2 * psd**2 / (pair**2 + 2 * psd**2))
    assert ps.comparison_share(BASE) == pytest.approx(0.8238, abs=1e-4)
    ov = ps.cell_overrides(ps.comparison_share(BASE), BASE["surface_beta"], BASE)
    for k in ("persistent_sd", "pair_noise", "point_noise"):
        assert ov[k] == pytest.approx(BASE[k], abs=2e-6)


def test_a_share_beyond_a_scores_error_is_refused():
    """psd² = r · (pair² + 2 psd²) / 2 may not exceed a score's whole error variance."""
    r_max = 2 * _point_var(BASE) / _pair_var(BASE)
    assert r_max > 1  # every share in [0, 1] is reachable from the GPT-4 base
    with pytest.raises(ValueError, match="exceeds a score's error"):
        ps.cell_overrides(r_max + 0.01, 0.0, BASE)


def test_judge_points_in_the_bases_units():
    s, b = ps.judge_point("chatgpt_llmbar_persistent", BASE)
    c = ps.judge_conf("chatgpt_llmbar_persistent")
    assert s == pytest.approx(ps.comparison_share(c))
    assert b == pytest.approx(c["surface_beta"] * c["quality_scale"] / BASE["quality_scale"])
    assert math.isclose(ps.judge_point(ps.BASE_JUDGE, BASE)[1], BASE["surface_beta"])
