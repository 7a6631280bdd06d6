"""arenabench.stats (pure functions) and ``arenabench compare --stats/--baseline/--reach`` on fake
runs logged through the real Tracker into a temporary sqlite MLflow store, checked against a
computation by hand with numpy/scipy."""

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from arenabench import cli
from arenabench.stats import curve_auc, paired_t, reach_target, steps_to_reach, t_interval


def test_t_interval_matches_scipy():
    x = np.array([0.61, 0.70, 0.55, 0.68])
    ci = t_interval(x, 0.95)
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    assert ci["mean"] == pytest.approx(x.mean()) and ci["n"] == 4
    assert (ci["lo"], ci["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    one = t_interval([0.5])
    assert one["mean"] == 0.5 and math.isnan(one["lo"]) and math.isnan(one["hi"])
    assert t_interval([0.5, math.nan, 0.7])["n"] == 2  # NaN dropped
    with pytest.raises(ValueError, match="confidence level"):
        t_interval(x, 95)


def test_paired_t_matches_ttest_rel():
    a, b = np.array([0.8, 0.7, 0.9, 0.75, 0.6]), np.array([0.7, 0.72, 0.8, 0.6, 0.5])
    d = a - b
    got = paired_t(a, b, 0.9)
    half = sps.t.ppf(0.95, 4) * d.std(ddof=1) / np.sqrt(5)
    assert got["mean"] == pytest.approx(d.mean())
    assert (got["lo"], got["hi"]) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))
    assert got["p"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert math.isnan(paired_t([1.0], [0.0])["p"])
    with pytest.raises(ValueError, match="equal-length"):
        paired_t([1.0, 2.0], [1.0])


def test_curve_auc_is_the_time_average():
    assert curve_auc([0, 10], [0.0, 1.0]) == pytest.approx(0.5)
    # uneven steps: (1+3)/2·2 + (3+3)/2·8 over a span of 10
    assert curve_auc([0, 2, 10], [1.0, 3.0, 3.0]) == pytest.approx((4 + 24) / 10)
    assert curve_auc([5], [0.7]) == 0.7 and math.isnan(curve_auc([], []))


def test_steps_to_reach_both_directions():
    steps, up = [0, 10, 20, 30], [0.2, 0.4, 0.5, 0.9]
    assert reach_target(0.2, 0.6, 0.5) == pytest.approx(0.4)
    assert steps_to_reach(steps, up, 0.4) == 10
    assert steps_to_reach(steps, up, 0.45) == 20
    assert math.isnan(steps_to_reach(steps, up, 1.0))
    down = [1.0, 0.8, 0.3, 0.2]  # a loss-like curve: reaching means falling to the target
    assert steps_to_reach(steps, down, 0.5) == 20


# --------------------------------------------------------------------------- compare on fake runs

STEPS = [0, 5, 10, 20]
SEEDS = [0, 1, 2]
ARMS = {"pointwise": 0.0, "seeded_single_elim": 0.08, "oracle": 0.2}  # lift over pointwise
CALLS = {"pointwise": 64.0, "seeded_single_elim": 224.0, "oracle": 0.0}
PER_CALL = {
    "judge_prompt_tokens_total": 700,
    "judge_cached_prompt_tokens_total": 500,
    "judge_completion_tokens_total": 20,
}


def fake_curve(arm: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, len(arm)])
    base = np.array([0.50, 0.58, 0.63, 0.70]) + ARMS[arm] * np.array([0.0, 0.5, 0.8, 1.0])
    return base + 0.03 * rng.standard_normal(len(STEPS))


def log_run(uri, experiment, arm, seed, curve, sweep="s1"):
    from arenabench.tracking import Tracker

    tags = {"constructor": arm, "setting": f"reward={arm}", "seed": str(seed), "sweep": sweep}
    with Tracker(experiment, run_name=f"{arm} seed={seed}", tags=tags, uri=uri) as tr:
        for k, (step, v) in enumerate(zip(STEPS, curve, strict=True)):
            tokens = {m: n * CALLS[arm] * (k + 1) for m, n in PER_CALL.items()}  # run totals
            tr.log_metrics({"eval_quality": v, "judge_calls": CALLS[arm] * (k + 1), **tokens}, step=step)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"
    for arm in ARMS:
        for seed in SEEDS:
            log_run(uri, "fake", arm, seed, fake_curve(arm, seed))
    for seed in (0, 1):  # an arm that lacks seed 2
        log_run(uri, "partial", "pointwise", seed, fake_curve("pointwise", seed))
        log_run(uri, "partial", "oracle", seed, fake_curve("oracle", seed))
    log_run(uri, "partial", "pointwise", 2, fake_curve("pointwise", 2))
    return uri


def by_hand(reach: float) -> dict:
    """What compare must print, computed directly from the fake curves."""
    out = {}
    for arm in ARMS:
        finals, aucs, reached = [], [], []
        for s in SEEDS:
            v, base = fake_curve(arm, s), fake_curve("pointwise", s)
            finals.append(v[-1])
            aucs.append(np.trapezoid(v, STEPS) / (STEPS[-1] - STEPS[0]))
            target = v[0] + reach * (base[-1] - v[0])
            hit = v >= target if target >= v[0] else v <= target
            reached.append(STEPS[int(np.argmax(hit))] if hit.any() else np.nan)
        out[arm] = {"final": np.array(finals), "auc": np.array(aucs), "reach_step": np.array(reached)}
    return out


def compare_json(capsys, *args):
    assert cli.main(["compare", "--metric", "eval_quality", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_compare_baseline_paired_differences_equal_a_hand_computation(store, capsys):
    out = compare_json(
        capsys,
        "-e",
        "fake",
        "--uri",
        store,
        "--by",
        "constructor",
        "--baseline",
        "pointwise",
        "--reach",
        "0.5",
    )
    assert out["settings"]["baseline"] == "pointwise" and out["settings"]["level"] == 0.95
    arms = {r["arm"]: r for r in out["arms"]}
    assert [r["arm"] for r in out["arms"]][0] == "pointwise"  # the baseline first
    hand = by_hand(0.5)
    t = sps.t.ppf(0.975, len(SEEDS) - 1)
    for arm, row in arms.items():
        assert row["n"] == 3
        assert row["judge_calls"] == pytest.approx(CALLS[arm] * len(STEPS))  # final cumulative
        for m, n in PER_CALL.items():  # the token bill beside the calls
            assert row[m] == pytest.approx(n * CALLS[arm] * len(STEPS))
        for q in ("final", "auc", "reach_step"):
            x = hand[arm][q][~np.isnan(hand[arm][q])]  # a run that never reached is left out
            half = t * x.std(ddof=1) / np.sqrt(len(x))
            assert row[q] == pytest.approx(x.mean()), (arm, q)
            if np.ptp(x) > 0:
                assert row[f"{q}_lo"] == pytest.approx(x.mean() - half), (arm, q)
                assert row[f"{q}_hi"] == pytest.approx(x.mean() + half), (arm, q)
            if arm == "pointwise":
                assert row[f"d_{q}"] is None and row[f"p_{q}"] is None
                continue
            if q == "reach_step":
                continue  # checked below, over the seeds where both reached
            d = x - hand["pointwise"][q]
            dh = t * d.std(ddof=1) / np.sqrt(len(d))
            assert row[f"d_{q}"] == pytest.approx(d.mean()), (arm, q)
            assert row[f"d_{q}_lo"] == pytest.approx(d.mean() - dh), (arm, q)
            assert row[f"d_{q}_hi"] == pytest.approx(d.mean() + dh), (arm, q)
            assert row[f"p_{q}"] == pytest.approx(sps.ttest_rel(x, hand["pointwise"][q]).pvalue), (arm, q)
        assert row["reached"] == int(np.isfinite(hand[arm]["reach_step"]).sum())
    # the oracle arm is clearly better at the end: a small p-value, a CI above 0
    assert arms["oracle"]["d_final_lo"] > 0 and arms["oracle"]["p_final"] < 0.05


def test_compare_baseline_by_reward_name_in_the_setting_and_text_formats(store, capsys):
    """The default grouping (setting = "reward=<name>") finds --baseline pointwise too."""
    out = compare_json(capsys, "-e", "fake", "--uri", store, "--baseline", "pointwise")
    assert out["arms"][0]["arm"] == "reward=pointwise" and len(out["arms"]) == 3
    for fmt in ("table", "markdown", "csv"):
        assert cli.main(["compare", "-e", "fake", "--uri", store, "--metric", "eval_quality",
                         "--baseline", "pointwise", "--reach", "0.5", "--format", fmt]) == 0  # fmt: skip
        text = capsys.readouterr().out
        assert "reward=oracle" in text
        if fmt != "csv":
            assert "final [95% CI]" in text and "Δfinal vs reward=pointwise" in text
            assert "prefill_tokens" in text and "cached_tokens" in text and "decode_tokens" in text


def test_compare_stats_without_baseline_reaches_its_own_final(store, capsys):
    out = compare_json(capsys, "-e", "fake", "--uri", store, "--by", "constructor", "--reach", "1.0")
    for row in out["arms"]:
        assert row["reached"] == 3 and "d_final" not in row
        # each run reaches its own final at the latest on the last step
        assert row["reach_step"] <= STEPS[-1]


def test_compare_refuses_unmatched_seeds(store, capsys):
    rc = cli.main(["compare", "-e", "partial", "--uri", store, "--metric", "eval_quality",
                   "--by", "constructor", "--baseline", "pointwise"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "seeds do not match" in err and "'oracle' has seeds ['0', '1']" in err
    rc = cli.main(["compare", "-e", "fake", "--uri", store, "--metric", "eval_quality",
                   "--by", "constructor", "--baseline", "rrc"])  # fmt: skip
    assert rc == 2 and "baseline 'rrc' is not one of the arms" in capsys.readouterr().err


def test_a_run_selection_names_the_same_runs_as_the_arguments_that_make_it(store):
    """Every reader takes its runs as one ``RunSelection`` (store, experiment, sweep, unfinished
    runs, filters) or as the arguments that make one: the same frames, ``attrs`` included; both at
    once is one error."""
    import pandas as pd

    from arenabench.compare import RunSelection, arm_stats, load_runs, metric_curves, run_values, runs_table

    sel = RunSelection("fake", uri=store, where={"constructor": ["pointwise", "oracle"]})
    args = {"uri": store, "where": {"constructor": ["pointwise", "oracle"]}}
    for by_selection, by_args in [
        (arm_stats(sel, "eval_quality", baseline="pointwise"),
         arm_stats("fake", "eval_quality", baseline="pointwise", **args)),
        (metric_curves(sel, "eval_quality"), metric_curves("fake", "eval_quality", **args)),
        (run_values(sel, "eval_quality"), run_values("fake", "eval_quality", **args)),
        (runs_table(sel, ["eval_quality"]), runs_table("fake", ["eval_quality"], **args)),
        (RunSelection("fake", uri=store).runs(), load_runs("fake", uri=store)),
    ]:  # fmt: skip
        pd.testing.assert_frame_equal(by_selection, by_args)
        assert by_selection.attrs.keys() == by_args.attrs.keys()
    assert len(run_values(sel, "eval_quality")) == 6  # the filter holds: two arms of three seeds
    with pytest.raises(ValueError, match="name the runs once"):
        arm_stats(sel, "eval_quality", uri=store)
