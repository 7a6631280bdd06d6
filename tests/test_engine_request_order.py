"""The order a lockstep wave's pairwise requests reach the judge (``Engine(request_order=...)``):
``prefix`` keeps requests sharing a prompt prefix adjacent, and no judgment depends on the order."""

from __future__ import annotations

import numpy as np
import pytest

from arenabench import judges, rewards
from arenabench.engine import REQUEST_ORDERS, Engine, prefix_order
from arenabench.judges.stack import JudgeStack
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest, Trajectory


class _Recording:
    """A judge that keeps every batch it is sent, in order (answers from ``inner``)."""

    def __init__(self, inner):
        self.inner = inner
        self.batches: list[list] = []

    def judge_pairs(self, requests):
        self.batches.append(list(requests))
        return self.inner.judge_pairs(requests)

    def score_points(self, requests):
        return self.inner.score_points(requests)


def _t(name: str) -> Trajectory:
    return Trajectory(name, f"text of {name}")


def test_prefix_order_groups_by_query_then_trajectory_a_in_first_appearance_order():
    a, b, c = _t("a"), _t("b"), _t("c")
    reqs = [
        PairRequest("q1", a, b),  # 0
        PairRequest("q1", b, a),  # 1
        PairRequest("q2", a, c),  # 2
        PairRequest("q1", a, c),  # 3
        PairRequest("q1", c, a),  # 4
        PairRequest("q2", c, a),  # 5
        PairRequest("q1", b, c),  # 6
        PairRequest("q1", a, b, sample=1),  # 7
    ]
    # q1 first (A = a, then b, then c, each in asked order), then q2 (A = a, then c)
    assert prefix_order(reqs) == [0, 3, 7, 1, 6, 4, 2, 5]
    assert prefix_order([]) == []


@pytest.mark.parametrize("spec", ["round_robin", "seeded_single_elim", "anchor"])
def test_the_judge_receives_each_wave_in_prefix_order(spec):
    groups = simulate_groups(3, 8, seed=4)
    rec = {o: _Recording(judges.get("calibrated")) for o in REQUEST_ORDERS}
    for order, judge in rec.items():
        Engine(judge, request_order=order).run(rewards.get(spec), groups)
    asked, prefix = rec["asked"].batches, rec["prefix"].batches
    assert len(asked) == len(prefix) > 0
    for sent_asked, sent_prefix in zip(asked, prefix, strict=True):
        assert sent_prefix == [sent_asked[i] for i in prefix_order(sent_asked)]  # the same requests
        runs = [(r.prompt, r.a.key) for r in sent_prefix]
        seen, last = set(), None
        for key in runs:  # each (query, A) is one contiguous run
            assert key == last or key not in seen
            seen.add(key)
            last = key
    if spec == "round_robin":  # the asked order alternates A within a match's two orders
        assert [(r.prompt, r.a.key) for r in asked[0]] != [(r.prompt, r.a.key) for r in prefix[0]]


SPECS = [
    "round_robin",
    "seeded_single_elim",
    "anchor",
    "swiss",
    "double_elim",
    "rrc_scr",
    "reasoning_arena_live",
]


@pytest.mark.parametrize("spec", SPECS)
def test_rewards_and_accounting_do_not_depend_on_the_order(spec, tmp_path):
    """Each reply lands at its own request's index: rewards, advantages, flags and the engine's
    accounting are bit-identical, with injected faults (retried) and a judgment cache in play."""
    groups = simulate_groups(4, 8, seed=7)
    out = {}
    for order in REQUEST_ORDERS:
        faults = {"rate": 0.2, "seed": 3}
        stack = JudgeStack(judges.get("integer"), cache=str(tmp_path / f"{order}.sqlite"), faults=faults)
        engine = Engine(stack, seed=5, request_order=order)
        out[order] = [engine.run(rewards.get(spec), groups, step=s) for s in range(2)]  # step 1: cache hits
    for a, b in zip(out["asked"], out["prefix"], strict=True):
        for ra, rb in zip(a.results, b.results, strict=True):
            assert np.array_equal(ra.reward, rb.reward, equal_nan=True)
            assert np.array_equal(ra.advantage, rb.advantage, equal_nan=True)
            assert np.array_equal(ra.rank, rb.rank, equal_nan=True) and ra.flags == rb.flags
            counts = ("comparisons", "judge_calls", "waves", "failures", "retries", "lost")
            assert [getattr(ra, k) for k in counts] == [getattr(rb, k) for k in counts]
        assert a.stats == b.stats
    assert out["asked"][0].stats.retries > 0  # the faults were in play


def test_prefix_order_is_the_default():
    """results/bench/prefix_reuse.md: never more prefill computed on vLLM, less under a tight cache."""
    assert Engine(judges.get("calibrated")).request_order == "prefix"


def test_unknown_request_order_names_the_valid_ones():
    with pytest.raises(ValueError, match="asked, prefix"):
        Engine(judges.get("calibrated"), request_order="sorted")
