"""PRC: the pairwise-probability reward."""

import numpy as np
import pytest
from conftest import make_group

from arenabench import Engine, judges, rewards
from arenabench.sim import simulate_groups
from arenabench.types import PairJudgment


def test_prc_reward_is_the_mean_probability_over_both_orders():
    class Fixed:
        """P(A) = 0.8 when rollout 1 is shown first, 0.4 when it is shown second."""

        def judge_pairs(self, requests):
            return [PairJudgment(5.0, 5.0, 0.8 if r.a.id.endswith("-1") else 0.4) for r in requests]

    group = make_group([0.0, 1.0], anchor=0)
    r = Engine(Fixed()).run(rewards.get("prc"), [group]).results[0]
    # order (1, 0): P(1 better) = 0.8; order (0, 1): P(0 better) = 0.4 → P(1 better) = 0.6
    np.testing.assert_allclose(r.reward, [0.5, 0.7])
    assert r.judge_calls == 2


def test_prc_saturates_under_chain_of_thought():
    groups = simulate_groups(400, 8, seed=0)
    cot = Engine(judges.get("cot")).run(rewards.get("prc"), groups).results
    cal = Engine(judges.get("calibrated")).run(rewards.get("prc"), groups).results
    share = np.mean([r.extra["summary"]["prob_extreme"] for r in cot])
    assert 0.86 <= share <= 0.91  # RRC measured 88.3%
    assert np.mean([r.extra["summary"]["prob_extreme"] for r in cal]) < 0.6
    hist = sum(r.extra["prob_hist"] for r in cot)
    assert hist.sum() == 400 * 7 * 2 and hist[0] + hist[-1] > 0.85 * hist.sum()


def test_prc_needs_a_judge_with_probabilities():
    class ScoresOnly:
        def judge_pairs(self, requests):
            return [PairJudgment(5.0, 4.0) for _ in requests]

    with pytest.raises(ValueError, match="reports P\\(A is better\\)"):
        Engine(ScoresOnly()).run(rewards.get("prc"), [make_group([0.0, 1.0])])
