"""Input fuzzing (hypothesis): every registered constructor, through the real engine, on hostile
groups and judges — group sizes 1..64, duplicate and empty texts, extreme lengths, NaN/inf
qualities, a judge whose replies are random (ties, NaN/±inf, huge scores, bad types,
probabilities outside [0, 1], failures, whole-batch errors, short batches), every simulated preset
(the integer-grid one ties often), a judge that fails every call and one that ties every call.

Contract: either a ``ValueError`` that says what is wrong, or per group finite advantages of the
group's length with zero mean (|mean| <= 1e-9 · max(1, max|A|)) and finite rewards; every unusable
judge reply is retried or counted as a failure (judge-side count == engine retries + failures).
"""

from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from arenabench import Engine, judges, rewards
from arenabench.judges.faults import FaultyJudge
from arenabench.types import Group, JudgeFailure, PairJudgment, Trajectory

# hostile inputs overflow on purpose (1.7e308 sums, NaN qualities): numpy warns, the contract holds
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SPECS = rewards.names() + ["rrc_scr:cara=true", "double_elim:seeding=anchor", "swiss:rounds=1"]
# examples per constructor: the file stays well under a minute on one core (the live arena fits
# Bradley-Terry once per arriving trace, N − 1 fits per group: slow at N = 64).
# ARENABENCH_FUZZ_SCALE=k multiplies every count for a deeper hunt.
EXAMPLES = {"default": 25, "reasoning_arena_live": 6, "reasoning_arena_full": 10, "adaptive": 10}
EXAMPLES = {k: v * int(os.environ.get("ARENABENCH_FUZZ_SCALE", "1")) for k, v in EXAMPLES.items()}
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

TEXTS = st.one_of(
    st.just(""),
    st.text(max_size=12),
    st.sampled_from(["same", "Answer: 42", "\\boxed{42}", "x" * 20_000]),
)
QUALITY = st.one_of(
    st.floats(-4, 4, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0]),
)
LENGTH = st.one_of(st.integers(0, 2_000), st.sampled_from([0, 1, 10**9]))
SIZE = st.one_of(st.integers(1, 8), st.integers(9, 64))


@st.composite
def group_lists(draw) -> list[Group]:
    out = []
    for g in range(draw(st.integers(1, 3))):
        n = draw(SIZE)
        pool = draw(st.lists(TEXTS, min_size=1, max_size=min(n, 6)))  # < n distinct: duplicates
        quality = draw(st.lists(QUALITY, min_size=len(pool), max_size=len(pool)))
        pick = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
        lengths = draw(st.lists(LENGTH, min_size=n, max_size=n))
        trajs = [
            Trajectory(f"g{g}-{i}", pool[k], lengths[i], {"quality": quality[k]}) for i, k in enumerate(pick)
        ]
        anchor = None if draw(st.integers(0, 7)) == 0 else draw(st.integers(0, n - 1))  # mostly one
        prompt = draw(st.sampled_from(["p", "", "p" * 500, f"prompt {g}"]))  # prompts may repeat
        meta = {"prompt_quality": draw(QUALITY), "answer": "42"}
        out.append(Group(prompt, tuple(trajs), anchor=anchor, meta=meta))
    return out


def _valid_score(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


class RandomJudge:
    """Replies drawn at random per request (a fresh draw per call, so retries can succeed), and
    counts every reply the engine must reject: ``bad`` (whole-batch errors count every request)."""

    PAIR_KINDS = ("ok", "tie", "nan", "inf", "-inf", "huge", "prob_out", "prob_nan", "none", "failure")

    def __init__(self, seed: int, p_bad: float, probs: bool, p_batch: float):
        self.rng = np.random.default_rng(seed)
        self.p_bad, self.probs, self.p_batch = p_bad, probs, p_batch
        self.bad = 0

    def _batch_error(self, n: int) -> str | None:
        u = self.rng.random()
        if u < self.p_batch / 2:
            return "raise"
        if u < self.p_batch:
            return "short"
        return None

    def _lost_batch(self, requests, filler) -> list | None:
        """None, or a whole-batch error: raised, or one reply short (every request counts as bad)."""
        err = self._batch_error(len(requests))
        if err is None:
            return None
        self.bad += len(requests)
        if err == "raise":
            raise ConnectionError("random judge: batch lost")
        return [filler] * (len(requests) - 1)

    def judge_pairs(self, requests):
        requests = list(requests)
        short = self._lost_batch(requests, PairJudgment(1.0, 0.0))
        if short is not None:
            return short
        out = []
        for _ in requests:
            kind = "ok" if self.rng.random() >= self.p_bad else str(self.rng.choice(self.PAIR_KINDS[1:]))
            a, b = (float(x) for x in self.rng.uniform(0, 10, 2))
            p = float(self.rng.random()) if self.probs else None
            rep = {
                "ok": PairJudgment(a, b, p),
                "tie": PairJudgment(5.0, 5.0, 0.5 if self.probs else None),
                "nan": PairJudgment(math.nan, b, p),
                "inf": PairJudgment(math.inf, b, p),
                "-inf": PairJudgment(a, -math.inf, p),
                "huge": PairJudgment(1.7e308, -1.7e308, p),  # sums and means overflow
                "prob_out": PairJudgment(a, b, 1.5),
                "prob_nan": PairJudgment(a, b, math.nan),
                "none": PairJudgment(None, b, p),  # type: ignore[arg-type]
                "failure": JudgeFailure("random failure"),
            }[kind]
            ok = (
                isinstance(rep, PairJudgment)
                and _valid_score(rep.score_a)
                and _valid_score(rep.score_b)
                and (rep.prob_a is None or (math.isfinite(rep.prob_a) and 0 <= rep.prob_a <= 1))
            )
            self.bad += not ok
            out.append(rep)
        return out

    def score_points(self, requests):
        requests = list(requests)
        short = self._lost_batch(requests, 0.5)
        if short is not None:
            return short
        out = []
        for _ in requests:
            u = self.rng.random()
            if u >= self.p_bad:
                rep = float(self.rng.random())
            else:
                rep = [0.5, math.nan, math.inf, 1.7e308, -1.7e308, None, JudgeFailure("x")][int(u * 1e6) % 7]
            ok = _valid_score(rep)
            self.bad += not ok
            out.append(rep)
        return out


JUDGES = st.one_of(
    st.builds(
        RandomJudge,
        seed=st.integers(0, 2**32 - 1),
        p_bad=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
        probs=st.booleans(),
        p_batch=st.sampled_from([0.0, 0.2, 1.0]),
    ),
    st.sampled_from(judges.presets()).map(judges.get),  # the integer preset ties often
    st.builds(judges.FailingJudge),  # every call fails
    st.builds(judges.ConstantJudge),  # every comparison ties
    st.builds(
        lambda preset, rate, seed: FaultyJudge(judges.get(preset), rate=rate, seed=seed),
        st.sampled_from(judges.presets()),
        st.sampled_from([0.2, 0.6, 1.0]),
        st.integers(0, 1000),
    ),
)


def check_results(out, groups) -> None:
    assert len(out.results) == len(groups)
    for res, g in zip(out.results, groups, strict=True):
        adv = np.asarray(res.advantage, dtype=float)
        assert adv.shape == (len(g),) and np.asarray(res.rank).shape == (len(g),)
        assert np.all(np.isfinite(adv)), (res.advantage, res.flags)
        assert np.all(np.isfinite(res.reward)), (res.reward, res.flags)
        scale = max(1.0, float(np.abs(adv).max()))
        assert abs(adv.mean()) <= 1e-9 * scale, (adv.mean(), res.flags)
        assert res.failures >= 0 and res.retries >= 0
        if res.failures:
            assert f"judge_failures:{res.failures}" in res.flags


def fuzz_one(spec, groups, judge, retries, votes) -> None:
    try:
        constructor = rewards.from_spec(f"{spec}:votes={votes}")
    except ValueError:  # a constructor without a votes parameter of its own
        constructor = rewards.from_spec(spec)
    engine = Engine(judge, max_retries=retries)
    try:
        out = engine.run(constructor, groups)
    except ValueError as exc:  # a clear error: it names the constructor or the judge at fault
        msg = str(exc)
        assert any(name in msg for name in rewards.names()) or "judge" in msg, msg
        return
    check_results(out, groups)
    if isinstance(judge, RandomJudge):
        assert judge.bad == out.stats.retries + out.stats.failures
    elif isinstance(judge, FaultyJudge):  # its inner judge fails too on NaN qualities
        assert judge.faulted <= out.stats.retries + out.stats.failures


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS)
def test_constructor_survives_hostile_inputs(spec):
    """Each constructor gets its own reproducible stream of examples (seeded by its name)."""

    @seed(zlib.crc32(spec.encode()))
    @settings(FUZZ, max_examples=EXAMPLES.get(spec, EXAMPLES["default"]))
    @given(groups=group_lists(), judge=JUDGES, retries=st.integers(0, 2), votes=st.integers(1, 2))
    def fuzz(groups, judge, retries, votes):
        fuzz_one(spec, groups, judge, retries, votes)

    fuzz()


# --------------------------------------------------------------------------- what fuzzing found


class Constant:
    """Every pairwise reply ``pair``, every pointwise reply from ``points`` in turn."""

    def __init__(self, pair, points=(0.5,)):
        self.pair, self.points = pair, points

    def judge_pairs(self, requests):
        return [self.pair for _ in requests]

    def score_points(self, requests):
        return [self.points[k % len(self.points)] for k in range(len(requests))]


def _group(n=5) -> Group:
    trajs = tuple(Trajectory(f"t{i}", f"text {i}", 10, {"quality": 0.0}) for i in range(n))
    return Group("p", trajs, anchor=0, meta={"answer": "42", "prompt_quality": 0.0})


def test_a_non_numeric_score_is_a_counted_failure_not_a_crash():
    """Found by fuzzing: ``PairJudgment(None, 1.0)`` made the engine's validation raise TypeError."""
    out = Engine(Constant(PairJudgment(None, 1.0)), max_retries=1).run(  # type: ignore[arg-type]
        rewards.get("round_robin"), [_group(3)]
    )
    assert out.stats.failure_reasons == {"non-numeric score": 6} and out.stats.retries == 6
    assert not np.any(out.results[0].advantage) and "judge_failures:6" in out.results[0].flags


def test_scores_near_the_float_limit_give_finite_advantages():
    """Found by fuzzing: pointwise scores of ±1.7e308 squared to inf in the group std (NaN
    advantages), and a 2-vote mean of 1.7e308 overflowed to an infinite reward."""
    g = _group(5)
    alternating = Engine(Constant(None, (1.7e308, -1.7e308))).run(rewards.get("pointwise"), [g]).results[0]
    assert (
        np.all(np.isfinite(alternating.advantage)) and alternating.advantage[0] > 0 > alternating.advantage[1]
    )
    one = Engine(Constant(None, (1.7e308,) * 4 + (0.0, 0.0, 1.0, 1.0, 0.5, 0.5))).run(
        rewards.get("pointwise", votes=2), [g]
    )
    res = one.results[0]  # trajectories 0 and 1 average to inf: unranked and flagged, not ±inf
    assert np.all(np.isfinite(res.advantage)) and "non_finite_reward:2" in res.flags
    assert (
        res.advantage[0] == res.advantage[1] == 0.0 and res.advantage[2] < res.advantage[4] < res.advantage[3]
    )
