"""Issue 31 (1): every judge reply is validated and normalized once, where it enters the engine.

A user's judge (a table lookup, a model head) often returns numpy scalars; the engine turns any
real number type into a Python float, so every topology and aggregation gives exactly what the
same judge returning floats gives. NaN, ±inf, a bool, a string or None is a failure with its
reason, retried like any other and then counted — never a crash, never a silent tie.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import make_group

from arenabench import Engine, judges, rewards
from arenabench.aggregation import AGGREGATIONS
from arenabench.diagnostics import tie_rate
from arenabench.types import (
    JudgeFailure,
    PairJudgment,
    Rank,
    RankJudgment,
    pair_reply,
    point_reply,
    rank_reply,
)

CASTS = {
    "float32": np.float32,
    "float64": np.float64,
    "int64": lambda x: np.int64(round(float(x))),  # an integer rubric's 0–10 scores
}


def specs() -> list[str]:
    """Every registered constructor, and every aggregation of those that take one."""
    out = []
    for name in rewards.names():
        out.append(name)
        fields = {f.name for f in dataclasses.fields(rewards.get(name))}
        if "aggregation" in fields:
            out += [f"{name}:aggregation={a}" for a in AGGREGATIONS]
    return out


class Typed:
    """The calibrated judge with every score passed through ``cast`` (a numpy scalar type) —
    or, with ``plain``, through ``cast`` and back to ``float``: the reference the engine's
    normalization must reproduce exactly."""

    def __init__(self, cast, plain: bool = False):
        self.inner = judges.get("calibrated", seed=3)
        self.cast = (lambda x: float(cast(x))) if plain else cast

    def judge_pairs(self, requests):
        c = self.cast
        return [
            PairJudgment(c(j.score_a), c(j.score_b), None if j.prob_a is None else c(j.prob_a))
            for j in self.inner.judge_pairs(requests)
        ]

    def score_points(self, requests):
        return [self.cast(x) for x in self.inner.score_points(requests)]

    def rank_lists(self, requests):
        return [RankJudgment(tuple(map(self.cast, j.scores))) for j in self.inner.rank_lists(requests)]


def _groups():
    rng = np.random.default_rng(7)
    return [make_group(1.7 + 0.3 * rng.standard_normal(n), anchor=0, prompt=f"np{n}") for n in (5, 8)]


@pytest.mark.parametrize("dtype", list(CASTS))
def test_numpy_scores_give_what_floats_give_through_every_topology_and_aggregation(dtype):
    groups = _groups()
    for spec in specs():
        got = Engine(Typed(CASTS[dtype]), seed=1).run(rewards.from_spec(spec), groups)
        want = Engine(Typed(CASTS[dtype], plain=True), seed=1).run(rewards.from_spec(spec), groups)
        assert got.stats.failures == 0, (spec, got.stats.failure_reasons)
        assert got.stats.health == want.stats.health, spec
        for a, b in zip(got.results, want.results, strict=True):
            np.testing.assert_array_equal(a.advantage, b.advantage, err_msg=spec)
            np.testing.assert_array_equal(a.rank, b.rank, err_msg=spec)
            assert a.flags == b.flags and a.judge_calls == b.judge_calls, spec


def test_numpy_scores_on_the_pipelined_schedule():
    groups = _groups()
    cons = rewards.get("seeded_single_elim")
    got = Engine(Typed(np.float32), schedule="pipelined").run(cons, groups)
    want = Engine(Typed(np.float32, plain=True), schedule="lockstep").run(cons, groups)
    for a, b in zip(got.results, want.results, strict=True):
        np.testing.assert_array_equal(a.advantage, b.advantage)


def test_what_the_engine_hands_on_is_a_float():
    j, why = pair_reply(PairJudgment(np.float32(7.5), np.int64(5), np.float64(0.25)))
    assert why is None and j == PairJudgment(7.5, 5.0, 0.25)
    assert all(type(v) is float for v in (j.score_a, j.score_b, j.prob_a))
    assert pair_reply(PairJudgment(Fraction(15, 2), 5))[0] == PairJudgment(7.5, 5.0)
    assert point_reply(np.float16(0.5)) == (0.5, None) and type(point_reply(np.int8(3))[0]) is float


BAD = {
    "nan": (math.nan, "non-finite score"),
    "numpy inf": (np.float64(np.inf), "non-finite score"),
    "huge int": (10**400, "non-finite score"),
    "bool": (True, "bool score"),
    "numpy bool": (np.bool_(False), "bool score"),
    "str": ("7", "non-numeric score"),
    "None": (None, "non-numeric score"),
    "list": ([7.0], "bad reply type list"),
}


@pytest.mark.parametrize("bad", list(BAD))
def test_a_bad_score_is_a_retried_counted_failure_with_its_reason(bad):
    value, reason = BAD[bad]
    assert pair_reply(PairJudgment(value, 5.0)) == (None, reason)
    if value is not None:  # prob_a None: the judge reports no probability, which is valid
        assert pair_reply(PairJudgment(5.0, 5.0, value))[1] == (
            "probability outside [0, 1]" if reason == "non-finite score" else reason
        )
    assert point_reply(value) == (None, reason)

    class Bad:
        def judge_pairs(self, requests):
            return [PairJudgment(value, 5.0) for _ in requests]

        def score_points(self, requests):
            return [value for _ in requests]

    g = make_group([1.0, 2.0, 3.0], anchor=0)
    for name, asked in (("round_robin", 6), ("pointwise", 3)):
        out = Engine(Bad(), max_retries=1).run(rewards.get(name), [g])
        assert out.stats.failure_reasons == {reason: asked} and out.stats.retries == asked, name
        r = out.results[0]
        assert not np.any(r.advantage) and f"judge_failures:{asked}" in r.flags, name


def test_probabilities_outside_the_unit_interval_and_judge_failures_keep_their_reasons():
    assert pair_reply(PairJudgment(1.0, 2.0, np.float32(1.5)))[1] == "probability outside [0, 1]"
    assert pair_reply(JudgeFailure("timeout")) == (None, "timeout")
    assert pair_reply(7.0) == (None, "bad reply type float")


def test_tie_rate_reads_numpy_replies_as_the_engine_does():
    groups = _groups()
    got = tie_rate(Typed(CASTS["int64"]), groups)
    want = tie_rate(Typed(CASTS["int64"], plain=True), groups)
    assert got == want and got["failures"] == 0 and got["match_tie_rate"] > 0


# --- listwise replies (issue 41: the ranking kind) --------------------------------------------


def test_rank_reply_normalizes_real_numbers_to_floats():
    got, why = rank_reply(RankJudgment((np.int64(2), np.float32(0.5), 1)), 3)
    assert why is None and got.scores == (2.0, 0.5, 1.0)
    assert all(type(v) is float for v in got.scores)


@pytest.mark.parametrize(
    ("reply", "k", "reason"),
    [
        (JudgeFailure("timeout"), 3, "timeout"),
        (PairJudgment(1.0, 0.0), 2, "bad reply type PairJudgment"),
        (0.5, 2, "bad reply type float"),
        (RankJudgment((1.0, 0.0)), 3, "ranking of 2 items for a list of 3"),
        (RankJudgment((1.0, math.nan, 0.0)), 3, "non-finite score"),
        (RankJudgment((1.0, True)), 2, "bool score"),
        (RankJudgment((1.0, "2")), 2, "non-numeric score"),
    ],
)
def test_rank_reply_rejects_what_carries_no_ranking(reply, k, reason):
    assert rank_reply(reply, k) == (None, reason)


def test_rank_asks_k_distinct_items():
    with pytest.raises(ValueError, match="k >= 2 distinct"):
        Rank(items=(1,))
    with pytest.raises(ValueError, match="k >= 2 distinct"):
        Rank(items=(1, 1, 2))
    assert Rank(items=(3, 0, 2)).items == (3, 0, 2)
