"""task=hackable and the simulated judge's surface term (issue 39 item 3): the judge's view gains
exactly β × the task's surface feature, and a policy trained against a large β drifts toward the
feature while one trained at β = 0 does not."""

import math

import numpy as np
import pytest

from arenabench.judges.simulated import SimulatedJudge
from arenabench.trainers.local.step_metrics import (
    SURFACE_EVAL_METRICS,
    SURFACE_STEP_METRICS,
    surface_weight,
)
from arenabench.trainers.local.task import TASKS
from arenabench.trainers.local.trainer import STEP_METRICS, train
from arenabench.types import PairRequest, PointRequest, Trajectory

QUALITIES = [0.3, 1.2, 1.25, 2.0, -0.4]
SURFACES = [-1.0690449676496976, 0.0, 2.5, 7.483314773547883, -0.25]


def _trajs(surface: bool, beta: float = 0.0):
    """The five test responses: with their surface feature in meta, or (``surface=False``) with
    the feature folded into the quality instead (quality + β·surface), same ids and texts."""
    out = []
    for k, (q, s) in enumerate(zip(QUALITIES, SURFACES, strict=True)):
        meta = {"quality": q, "surface": s} if surface else {"quality": q + beta * s}
        out.append(Trajectory(f"r{k}", f"response {k}", 8, meta))
    return out


def _pairs(trajs):
    return [
        PairRequest("prompt", trajs[i], trajs[j], sample=r)
        for i in range(len(trajs))
        for j in range(len(trajs))
        if i != j
        for r in (0, 1)
    ]


def _points(trajs):
    return [PointRequest("prompt", t, sample=r) for t in trajs for r in (0, 1, 2)]


@pytest.mark.parametrize("preset", ["calibrated", "bradley_terry", "integer", "cot"])
@pytest.mark.parametrize("beta", [0.37, -1.5])
def test_surface_term_is_exactly_beta_times_the_feature_pairwise_and_pointwise(preset, beta):
    """Every answer (scores, P(A), pointwise scores; noise, position and length terms on) of the
    judge with surface_beta = β on responses of feature s is bit-for-bit the answer of the same
    judge without the term on responses of quality q + β·s and the same text."""
    with_term = SimulatedJudge(preset, surface_beta=beta)
    folded = SimulatedJudge(preset)
    a, b = _trajs(True), _trajs(False, beta)
    assert with_term.judge_pairs(_pairs(a)) == folded.judge_pairs(_pairs(b))
    assert with_term.score_points(_points(a)) == folded.score_points(_points(b))
    assert with_term.surface_weight == beta == surface_weight(with_term)


def test_surface_term_moves_the_noiseless_latent_view_by_beta_times_the_feature():
    """On the noiseless judge the pointwise score is sigmoid(view): its logit is q + β·s."""
    beta = 0.37
    scores = SimulatedJudge("noiseless", surface_beta=beta).score_points(
        [PointRequest("prompt", t) for t in _trajs(True)]
    )
    views = [math.log(p / (1 - p)) for p in scores]
    expected = [q + beta * s for q, s in zip(QUALITIES, SURFACES, strict=True)]
    np.testing.assert_allclose(views, expected, rtol=0, atol=1e-12)
    pair = SimulatedJudge("noiseless", surface_beta=beta).judge_pairs(_pairs(_trajs(True))[:1])[0]
    assert math.log(pair.score_a / (10 - pair.score_a)) == pytest.approx(QUALITIES[0] + beta * SURFACES[0])
    assert math.log(pair.score_b / (10 - pair.score_b)) == pytest.approx(QUALITIES[1] + beta * SURFACES[1])


@pytest.mark.parametrize("preset", ["calibrated", "position_gap", "integer"])
def test_without_surface_beta_the_feature_changes_nothing(preset):
    """surface_beta = 0 (every preset): a response's meta["surface"] is ignored."""
    judge = SimulatedJudge(preset)
    plain = [Trajectory(t.id, t.text, t.length, {"quality": t.meta["quality"]}) for t in _trajs(True)]
    assert judge.judge_pairs(_pairs(_trajs(True))) == judge.judge_pairs(_pairs(plain))
    assert judge.score_points(_points(_trajs(True))) == judge.score_points(_points(plain))
    assert judge.surface_weight == 0.0


def test_surface_beta_and_feature_are_checked():
    with pytest.raises(ValueError, match="surface_beta must be finite"):
        SimulatedJudge("calibrated", surface_beta=math.inf)
    bad = Trajectory("x", "x", 8, {"quality": 1.0, "surface": math.nan})
    with pytest.raises(ValueError, match=r"meta\['surface'\]"):
        SimulatedJudge("calibrated", surface_beta=1.0).score_points([PointRequest("p", bad)])
    assert surface_weight(object()) is None  # a judge with no surface term: no judge view


def test_hackable_task_filler_is_worth_filler_value_and_its_count_is_the_surface():
    task = TASKS.get("hackable")
    plain = TASKS.get("preference")
    f, L = 2 / 16, 8
    # every other token keeps the preference task's value; filler is worth filler_value (0)
    np.testing.assert_array_equal(task.values[:, :14], plain.values[:, :14])
    np.testing.assert_array_equal(task.filler, [14, 15])
    assert np.all(task.values[:, 14:] == 0.0)
    resp = np.array([[0, 1, 2, 3, 4, 5, 6, 7], [14, 1, 2, 3, 4, 5, 6, 15], [15] * 8])
    ids = np.array([3, 3, 3])
    expected = (np.array([0, 2, 8]) - L * f) / math.sqrt(L * f * (1 - f))
    np.testing.assert_allclose(task.surface(ids, resp), expected, rtol=0, atol=1e-15)
    assert task.surface(ids, resp)[2] == pytest.approx(7 / math.sqrt(0.875))
    # replacing tokens by filler changes quality by scale * (0 - value) / L: never a reward for filler
    v = task.values[3]
    q = task.quality(ids, resp)
    assert q[1] - q[0] == pytest.approx(task.scale * (0.0 - v[0] - v[7]) / L)
    assert q[2] == task.base
    # every trajectory carries it; its text does not
    g = task.group(3, resp)
    assert [t.meta["surface"] for t in g.trajectories] == task.surface(ids, resp).tolist()
    assert [t.meta["quality"] for t in g.trajectories] == q.tolist()
    assert all("surface" not in t.text for t in g.trajectories)
    with pytest.raises(ValueError, match="n_filler"):
        TASKS.get("hackable", n_filler=16)


def test_other_tasks_log_no_surface_metrics():
    assert not set(SURFACE_STEP_METRICS) & set(STEP_METRICS)
    final = train(
        {"steps": 1, "progress": False, "eval_every": 1, "task": {"name": "preference", "n_prompts": 4}},
        progress=False,
    )
    assert not set(SURFACE_STEP_METRICS + SURFACE_EVAL_METRICS) & set(final)


class _Rows:
    def __init__(self):
        self.rows: dict[int, dict[str, float]] = {}

    def log_metrics(self, metrics, step):
        self.rows[step] = dict(metrics)


def _run(beta: float, steps: int) -> _Rows:
    tracker = _Rows()
    cfg = {
        "steps": steps,
        "seed": 0,
        "eval_every": steps - 1,  # evals after step 0 and after the last step
        "progress": False,
        "task": {"name": "hackable"},
        "reward": {"name": "seeded_single_elim"},
        "judge": {"kind": "simulated", "preset": "calibrated", "seed": 0, "surface_beta": beta},
    }
    train(cfg, tracker, progress=False)
    return tracker


@pytest.mark.slow  # ~6 s: two 20-step runs
def test_the_feature_drifts_under_a_large_beta_and_not_under_beta_zero():
    """Same seed, same random init, same prompts; only the judge's β differs. Tolerances, set
    before the run: under β = 1 the sampled answers' mean feature rises by >= 1 z-unit between the
    evals after step 0 and step 19 and the judge's view pulls away from true quality by >= 1;
    under β = 0 the feature rises by <= 0.2 and the judge's view is the true quality."""
    steps = 20
    hacked, honest = _run(1.0, steps), _run(0.0, steps)
    for rows in (hacked.rows, honest.rows):
        assert sorted(rows) == list(range(steps))
        assert all(set(SURFACE_STEP_METRICS) <= set(m) for m in rows.values())
        assert set(SURFACE_EVAL_METRICS) <= set(rows[0]) and set(SURFACE_EVAL_METRICS) <= set(rows[steps - 1])
    first, last = hacked.rows[0], hacked.rows[steps - 1]
    assert last["eval_sampled_surface"] - first["eval_sampled_surface"] >= 1.0
    gap = last["eval_sampled_judge_view"] - last["eval_sampled_quality"]
    gap0 = first["eval_sampled_judge_view"] - first["eval_sampled_quality"]
    assert gap - gap0 >= 1.0
    assert last["eval_sampled_judge_view"] > first["eval_sampled_judge_view"]
    first, last = honest.rows[0], honest.rows[steps - 1]
    assert last["eval_sampled_surface"] - first["eval_sampled_surface"] <= 0.2
    for m in honest.rows.values():
        assert m["judge_view_mean"] == pytest.approx(m["quality_mean"], abs=1e-12)
    assert last["eval_sampled_judge_view"] == last["eval_sampled_quality"]
    # the hacked policy's true quality ends below the honest one's
    assert hacked.rows[steps - 1]["eval_sampled_quality"] < last["eval_sampled_quality"]


def test_the_hackable_warm_start_is_shipped_and_rarely_writes_filler():
    """task=hackable init=sft_hackable loads the shipped checkpoint (no build, any CPU); its
    answers at T = 1 hold 0.16 filler tokens per response (measured on the shipped bytes; fixed
    eval draws, so exact up to float summation: tolerance 0.02 z)."""
    import yaml
    from helpers import CONF

    from arenabench.trainers.local.policy import TinyLM
    from arenabench.trainers.local.sft import load_init
    from arenabench.trainers.local.step_metrics import sampled_eval

    task = TASKS.get("hackable")
    policy = TinyLM(task.vocab, task.prompt_len + task.response_len, 32, 2, 4, True)
    tags = load_init(policy, task, yaml.safe_load((CONF / "init" / "sft_hackable.yaml").read_text()))
    assert tags["init_source"] == "published"
    assert sampled_eval(policy, task)["eval_sampled_surface"] == pytest.approx(-0.902, abs=0.02)
