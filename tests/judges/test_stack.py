"""One judge builder, one stack, one counters shape (judges.build, judges.stack, judges.accounting)."""

import math
import subprocess
import sys

import numpy as np
import pytest

from arenabench import judges, rewards
from arenabench.engine import Engine
from arenabench.judges.accounting import STAT_KEYS, percentiles
from arenabench.judges.cache import CachedJudge, JudgmentCache
from arenabench.judges.faults import FaultyJudge
from arenabench.judges.latency import LatencyJudge, Unbatched
from arenabench.judges.openai_compat import OpenAIJudge
from arenabench.judges.stack import JudgeStack
from arenabench.judges.vllm_offline import VLLMJudge
from arenabench.registry import UnknownNameError
from arenabench.sim import simulate_groups


def groups(k=3, n=6, seed=0):
    return simulate_groups(k, n, seed=seed)


def test_building_a_simulated_judge_imports_no_backend():
    """The registry is lazy: vLLM and aiohttp stay unimported until their kind is used."""
    code = (
        "import sys\n"
        "from arenabench import judges\n"
        "judges.build({'kind': 'simulated', 'preset': 'noiseless'})\n"
        "judges.judge_class('openai')\n"  # the class imports; aiohttp waits for a batch
        "print(sorted(m for m in ('vllm', 'aiohttp') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_builder_for_every_kind_and_one_error_naming_them():
    assert judges.JUDGE_KINDS == ("simulated", "ordinal", "vllm", "openai")
    assert type(judges.build({"kind": "openai", "base_urls": "http://a:1", "model": "m"})) is OpenAIJudge
    assert type(judges.build({"kind": "vllm", "model": "m"})) is VLLMJudge  # no engine until used
    assert judges.build({}).config == judges.get("calibrated").config
    kinds = "registered: simulated, ordinal, vllm, openai. Did you mean 'openai'"
    with pytest.raises(UnknownNameError, match=kinds):
        judges.build({"kind": "opnai"})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['url'\].*valid: \['base_urls'"):
        judges.build({"kind": "openai", "url": "http://a:1", "model": "m"})
    # cache / faults configure the stack, not the judge
    bare = judges.build({"kind": "simulated", "preset": "cot", "cache": None, "faults": {"rate": 0.5}})
    assert type(bare) is judges.SimulatedJudge and bare.preset == "cot"


def every_judge_and_wrapper(tmp_path):
    sim = judges.get("noiseless")
    return [
        sim,
        OpenAIJudge("http://127.0.0.1:1", "m"),
        VLLMJudge("m"),
        FaultyJudge(sim, rate=0.2),
        CachedJudge(sim, JudgmentCache(tmp_path / "c.sqlite"), model="m", rubric="r"),
        LatencyJudge(sim),
        Unbatched(sim),
        JudgeStack(sim, cache=str(tmp_path / "s.sqlite"), faults={"rate": 0.2}),
    ]


def test_every_judge_and_wrapper_has_the_same_stats_keys(tmp_path):
    for judge in every_judge_and_wrapper(tmp_path):
        assert tuple(judge.stats) == STAT_KEYS, type(judge).__name__


def test_counters_flow_outward_through_the_stack(tmp_path):
    gs = groups()
    stack = JudgeStack(judges.get("calibrated"), cache=str(tmp_path / "j.sqlite"), faults={"rate": 0.3})
    out = Engine(stack, seed=0, max_retries=8).run(rewards.get("round_robin"), gs)
    s, base = stack.stats, stack.base.stats
    assert s["faults"] == stack.faulty.faulted > 0
    assert (s["cache_hits"], s["cache_misses"]) == (stack.cached.hits, stack.cached.misses)
    assert s["requests"] == base["requests"] > 0 and s["calls"] == base["calls"]
    # the cache sees every engine request, retries included (a failure is never cached), and
    # the base every miss that no fault intercepted
    assert s["cache_hits"] + s["cache_misses"] == out.stats.judge_calls
    assert base["requests"] == s["cache_misses"] - s["faults"]
    assert base["failures"] == {} and s["prompt_tokens"] == base["prompt_tokens"] > 0  # tokens too


def test_a_second_stack_on_the_same_cache_file_pays_no_judge_call(tmp_path):
    cfg = {"kind": "simulated", "preset": "calibrated", "cache": str(tmp_path / "j.sqlite")}
    runs = []
    for _ in range(2):
        stack = JudgeStack.from_config(cfg, key_extra={"task": "toy"})
        out = Engine(stack, seed=0).run(rewards.get("seeded_single_elim"), groups())
        runs.append((stack, [r.advantage for r in out.results]))
    (first, adv1), (again, adv2) = runs
    assert first.base.stats["requests"] > 0
    assert again.base.stats["requests"] == again.base.stats["calls"] == 0
    asked = first.stats["cache_hits"] + first.stats["cache_misses"]  # a rematch is a hit already
    assert again.stats["cache_misses"] == 0 and again.stats["cache_hits"] == asked
    np.testing.assert_array_equal(np.concatenate(adv1), np.concatenate(adv2))
    # a different key_extra (another task) is another set of keys
    other = JudgeStack.from_config(cfg, key_extra={"task": "other"})
    Engine(other, seed=0).run(rewards.get("seeded_single_elim"), groups())
    assert other.stats["cache_misses"] == first.stats["cache_misses"]


def test_step_metrics_are_per_step_and_zero_without_a_batch(tmp_path):
    stack = JudgeStack(judges.get("calibrated"), cache=str(tmp_path / "j.sqlite"), faults={"rate": 0.2})
    idle = stack.step_metrics()
    assert idle == {
        "cache_hits": 0.0,
        "cache_misses": 0.0,
        "judge_prompt_tokens": 0.0,
        "judge_cached_prompt_tokens": 0.0,
        "judge_completion_tokens": 0.0,
        "judge_backend_calls": 0.0,
        "judge_answered": 0.0,
        "judge_resent": 0.0,
        "judge_outage_s": 0.0,
        "judge_lost": 0.0,
        "judge_prompt_tokens_total": 0.0,
        "judge_cached_prompt_tokens_total": 0.0,
        "judge_completion_tokens_total": 0.0,
        "judge_latency_p50": 0.0,
        "judge_latency_p90": 0.0,
        "judge_faults": 0.0,
    }
    engine = Engine(stack, seed=0, max_retries=8)
    engine.run(rewards.get("round_robin"), groups(seed=1))
    step1 = stack.step_metrics()
    engine.run(rewards.get("round_robin"), groups(seed=1))  # the same groups: all from the cache
    step2 = stack.step_metrics()
    assert step1["cache_misses"] > 0 and step1["judge_latency_p50"] > 0
    assert step2["cache_misses"] == 0 and step2["cache_hits"] > 0
    assert step2["judge_faults"] == step1["judge_faults"] > 0  # cumulative; nothing reached the faults
    assert "judge_faults" not in JudgeStack(judges.get("calibrated")).step_metrics()


def test_one_percentiles_helper_nan_when_empty_unless_told():
    xs = [0.3, 0.1, 0.7, 0.2, 0.9]
    got = percentiles(xs)
    assert list(got) == ["p50", "p90", "p99"]
    for q in (50, 90, 99):
        assert got[f"p{q}"] == pytest.approx(float(np.percentile(xs, q)))
    assert all(math.isnan(v) for v in percentiles([]).values())
    assert percentiles([], (50, 90), empty=0.0) == {"p50": 0.0, "p90": 0.0}


def test_the_simulator_counts_like_a_backend():
    judge = judges.get("calibrated")
    gs = groups()
    Engine(judge, seed=0).run(rewards.get("round_robin"), gs)
    Engine(judge, seed=0).run(rewards.get("pointwise"), gs)
    n = sum(len(g.trajectories) for g in gs)
    pairs = sum(len(g.trajectories) * (len(g.trajectories) - 1) for g in gs)  # both orders
    assert judge.stats["requests"] == pairs + n and judge.stats["calls"] == 2  # one batch each
    assert math.isfinite(judge.latency_percentiles()["p50"])


def test_rewards_build_is_the_one_constructor_builder():
    built = rewards.build({"name": "round_robin", "votes": 2})
    assert built.name == "round_robin" and built.votes == 2
    with pytest.raises(UnknownNameError, match="registered"):
        rewards.build({"name": "round_robn"})
