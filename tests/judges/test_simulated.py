"""Simulated judges: monotone when noiseless, the stated noise models, biases, calibration."""

import numpy as np
import pytest
from scipy.stats import norm

from arenabench import Trajectory, judges
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest, PointRequest


def traj(q, i=0, length=512):
    return Trajectory(f"t{i}", f"text {i}", length, {"quality": q})


def test_noiseless_scores_strictly_monotone_and_opponent_free():
    j = judges.get("noiseless")
    qs = np.linspace(-3, 6, 40)  # includes the saturated top of the pointwise scale
    pts = j.score_points([PointRequest("p", traj(q, i)) for i, q in enumerate(qs)])
    assert np.all(np.diff(pts) > 0)
    opp = traj(0.3, 999)
    a = [x.score_a for x in j.judge_pairs([PairRequest("p", traj(q, i), opp) for i, q in enumerate(qs)])]
    assert np.all(np.diff(a) > 0)
    # a side's score does not depend on whom it faces
    s = {j.judge_pairs([PairRequest("p", traj(1.0, 1), traj(q, 2))])[0].score_a for q in (-1.0, 0.0, 2.0)}
    assert len(s) == 1


@pytest.mark.parametrize(
    "model,cdf", [("thurstone", norm.cdf), ("bradley_terry", lambda z: 1 / (1 + np.exp(-z)))]
)
def test_pairwise_win_probability_follows_the_noise_model(model, cdf):
    sigma, delta, m = 0.3, 0.2, 20000
    j = judges.get("calibrated", noise_model=model, pair_noise=sigma, position_bias=0.0, length_bias=0.0)
    a, b = traj(1.0 + delta, 1), traj(1.0, 2)
    res = j.judge_pairs([PairRequest("p", a, b, sample=s) for s in range(m)])
    p = np.mean([r.score_a > r.score_b for r in res])
    assert p == pytest.approx(cdf(delta / sigma), abs=4 * np.sqrt(0.25 / m))


def test_position_bias_favours_the_first_slot():
    j = judges.get("calibrated", position_bias=0.1)
    a, b = traj(1.0, 1), traj(1.0, 2)
    res = j.judge_pairs([PairRequest("p", a, b, sample=s) for s in range(4000)])
    assert np.mean([r.score_a > r.score_b for r in res]) > 0.6


def test_length_bias_favours_longer():
    j = judges.get("noiseless", length_bias=0.1)
    r = j.judge_pairs([PairRequest("p", traj(1.0, 1, length=2000), traj(1.0, 2, length=200))])[0]
    assert r.score_a > r.score_b


def test_same_request_same_answer_new_sample_new_draw():
    j = judges.get("calibrated")
    a, b = traj(1.0, 1), traj(1.1, 2)
    x = j.judge_pairs([PairRequest("p", a, b, 0), PairRequest("p", a, b, 0), PairRequest("p", a, b, 1)])
    assert x[0] == x[1] and x[0] != x[2]
    assert judges.get("calibrated", seed=1).judge_pairs([PairRequest("p", a, b, 0)])[0] != x[0]


def test_calibrated_preset_matches_the_seed_figures():
    """In-group pointwise std ≈ 0.03 vs re-judging noise std ≈ 0.02 (ArenaRL Fig. 1a)."""
    j = judges.get("calibrated")
    group_std, noise_std = [], []
    for g in simulate_groups(300, 8, seed=11):
        s = j.score_points([PointRequest(g.prompt, t) for t in g.trajectories])
        group_std.append(np.std(s))
        r = j.score_points([PointRequest(g.prompt, g.trajectories[1], v) for v in range(8)])
        noise_std.append(np.std(r, ddof=1))
    assert 0.025 <= np.mean(group_std) <= 0.035
    assert 0.018 <= np.sqrt(np.mean(np.square(noise_std))) <= 0.022


def test_pointwise_resolution_collapses_as_quality_rises():
    """The same latent gap is worth less pointwise score near the top of the scale."""
    j = judges.get("noiseless")
    gap = [
        np.diff(j.score_points([PointRequest("p", traj(q)), PointRequest("p", traj(q + 0.2, 1))]))[0]
        for q in (0.0, 1.7, 4.0)
    ]
    assert gap[0] > gap[1] > gap[2] > 0


@pytest.mark.parametrize("field", ["pair_noise", "point_noise"])
def test_negative_noise_is_one_clear_error(field):
    with pytest.raises(ValueError, match=f"{field} must be a finite number >= 0"):
        judges.get("calibrated", **{field: -0.1})


def test_bad_preset_and_model_name_the_choices():
    with pytest.raises(
        ValueError, match="registered: bradley_terry, calibrated, cot, integer, noiseless.*'calibrated'"
    ):
        judges.get("calibrted")
    with pytest.raises(ValueError, match="thurstone, bradley_terry"):
        judges.get("calibrated", noise_model="gauss")
    with pytest.raises(TypeError, match="valid: "):
        judges.get("calibrated", temperature=1.0)


def test_missing_quality_is_a_clear_error():
    with pytest.raises(KeyError, match="meta\\['quality'\\]"):
        judges.get("calibrated").score_points([PointRequest("p", Trajectory("x", "t", 1))])


def test_gap_dependent_position_bias_is_b0_exp_minus_gap_over_s():
    """Noiseless, so the scores show the bias exactly: slot A's latent quality gets
    b0·exp(−|Δ|/s), slot B's nothing, whichever side is better."""
    b0, s = 0.1, 0.15
    j = judges.get("noiseless", position_bias=b0, position_gap_scale=s)
    for qa, qb in ((1.0, 1.0), (1.0, 1.3), (1.3, 1.0), (0.0, 2.0)):
        r = j.judge_pairs([PairRequest("p", traj(qa, 1), traj(qb, 2))])[0]
        bias = b0 * np.exp(-abs(qa - qb) / s)
        assert r.score_a == pytest.approx(10 / (1 + np.exp(-(qa + bias))), rel=1e-12)
        assert r.score_b == pytest.approx(10 / (1 + np.exp(-qb)), rel=1e-12)


def test_position_gap_preset_slot_a_wins_three_in_four_at_zero_gap_and_fades():
    """At Δ = 0 slot A wins with P = Φ(b0/σ) = Φ(2/3) = 0.748; at Δ = 0.6 (4 s) the bias is
    e^-4 of b0, and the win rate of the worse side in slot A is the unbiased Φ(−0.6/0.15)."""
    j = judges.get("position_gap", length_bias=0.0)
    m = 20000
    for delta, expected in ((0.0, norm.cdf(0.1 / 0.15)), (-0.6, norm.cdf((-0.6 + 0.1 * np.exp(-4)) / 0.15))):
        res = j.judge_pairs(
            [PairRequest("p", traj(1.0 + delta, 1), traj(1.0, 2), sample=k) for k in range(m)]
        )
        p = np.mean([r.score_a > r.score_b for r in res])
        assert p == pytest.approx(expected, abs=4 * np.sqrt(0.25 / m))


def test_position_gap_scale_must_be_positive():
    with pytest.raises(ValueError, match="position_gap_scale must be None"):
        judges.get("calibrated", position_gap_scale=0.0)
