"""The fitted-judge model (kind ``ordinal``): grid scores, forced choice or ties, position bias,
re-judging, determinism, config errors, and the protocol the engine uses."""

import numpy as np
import pytest
from scipy.stats import norm

from arenabench import Trajectory, judges
from arenabench.engine import Engine
from arenabench.judges.ordinal import OrdinalJudge
from arenabench.rewards import get as get_reward
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest, PointRequest


def traj(q, i=0):
    return Trajectory(f"t{i}", f"text {i}", 512, {"quality": q})


def test_pointwise_levels_follow_the_cutpoints_on_the_grid():
    j = OrdinalJudge(grid=(1, 4), cutpoints=[-1.0, 0.0, 0.0], point_noise=0.0)
    qs = [-2.0, -1.0, -0.5, 0.0, 3.0]
    got = j.score_points([PointRequest("p", traj(q, i)) for i, q in enumerate(qs)])
    # levels 1, 2, 2, 4, 4 (level 3 sits between two equal cutpoints: never reported), on 0-1
    assert got == [0.0, 1 / 3, 1 / 3, 1.0, 1.0]


def test_forced_choice_scores_one_zero_and_ties_with_a_margin():
    j = OrdinalJudge(pair_noise=0.0)
    r = j.judge_pairs(
        [PairRequest("p", traj(1.0, 1), traj(0.5, 2)), PairRequest("p", traj(0.5, 2), traj(1.0, 1))]
    )
    assert [(x.score_a, x.score_b) for x in r] == [(1.0, 0.0), (0.0, 1.0)]
    j = OrdinalJudge(pair_noise=0.0, tie_margin=0.6)
    r = j.judge_pairs(
        [PairRequest("p", traj(1.0, 1), traj(0.5, 2)), PairRequest("p", traj(2.0, 1), traj(0.5, 2))]
    )
    assert [(x.score_a, x.score_b) for x in r] == [(0.5, 0.5), (1.0, 0.0)]


def test_position_bias_at_zero_gap_and_fading_with_the_gap():
    m, sigma, b = 20000, 0.5, 0.3
    j = OrdinalJudge(pair_noise=sigma, position_bias=b, rejudge_share=1.0)
    a, c = traj(1.0, 1), traj(1.0, 2)
    res = j.judge_pairs([PairRequest("p", a, c, sample=s) for s in range(m)])
    first = np.mean([x.score_a for x in res])
    assert first == pytest.approx(norm.cdf(b / sigma), abs=4 * np.sqrt(0.25 / m))
    g = OrdinalJudge(pair_noise=0.0, position_bias=b, position_gap_scale=0.1)
    assert g.bias(np.array([0.0, 0.1]))[1] == pytest.approx(b * np.exp(-1))


def test_rejudge_share_zero_repeats_the_answer_one_redraws_it():
    reqs = [PointRequest("p", traj(0.0, 1), sample=s) for s in range(50)]
    fixed = OrdinalJudge(point_noise=1.0, rejudge_share=0.0).score_points(reqs)
    assert len(set(fixed)) == 1
    fresh = OrdinalJudge(point_noise=1.0, rejudge_share=1.0).score_points(reqs)
    assert len(set(fresh)) > 3
    again = OrdinalJudge(point_noise=1.0, rejudge_share=1.0).score_points(reqs)
    assert fresh == again  # a pure function of the request


def test_quality_map_and_bad_config_errors():
    j = OrdinalJudge(grid=(0, 1), cutpoints=[0.0], point_noise=0.0, quality_loc=1.7, quality_scale=0.5)
    assert j.score_points([PointRequest("p", traj(1.6)), PointRequest("p", traj(1.8))]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="cutpoints must be 9 finite non-decreasing"):
        OrdinalJudge(grid=(0, 9), cutpoints=[0.0, 1.0])
    with pytest.raises(ValueError, match="rejudge_share must be in"):
        OrdinalJudge(rejudge_share=2)
    with pytest.raises(ValueError, match="pair_noise must be a finite number >= 0"):
        OrdinalJudge(pair_noise=-1)
    with pytest.raises(ValueError, match="unknown parameter"):
        judges.build({"kind": "ordinal", "noise": 1})


@pytest.mark.parametrize("name", ["gpt4_llmbar", "chatgpt_llmbar", "gpt4turbo_mtbench"])
def test_fitted_presets_build_by_name_and_run_in_the_engine(name):
    assert name in judges.fitted()
    j = judges.get(name, seed=1)
    assert isinstance(j, OrdinalJudge) and j.seed == 1
    groups = simulate_groups(6, 8, seed=0)
    for reward in ("pointwise", "round_robin", "seeded_single_elim"):
        out = Engine(j, seed=0).run(get_reward(reward), groups)
        assert out.stats.failures == 0
        assert all(np.all(np.isfinite(r.advantage)) for r in out.results)
    assert judges.build({"kind": "ordinal", "grid": [0, 9]}).grid == (0, 9)


def test_unknown_judge_name_lists_presets_and_fitted():
    with pytest.raises(ValueError, match="registered: .*calibrated.*gpt4_llmbar"):
        judges.get("gpt5")
