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


@pytest.mark.parametrize(
    "name",
    [
        "gpt4_llmbar",
        "chatgpt_llmbar",
        "gpt4turbo_mtbench",
        "gpt4_llmbar_persistent",
        "chatgpt_llmbar_persistent",
    ],
)
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


# --- persistent and surface error (issue 39) --------------------------------------------------------


def test_defaults_reproduce_the_judge_without_the_new_terms_bit_for_bit():
    groups = simulate_groups(4, 6, seed=3)
    reqs = [PairRequest(g.prompt, a, b) for g in groups for a in g.trajectories for b in g.trajectories]
    pts = [PointRequest(g.prompt, t) for g in groups for t in g.trajectories]
    kw = dict(point_noise=0.4, pair_noise=0.6, position_bias=0.1, rejudge_share=0.3, seed=5)
    old, new = OrdinalJudge(**kw), OrdinalJudge(**kw, persistent_sd=0.0, surface_beta=0.0)
    # a surface feature is ignored at beta = 0
    for g in groups:
        for t in g.trajectories:
            t.meta["surface"] = 1.5
    assert old.judge_pairs(reqs) == new.judge_pairs(reqs)
    assert old.score_points(pts) == new.score_points(pts)


def test_persistent_error_is_one_draw_per_response_in_every_comparison_order_and_format():
    j = OrdinalJudge(persistent_sd=1.0, seed=7)
    ts = [traj(0.0, i) for i in range(6)]
    base = OrdinalJudge(seed=7)
    eps = j.view(ts, np.full(6, 11, dtype=np.uint64)) - base.view(ts, np.full(6, 11, dtype=np.uint64))
    assert len(set(np.round(eps, 12))) == 6  # differs between responses
    again = j.view(ts[::-1], np.full(6, 11, dtype=np.uint64))
    assert np.array_equal(again[::-1], eps)  # the same whatever it is judged beside
    # through the protocol: equal true quality, no per-call noise, no position bias: the verdict
    # is sign(eps_a - eps_b) in both shown orders, and the score order follows the same eps
    k = OrdinalJudge(
        persistent_sd=1.0,
        pair_noise=0.0,
        point_noise=0.0,
        seed=7,
        grid=(0, 1000),
        cutpoints=np.linspace(-4, 4, 1000),
    )
    e = {
        t.id: k.persistent(np.array([_pk("p")], dtype=np.uint64), np.array([t.key], dtype=np.uint64))[0]
        for t in ts
    }
    pairs = [(a, b) for a in ts for b in ts if a is not b]
    res = k.judge_pairs([PairRequest("p", a, b) for a, b in pairs])
    for (a, b), r in zip(pairs, res, strict=True):
        assert r.score_a == float(e[a.id] > e[b.id])
    scores = k.score_points([PointRequest("p", t) for t in ts])
    assert np.argsort(scores).tolist() == np.argsort([e[t.id] for t in ts]).tolist()
    # another prompt or another seed: another draw
    other = k.persistent(np.array([_pk("q")], dtype=np.uint64), np.array([ts[0].key], dtype=np.uint64))[0]
    assert other != e[ts[0].id]
    # spread: N(0, 1) over many responses (seeded, tolerance 4 standard errors)
    many = j.persistent(np.zeros(4000, dtype=np.uint64), np.arange(4000, dtype=np.uint64))
    assert abs(many.mean()) < 4 / np.sqrt(4000) and abs(many.std() - 1) < 4 / np.sqrt(2 * 4000)


def _pk(prompt):
    from arenabench.judges.simulated import _prompt_keys

    return _prompt_keys([PointRequest(prompt, traj(0.0))])[0]


def test_the_surface_term_moves_the_view_by_exactly_beta_times_the_feature():
    ts = [
        Trajectory(f"t{i}", f"x{i}", 10, {"quality": 0.5 * i, "surface": s})
        for i, s in enumerate([-1.25, 0.0, 2.0])
    ]
    ts.append(Trajectory("t9", "x9", 10, {"quality": 0.5}))  # no feature: 0
    ts.append(Trajectory("t8", "x8", 10, {"quality": 0.5, "surface": {"length": 0.75, "emoji": 9.0}}))
    pk = np.zeros(len(ts), dtype=np.uint64)
    beta = 0.375
    got = OrdinalJudge(surface_beta=beta).view(ts, pk) - OrdinalJudge().view(ts, pk)
    assert got.tolist() == [beta * -1.25, 0.0, beta * 2.0, 0.0, beta * 0.75]
    # the pairwise call reads the same view: two equal responses, the one with the feature wins
    a = Trajectory("a", "aa", 10, {"quality": 1.0, "surface": 0.5})
    b = Trajectory("b", "bb", 10, {"quality": 1.0})
    j = OrdinalJudge(surface_beta=0.2, pair_noise=1.0)
    p = j.judge_pairs([PairRequest("p", a, b)])[0].prob_a
    j0 = OrdinalJudge(pair_noise=1.0)
    p0 = j0.judge_pairs([PairRequest("p", a, b)])[0].prob_a
    assert norm.ppf(p) - norm.ppf(p0) == pytest.approx(0.2 * 0.5, abs=1e-9)


def test_persistent_and_surface_config_errors_and_overrides():
    with pytest.raises(ValueError, match="persistent_sd must be a finite number >= 0"):
        OrdinalJudge(persistent_sd=-0.1)
    with pytest.raises(ValueError, match="surface_beta must be finite"):
        OrdinalJudge(surface_beta=float("nan"))
    j = judges.build({"kind": "ordinal", "persistent_sd": 0.5, "surface_beta": 0.25})
    assert (j.persistent_sd, j.surface_beta, j.surface_feature) == (0.5, 0.25, "length")
