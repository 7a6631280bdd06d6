"""The pipelined engine schedule (issue 17): every group advances on its own, the results are
lockstep's, the shared in-flight limit holds, and ``auto`` keeps lockstep for batch judges."""

import asyncio
import dataclasses

import numpy as np
import pytest

from arenabench import Engine, judges, rewards
from arenabench.engine import build_engine
from arenabench.judges.faults import FaultyJudge
from arenabench.judges.latency import ServedJudge, run_virtual
from arenabench.sim import simulate_groups
from arenabench.types import Group

SPECS = rewards.names() + ["rrc_scr:cara=true", "double_elim:seeding=anchor"]
# per-request kinds only: FaultyJudge's ``raise`` is drawn per batch, so it depends on how
# requests are batched, which is exactly what the two schedules do differently
REQUEST_FAULTS = ("timeout", "malformed", "nan")


def _same_results(a, b, batches_too: bool = False) -> None:
    for x, y in zip(a.results, b.results, strict=True):
        np.testing.assert_array_equal(x.advantage, y.advantage)
        np.testing.assert_array_equal(x.reward, y.reward)
        np.testing.assert_array_equal(x.rank, y.rank)
        assert (x.comparisons, x.judge_calls, x.waves, x.failures, x.retries) == (
            y.comparisons,
            y.judge_calls,
            y.waves,
            y.failures,
            y.retries,
        )
        assert x.flags == y.flags
        assert repr(x.extra) == repr(y.extra)
    sa, sb = dataclasses.asdict(a.stats), dataclasses.asdict(b.stats)
    if not batches_too:
        sa.pop("judge_batches"), sb.pop("judge_batches")
    assert sa == sb


def _served(preset="calibrated", faults=False, slots=4, seed=0):
    inner = judges.get(preset)
    if faults:
        inner = FaultyJudge(inner, rate=0.3, seed=1, kinds=REQUEST_FAULTS)
    # a wide length spread: replies come back in a very different order from the asks
    return ServedJudge(inner, slots=slots, length_sigma=1.5, seed=seed)


@pytest.mark.parametrize("faults", [False, True], ids=["clean", "faults"])
@pytest.mark.parametrize("spec", SPECS)
def test_pipelined_equals_lockstep_under_random_latency(spec, faults):
    groups = simulate_groups(3, 8, seed=5)
    lock = Engine(_served(faults=faults), schedule="lockstep").run(rewards.from_spec(spec), groups, step=1)
    judge = _served(faults=faults)
    pipe, _ = run_virtual(Engine(judge, max_inflight=5).arun(rewards.from_spec(spec), groups, step=1))
    _same_results(lock, pipe)
    assert judge.max_outstanding <= 5
    assert pipe.stats.judge_batches == pipe.stats.judge_calls  # one request per call


@pytest.mark.parametrize("spec", ["seeded_single_elim", "reasoning_arena_live", "pointwise", "swiss"])
def test_pipelined_with_a_sync_judge_in_a_worker_thread(spec):
    """A judge without ``ajudge_pairs`` is called from a worker thread; Engine.run drives the loop."""
    groups = simulate_groups(3, 7, seed=2)

    def judge():
        return FaultyJudge(judges.get("integer"), rate=0.3, seed=4, kinds=REQUEST_FAULTS)

    lock = Engine(judge(), schedule="lockstep").run(rewards.from_spec(spec), groups, step=2)
    pipe = Engine(judge(), schedule="pipelined").run(rewards.from_spec(spec), groups, step=2)
    _same_results(lock, pipe)


@pytest.mark.parametrize("limit", [1, 3, 16])
def test_shared_inflight_limit_is_never_exceeded_and_is_reached(limit):
    judge = ServedJudge(judges.get("calibrated"), slots=None, seed=3)  # the server never queues
    groups = simulate_groups(6, 8, seed=0)
    run_virtual(Engine(judge, max_inflight=limit).arun(rewards.get("seeded_single_elim"), groups))
    assert judge.max_outstanding == judge.max_running == limit


def test_auto_schedule_by_backend():
    assert Engine(judges.get("calibrated")).resolved_schedule == "lockstep"
    assert Engine(FaultyJudge(judges.get("calibrated"))).resolved_schedule == "lockstep"
    assert Engine(ServedJudge(judges.get("calibrated"))).resolved_schedule == "pipelined"
    assert Engine(ServedJudge(judges.get("calibrated")), schedule="lockstep").resolved_schedule == "lockstep"
    assert Engine(judges.get("calibrated"), schedule="pipelined").resolved_schedule == "pipelined"
    assert Engine(None).resolved_schedule == "lockstep"
    with pytest.raises(ValueError, match="schedule"):
        Engine(judges.get("calibrated"), schedule="eager")
    with pytest.raises(ValueError, match="max_inflight"):
        Engine(judges.get("calibrated"), max_inflight=0)


def test_build_engine_passes_the_adapters_options_and_rejects_bad_ones():
    """One builder for the options every trainer adapter passes (local, verl, TRL)."""
    judge = ServedJudge(judges.get("calibrated"))
    engine = build_engine(
        judge, seed=np.int64(7), max_retries=3.0, schedule="lockstep", max_inflight=5, max_failed_share=None
    )
    assert isinstance(engine, Engine) and engine.judge is judge and engine.pointwise_judge is judge
    assert (engine.seed, engine.max_retries, engine.schedule, engine.max_inflight) == (7, 3, "lockstep", 5)
    assert type(engine.seed) is int and type(engine.max_retries) is int
    default = build_engine(judge)
    assert (default.seed, default.max_retries, default.schedule, default.max_inflight) == (0, 2, "auto", None)
    assert default.resolved_schedule == "pipelined"
    with pytest.raises(ValueError, match=r"^schedule must be one of lockstep, pipelined, auto; got 'eager'$"):
        build_engine(judge, schedule="eager")
    share = r"^max_failed_share must be a number in \[0, 1\] or null; got 1\.5$"
    with pytest.raises(ValueError, match=share):
        build_engine(judge, max_failed_share=1.5)
    with pytest.raises(ValueError, match="max_retries"):
        build_engine(judge, max_retries=-1)


@pytest.mark.parametrize("spec", ["seeded_single_elim", "pointwise", "reasoning_arena_live"])
def test_a_trainers_judge_stack_around_a_served_judge_stays_pipelined(spec, tmp_path):
    """cache → faults → served judge (what a trainer builds from ``judge.cache`` / ``judge.faults``)
    pipelines under ``auto``, answers as lockstep does, respects the limit, and a rerun on the
    cache sends the server nothing."""
    from arenabench.judges.stack import JudgeStack

    groups = simulate_groups(4, 8, seed=3)
    faults = {"rate": 0.3, "seed": 1, "kinds": list(REQUEST_FAULTS)}

    def stack(cache):
        return JudgeStack(ServedJudge(judges.get("calibrated"), slots=4, length_sigma=1.5), cache, faults)

    lock = Engine(stack(str(tmp_path / "lock.sqlite")), schedule="lockstep").run(
        rewards.from_spec(spec), groups, step=1
    )
    first = stack(str(tmp_path / "j.sqlite"))
    assert Engine(first).resolved_schedule == "pipelined" and first.prefers_pipelined
    assert Engine(first, max_inflight=3).inflight_limit == 3
    pipe, _ = run_virtual(Engine(first, max_inflight=3).arun(rewards.from_spec(spec), groups, step=1))
    _same_results(lock, pipe)
    assert first.base.max_outstanding <= 3 and first.base.requests > 0
    assert len(first.latencies) == pipe.stats.judge_batches  # the stack times each async call
    again = stack(str(tmp_path / "j.sqlite"))
    rerun, _ = run_virtual(Engine(again, max_inflight=3).arun(rewards.from_spec(spec), groups, step=1))
    for x, y in zip(lock.results, rerun.results, strict=True):  # same rewards; fewer retries paid
        np.testing.assert_array_equal(x.advantage, y.advantage)
    # every request that succeeded on some attempt was cached under its (attempt-free) key; the
    # rest fail again on the same deterministic fault draws: the server is asked nothing
    assert again.base.requests == 0 and again.stats["cache_hits"] > 0


def test_wrappers_are_only_as_asynchronous_as_their_judge():
    from arenabench.judges.stack import JudgeStack

    sync = JudgeStack(judges.get("calibrated"), faults={"rate": 0.1})
    assert getattr(sync, "ajudge_pairs", None) is None and not sync.prefers_pipelined
    assert Engine(sync).resolved_schedule == "lockstep"  # the simulated judges stay in lockstep
    served = JudgeStack(ServedJudge(judges.get("calibrated")), faults={"rate": 0.1})
    assert served.ajudge_pairs is not None and served.prefers_pipelined


def test_inflight_limit_defaults_to_the_judges_concurrency():
    class J:
        max_concurrency = 7

    assert Engine(J()).inflight_limit == 7
    assert Engine(J(), max_inflight=3).inflight_limit == 3
    assert Engine(judges.get("calibrated")).inflight_limit == 64


def test_identical_requests_in_flight_are_sent_once():
    """Two groups with the same prompt and texts ask the same requests at the same time."""
    g = simulate_groups(1, 8, seed=9)[0]
    twin = Group(g.prompt, g.trajectories, anchor=g.anchor, meta=g.meta)
    for schedule in ("lockstep", "pipelined"):
        judge = ServedJudge(judges.get("calibrated"), slots=None)
        out = Engine(judge, schedule=schedule).run(rewards.get("round_robin"), [g, twin])
        assert out.stats.requests == 2 * 56
        assert out.stats.judge_calls == judge.requests == 56
        assert out.stats.dedup_hits == 56
        assert out.results[0].judge_calls == 56 and out.results[1].judge_calls == 0  # the first asker pays
        np.testing.assert_array_equal(out.results[0].advantage, out.results[1].advantage)


def test_pipelined_inside_a_running_loop_and_in_real_time():
    groups = simulate_groups(2, 4, seed=1)
    ref = Engine(judges.get("calibrated"), schedule="lockstep").run(rewards.get("swiss"), groups)

    async def main():  # Engine.run from a coroutine: the step runs in a helper thread
        return Engine(ServedJudge(judges.get("calibrated"), per_token_s=1e-6, prefill_s=0.0)).run(
            rewards.get("swiss"), groups
        )

    _same_results(ref, asyncio.run(main()))


def test_a_failing_constructor_error_propagates():
    with pytest.raises(ValueError, match="pointwise judge"):
        Engine(None, schedule="pipelined").run(rewards.get("pointwise"), simulate_groups(1, 4))


def test_pipelined_beats_lockstep_on_a_heavy_tailed_served_judge():
    """The point of the schedule, on the virtual clock (exact): a multi-wave constructor's step
    is shorter, and the served judge busier, when no group waits for another's slowest reply."""
    groups = simulate_groups(16, 8, seed=0)
    spec = "seeded_single_elim"
    judge = ServedJudge(judges.get("calibrated"), slots=16)
    Engine(judge, schedule="lockstep").run(rewards.get(spec), groups)
    lock_s, busy = judge.clock, judge.busy_s
    judge.reset()
    _, pipe_s = run_virtual(Engine(judge, max_inflight=16).arun(rewards.get(spec), groups))
    assert judge.busy_s == pytest.approx(busy)  # the same work
    assert pipe_s < 0.9 * lock_s
    assert judge.utilization(pipe_s) > judge.utilization(lock_s)


def test_slots_go_to_the_group_furthest_behind_then_first_come():
    """The in-flight limit's queue: fewest waves played first, arrival order among equals; a
    waiter cancelled in the queue neither takes a slot nor loses one."""
    from arenabench.engine import _Slots

    async def main():
        slots, order = _Slots(1), []

        async def req(name, waves, hold=0.0):
            async with slots.slot(waves):
                order.append(name)
                await asyncio.sleep(hold)

        first = asyncio.create_task(req("holder", 0, hold=0.01))
        await asyncio.sleep(0)  # the holder takes the only slot; the rest queue behind it
        tasks = [asyncio.create_task(req(n, w)) for n, w in [("a2", 2), ("b0", 0), ("c1", 1), ("d0", 0)]]
        doomed = asyncio.create_task(req("cancelled", 0))
        await asyncio.sleep(0)
        doomed.cancel()
        await asyncio.gather(first, *tasks)
        assert slots.free == 1 and not slots.waiting
        return order

    assert asyncio.run(main()) == ["holder", "b0", "d0", "c1", "a2"]
