"""experiments/persistence_study.py's phase grid (issue 39 item 4): a cell moves only the share of
a comparison's error that repeats; every call's error variance stays the base fit's."""

import importlib.util
import json
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


def test_the_share0_control_is_chatgpts_share0_cell_and_the_script_runs_it():
    """stage share0_table2_hard = ChatGPT's persistent fit at r = 0 with each call's error held:
    the overrides scripts/regenerate_tables.sh passes are the ones the report describes."""
    c = ps.judge_conf(ps.SHARE0_JUDGE)
    ov = ps.share0_overrides()
    assert ov["persistent_sd"] == 0.0 and "surface_beta" not in ov
    assert ov["pair_noise"] ** 2 == pytest.approx(_pair_var(c), abs=2e-6)
    assert ov["point_noise"] ** 2 == pytest.approx(_point_var(c), abs=2e-6)
    script = " ".join((ROOT / "scripts" / "regenerate_tables.sh").read_text().replace("\\\n", " ").split())
    assert (
        f"judge={ps.SHARE0_JUDGE} name=table2_hard_chatgpt_share0 judge.persistent_sd={ov['persistent_sd']} "
        f"judge.pair_noise={ov['pair_noise']} judge.point_noise={ov['point_noise']} "
    ) in script


def test_the_speed_line_reads_the_benchmarks_json(tmp_path):
    row = {"jobs": 80, "wall_s": 240.0, "cpu_s": 480.0, "load_before": 0.5}
    meta = {"arms": "pointwise,anchor", "seeds": 10, "steps": 200}
    (tmp_path / "b.json").write_text(json.dumps({"meta": meta, "rows": [{"judge": "j", **row}]}))
    line = ps.speed_line(tmp_path / "b.json")[0]
    assert "the 10-seed table2 sweep (2 arms, 200 steps) took `j` 4.00 min wall (4.00 min CPU / 2" in line
    assert ps.speed_line(tmp_path / "missing.json")[0].startswith("Speed: not measured")
