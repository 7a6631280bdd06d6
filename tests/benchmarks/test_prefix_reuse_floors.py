"""The floors of benchmarks/prefix_reuse.py on hand-made requests (the vLLM part runs in
``make bench-prefix``; its counters are tested in tests/judges/test_vllm.py)."""

from arenabench.judges.tokens import PromptTokens
from arenabench.types import PairRequest, Trajectory
from benchmarks.prefix_reuse import floors


def test_ideal_and_slot_floors_on_a_small_batch():
    a, b, c = (Trajectory(k, f"response {k} with some words") for k in "abc")
    reqs = [PairRequest("q", a, b), PairRequest("q", a, c), PairRequest("q", c, b)]
    pt = PromptTokens()
    parts = [pt.parts(r) for r in reqs]
    assert [sum(p) for p in parts] == [pt.count(pt.render(r)) for r in reqs]
    (_, a_ab, b_ab, t_ab), (_, _, c_ac, t_ac), (_, c_cb, b_cb, t_cb) = parts
    got = floors(reqs)
    assert got["sim_prefill"] == sum(map(sum, parts))
    # the first request whole; then (q, a) is cached: c and the rest; then (q) is cached: c as A, b, rest
    assert got["ideal_computed"] == sum(parts[0]) + c_ac + t_ac + c_cb + b_cb + t_cb
    # b occupies slot B twice under the same query: once is the floor
    assert got["slot_floor"] == got["ideal_computed"] - b_cb and b_cb == b_ab
