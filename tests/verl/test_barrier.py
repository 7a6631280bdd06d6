"""The group barrier: interleaved concurrent arrivals, one engine run per flush, timeouts."""

import asyncio
import random
import time

import numpy as np
import pytest

from arenabench import judges, rewards
from arenabench.engine import Engine
from arenabench.trainers.scoring import hash_quality
from arenabench.trainers.verl.barrier import GroupBarrier
from arenabench.trainers.verl.scoring import ArenaScorer, Response
from arenabench.types import Group, Trajectory

TEXTS = {
    "a": ["alpha one", "alpha two two", "alpha three", "alpha four four four"],
    "b": ["beta one", "beta two", "beta three three", "beta four"],
}


def scorer(constructor="round_robin"):
    return ArenaScorer({"name": constructor}, {"kind": "simulated", "preset": "noiseless", "quality": "hash"})


def response(uid, k):
    return Response(text=TEXTS[uid][k], prompt=f"prompt {uid}", n_tokens=len(TEXTS[uid][k].split()))


def expected(uid, members, constructor="round_robin"):
    trajs = tuple(
        Trajectory(
            f"{k}", TEXTS[uid][k], len(TEXTS[uid][k].split()), {"quality": hash_quality(TEXTS[uid][k])}
        )
        for k in members
    )
    return Engine(judges.get("noiseless")).run(
        rewards.get(constructor), [Group(f"prompt {uid}", trajs, anchor=0)]
    )


def test_interleaved_concurrent_arrivals_give_each_group_its_rewards():
    rng = random.Random(0)
    arrivals = [(uid, k) for uid in "ab" for k in range(4)]
    rng.shuffle(arrivals)  # a, b interleaved in a random order
    delays = {a: rng.uniform(0, 0.05) for a in arrivals}
    s = scorer()
    barrier = GroupBarrier(s, timeout_s=30)

    async def one(uid, k):
        await asyncio.sleep(delays[(uid, k)])
        return (uid, k), await barrier.submit(uid, 4, response(uid, k), order=k)

    async def run():
        return dict(await asyncio.gather(*(one(*a) for a in arrivals)))

    got = asyncio.run(run())
    for uid in "ab":
        res = expected(uid, range(4)).results[0]
        adv = [got[(uid, k)]["reward_score"] for k in range(4)]
        np.testing.assert_allclose(adv, res.advantage, atol=1e-12)
        assert sorted(adv) != [0.0] * 4
        assert all(
            got[(uid, k)]["reward_extra_info"]["arena_judge_calls"] == 12 for k in range(4)
        )  # 6 pairs x 2
        assert all(got[(uid, k)]["reward_extra_info"]["arena_timed_out"] == 0 for k in range(4))
    assert barrier.stats.groups == 2 and barrier.pending == {}


def test_groups_ready_together_share_one_engine_run():
    s = scorer()
    barrier = GroupBarrier(s, timeout_s=30)

    async def run():
        # a and b interleaved with no delay: both close before the flusher first runs
        order = [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]
        return await asyncio.gather(*(barrier.submit(u, 4, response(u, k), order=k) for u, k in order))

    outs = asyncio.run(run())
    assert barrier.stats.flushes == 1 and s.runs == 1
    assert {o["reward_extra_info"]["arena_flush_groups"] for o in outs} == {2.0}
    # one wave for round-robin: both groups' 24 pair requests went out as one judge batch
    assert s.totals == {"judge_calls": 24, "failures": 0, "groups": 2, "waves": 1}


def test_a_missing_sibling_times_out_cleanly_and_a_late_one_is_scored_alone():
    s = scorer()
    barrier = GroupBarrier(s, timeout_s=0.3)

    async def run():
        t0 = time.monotonic()
        present = [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 3)]  # b:2 never comes
        outs = await asyncio.gather(*(barrier.submit(u, 4, response(u, k), order=k) for u, k in present))
        waited = time.monotonic() - t0
        late = await barrier.submit("b", 4, response("b", 2), order=2)
        return dict(zip(present, outs, strict=True)), waited, late

    got, waited, late = asyncio.run(run())
    assert 0.3 <= waited < 5.0
    res_a = expected("a", range(4)).results[0]
    np.testing.assert_allclose([got[("a", k)]["reward_score"] for k in range(4)], res_a.advantage, atol=1e-12)
    assert got[("a", 0)]["reward_extra_info"]["arena_timed_out"] == 0
    # b is scored with the three members that arrived: N = 3 normalization, flagged
    res_b = expected("b", [0, 1, 3]).results[0]
    adv_b = [got[("b", k)]["reward_score"] for k in (0, 1, 3)]
    np.testing.assert_allclose(adv_b, res_b.advantage, atol=1e-12)
    assert np.mean(adv_b) == pytest.approx(0.0, abs=1e-12)
    assert np.std(adv_b) == pytest.approx(1.0, abs=1e-5)  # population std, ε = 1e-6
    info = got[("b", 0)]["reward_extra_info"]
    assert (info["arena_timed_out"], info["arena_group_size"], info["arena_judge_calls"]) == (1.0, 3.0, 6.0)
    # the straggler: alone, zero advantage, no judge call
    assert late["reward_score"] == 0.0
    assert (
        late["reward_extra_info"]["arena_late"] == 1.0 and late["reward_extra_info"]["arena_judge_calls"] == 0
    )
    assert (barrier.stats.timed_out, barrier.stats.missing, barrier.stats.late) == (1, 1, 1)


def test_a_scorer_error_reaches_every_waiting_caller():
    def broken(groups):
        raise RuntimeError("judge down")

    barrier = GroupBarrier(broken, timeout_s=30)

    async def run():
        return await asyncio.gather(*(barrier.submit("a", 2, k) for k in range(2)), return_exceptions=True)

    outs = asyncio.run(run())
    assert [str(o) for o in outs] == ["judge down", "judge down"]
    with pytest.raises(ValueError, match="timeout_s"):
        GroupBarrier(broken, timeout_s=0)
