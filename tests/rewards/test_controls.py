"""Control constructors (oracle, rank_oracle, pointwise_rank) and the trainer's per-step metrics:
logged every step to a real sqlite MLflow store; the oracle arm's advantages are the oracle's."""

import math

import numpy as np
import pytest
import torch
from conftest import make_group, random_groups, true_rank
from helpers import ROOT

from arenabench import Engine, Group, Trajectory, judges, rewards
from arenabench.advantages import rank_rewards, standardize
from arenabench.trainers.local import step_metrics
from arenabench.trainers.local.step_metrics import EXTRA_STEP_METRICS


class NoJudge:
    """A judge that must never be asked."""

    def judge_pairs(self, requests):
        raise AssertionError("an oracle control asked the judge")

    score_points = judge_pairs


def test_oracle_reward_is_true_quality_and_asks_no_judge():
    groups = random_groups(8, k=4, seed=1)
    out = Engine(NoJudge()).run(rewards.get("oracle"), groups)
    assert out.stats.judge_calls == 0
    for g, r in zip(groups, out.results, strict=True):
        q = np.array([t.meta["quality"] for t in g.trajectories])
        np.testing.assert_array_equal(r.reward, q)
        np.testing.assert_array_equal(r.advantage, standardize(q))
        np.testing.assert_array_equal(r.rank, true_rank(g))


def test_rank_oracle_ranks_are_the_ranks_of_true_quality():
    groups = random_groups(8, k=4, seed=2) + [make_group([0.3, 0.9, 0.3, 0.1], prompt="tied")]
    out = Engine(NoJudge()).run(rewards.get("rank_oracle"), groups)
    assert out.stats.judge_calls == 0
    for g, r in zip(groups[:-1], out.results[:-1], strict=True):
        np.testing.assert_array_equal(r.rank, true_rank(g))
        np.testing.assert_allclose(r.reward, 1 - true_rank(g) / 7)
        np.testing.assert_array_equal(r.advantage, standardize(rank_rewards(true_rank(g))))
    np.testing.assert_array_equal(out.results[-1].rank, [1.5, 0.0, 1.5, 3.0])  # ties share the mean rank


@pytest.mark.parametrize("name", ["oracle", "rank_oracle"])
def test_oracles_without_quality_raise_one_clear_error(name):
    g = Group("p", (Trajectory("a", "x", 1, {"quality": 1.0}), Trajectory("b", "y", 1, {})))
    with pytest.raises(ValueError, match=f"{name} is an oracle control.*missing for 1 of 2.*'b'"):
        Engine(NoJudge()).run(rewards.get(name), [g])


@pytest.mark.parametrize("judge", ["calibrated", "cot"])
@pytest.mark.parametrize("votes", [1, 3])
def test_pointwise_rank_has_the_pointwise_ranks_on_the_same_replies(judge, votes):
    groups = random_groups(8, k=6, seed=3, spread=0.05)  # a narrow band: judge noise reorders
    pw = Engine(judges.get(judge), seed=5).run(rewards.get("pointwise", votes=votes), groups, step=2)
    pr = Engine(judges.get(judge), seed=5).run(rewards.get("pointwise_rank", votes=votes), groups, step=2)
    assert pr.stats.judge_calls == pw.stats.judge_calls == 6 * 8 * votes
    for a, b in zip(pw.results, pr.results, strict=True):
        np.testing.assert_array_equal(b.rank, a.rank)
        np.testing.assert_array_equal(b.extra["score"], a.reward)  # the same judge replies
        np.testing.assert_allclose(b.reward, rank_rewards(a.rank))
        np.testing.assert_allclose(b.advantage, standardize(rank_rewards(a.rank)))


# --------------------------------------------------------------------------- step metrics


def _g(qs, texts=None):
    texts = texts or [f"t{i}" for i in range(len(qs))]
    return make_group(qs, texts=texts)


def test_oracle_alignment_convention_skips_constant_sides():
    a, b, c = _g([0.1, 0.5, 0.2]), _g([1.0, 1.0, 1.0]), _g([0.3, 0.1, 0.2])
    adv_a = standardize([0.1, 0.5, 0.2])  # perfect
    adv_b = np.array([1.0, -1.0, 0.0])  # quality constant: skipped
    adv_c = np.zeros(3)  # zero advantage: skipped
    m = step_metrics.oracle_alignment([a, b, c], [adv_a, adv_b, adv_c])
    assert m == {
        "adv_oracle_pearson": pytest.approx(1.0),
        "adv_oracle_kendall": 1.0,
        "adv_oracle_groups": 1.0,
    }
    rev = step_metrics.oracle_alignment([a, c], [-adv_a, standardize([0.3, 0.1, 0.2])])
    assert rev["adv_oracle_groups"] == 2.0
    assert rev["adv_oracle_pearson"] == pytest.approx((-1.0 + 1.0) / 2)
    assert rev["adv_oracle_kendall"] == pytest.approx((-1.0 + 1.0) / 2)
    none = step_metrics.oracle_alignment([b], [adv_b])
    assert none == {"adv_oracle_pearson": 0.0, "adv_oracle_kendall": 0.0, "adv_oracle_groups": 0.0}


def test_distinct_share():
    groups = [_g([0, 0, 0, 0], texts=["a", "a", "b", "c"]), _g([0, 0], texts=["x", "y"])]
    assert step_metrics.distinct_share(groups) == pytest.approx((3 / 4 + 1) / 2)


def test_token_entropy_matches_a_direct_computation():
    from arenabench.trainers.local.policy import TinyLM

    torch.manual_seed(0)
    model = TinyLM(6, 10, 16, 1, 2)
    prompts, responses = torch.randint(0, 6, (3, 4)), torch.randint(0, 6, (3, 5))
    got = step_metrics.token_entropy(model, prompts, responses, 0.7)
    with torch.no_grad():
        seq = torch.cat([prompts, responses], 1)
        p = torch.softmax(model(seq[:, :-1])[:, 3:] / 0.7, -1)
    want = float(-(p * p.log()).sum(-1).mean())
    assert got == pytest.approx(want, rel=1e-6) and 0 < got < math.log(6)


def test_sampled_eval_uses_its_own_fixed_generator():
    from arenabench.trainers.local.policy import TinyLM
    from arenabench.trainers.local.task import TASKS

    task = TASKS.get("preference", n_prompts=4)
    torch.manual_seed(0)
    model = TinyLM(task.vocab, task.prompt_len + task.response_len, 16, 1, 2)
    state = torch.get_rng_state()
    a = step_metrics.sampled_eval(model, task)
    assert torch.equal(state, torch.get_rng_state())  # the global stream is untouched
    assert step_metrics.sampled_eval(model, task) == a  # same policy, same draws
    assert step_metrics.sampled_eval(model, task, seed=1) != a


def test_new_metrics_are_logged_every_step_and_the_oracle_arm_is_aligned(tmp_path):
    """3 steps of the real trainer (oracle arm) into a temporary sqlite MLflow store."""
    from mlflow.tracking import MlflowClient
    from test_train import compose_cfg

    from arenabench.tracking import Tracker
    from arenabench.trainers.local.trainer import STEP_METRICS, train

    assert set(EXTRA_STEP_METRICS) <= set(STEP_METRICS)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = compose_cfg("reward=oracle", "steps=3", "eval_every=2", "tracking=none")
    with Tracker("metrics", run_name="oracle", uri=uri) as tr:
        final = train(cfg, tracker=tr, progress=False)
        run_id = tr.run_id
    assert final["judge_calls"] == 0
    client = MlflowClient(tracking_uri=uri)

    def hist(m):
        return sorted(client.get_metric_history(run_id, m), key=lambda h: h.step)

    for m in EXTRA_STEP_METRICS:
        assert [h.step for h in hist(m)] == [0, 1, 2], m
    for h in hist("adv_oracle_pearson"):
        assert abs(h.value - 1.0) <= 1e-9
    for h in hist("adv_oracle_kendall"):
        assert h.value == pytest.approx(1.0, abs=1e-12)
    assert all(h.value == cfg["prompts_per_step"] for h in hist("adv_oracle_groups"))
    assert all(0 < h.value <= math.log(cfg["task"]["vocab"]) for h in hist("entropy"))
    assert all(0 < h.value <= 1 for h in hist("distinct_share"))
    assert [h.step for h in hist("eval_sampled_quality")] == [0, 2]
    assert math.isfinite(final["eval_sampled_quality"])


def test_pointwise_budget_matches_seeded_single_elim_calls_at_n8():
    """conf/reward/pointwise_budget.yaml: votes = round((2N − 2)·2 / N) = 4 at N = 8."""

    import yaml

    cfg = yaml.safe_load((ROOT / "conf/reward/pointwise_budget.yaml").read_text())
    n, k = 8, 5
    assert cfg["name"] == "pointwise" and cfg["votes"] == round((2 * n - 2) * 2 / n) == 4
    groups = random_groups(n, k=k, seed=4)
    sse = Engine(judges.get("calibrated")).run(rewards.get("seeded_single_elim"), groups).stats.judge_calls
    pw = Engine(judges.get("calibrated")).run(rewards.get(**cfg), groups).stats.judge_calls
    assert sse == k * (2 * n - 2) * 2 == 140 and pw == k * n * 4 == 160
