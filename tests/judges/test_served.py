"""ServedJudge (a served judge's latency model) and the virtual-clock loop (issue 17)."""

import asyncio
import math
import time

import pytest

from arenabench import judges
from arenabench.judges.latency import ServedJudge, VirtualClockLoop, run_virtual
from arenabench.sim import simulate_groups
from arenabench.types import PairRequest


def _reqs(n, attempt=0):
    g = simulate_groups(1, n + 1, seed=0)[0]
    t = g.trajectories
    return [PairRequest(g.prompt, t[0], t[i + 1], 0, attempt) for i in range(n)]


def test_latency_is_a_deterministic_heavy_tailed_function_of_content():
    j = ServedJudge(judges.get("calibrated"), prefill_s=0.1, per_token_s=0.01, length_sigma=1.0)
    reqs = _reqs(200)
    lat = [j.latency(r) for r in reqs]
    assert lat == [
        ServedJudge(judges.get("noiseless"), prefill_s=0.1, per_token_s=0.01, length_sigma=1.0).latency(r)
        for r in reqs
    ]
    assert [j.latency(r) for r in _reqs(200, attempt=1)] != lat  # a retry is a fresh draw
    assert min(lat) > 0.1
    s = sorted(lat)
    assert s[-1] / s[len(s) // 2] > 3  # a heavy right tail
    logs = [math.log(j.tokens(r)) for r in reqs]
    assert sum(logs) / len(logs) == pytest.approx(j.length_mu, abs=0.2)


def test_sync_batch_fills_slots_first_come_first_served():
    j = ServedJudge(judges.get("calibrated"), slots=3)
    reqs = _reqs(7)
    out = j.judge_pairs(reqs)
    assert out == judges.get("calibrated").judge_pairs(reqs)  # the inner judge's answers
    # replay the FIFO schedule by hand
    free = [0.0] * 3
    for r in reqs:
        k = min(range(3), key=free.__getitem__)
        free[k] += j.latency(r)
    assert j.clock == pytest.approx(max(free))
    assert j.max_running == 3 and j.max_outstanding == 7
    assert j.busy_s == pytest.approx(sum(j.latency(r) for r in reqs))
    assert j.utilization(j.clock) == pytest.approx(j.busy_s / (3 * j.clock))
    j.reset()
    assert (j.clock, j.busy_s, j.requests, j.max_running) == (0.0, 0.0, 0, 0)


def test_async_calls_on_the_virtual_clock_take_their_latency_and_no_wall_time():
    j = ServedJudge(judges.get("calibrated"), slots=2, per_token_s=10.0)  # hours of judge time
    reqs = _reqs(4)

    async def main():
        return await asyncio.gather(*(j.ajudge_pairs([r]) for r in reqs))

    t0 = time.perf_counter()
    out, elapsed = run_virtual(main())
    assert time.perf_counter() - t0 < 5.0
    assert [o[0] for o in out] == judges.get("calibrated").judge_pairs(reqs)
    free = [0.0, 0.0]
    for r in reqs:
        k = min(range(2), key=free.__getitem__)
        free[k] += j.latency(r)
    assert elapsed == pytest.approx(max(free))
    assert j.max_running == 2 and j.max_outstanding == 4


def test_virtual_clock_orders_timers_and_still_serves_threads():
    order = []

    async def sleeper(d):
        await asyncio.sleep(d)
        order.append(d)

    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.gather(sleeper(300.0), sleeper(5.0), sleeper(60.0))
        return await loop.run_in_executor(None, lambda: 42)

    out, elapsed = run_virtual(main())
    assert (out, order, elapsed) == (42, [5.0, 60.0, 300.0], pytest.approx(300.0))
    assert isinstance(VirtualClockLoop().time(), float)


def test_bad_parameters():
    with pytest.raises(ValueError, match="slots"):
        ServedJudge(judges.get("calibrated"), slots=0)
    with pytest.raises(ValueError, match="per_token_s"):
        ServedJudge(judges.get("calibrated"), per_token_s=-1.0)
