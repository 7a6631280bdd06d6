"""The ranking kind through the engine (issue 41 item 3): ``Rank`` asks become ``RankRequest``s
(the items in the listed order, ``votes`` samples from ``sample`` on), sent to the listwise
judge's ``rank_lists``, validated by ``types.rank_reply``, retried and counted like any request,
folded into a ``RankResult`` (per item, the mean of the successful votes); the same in both
schedules, through the cache (in memory and persisted) and under injected faults."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from conftest import make_group

from arenabench import Engine, judges
from arenabench.judges.cache import CachedJudge, JudgmentCache
from arenabench.judges.constant import ConstantJudge, FailingJudge
from arenabench.judges.faults import FaultyJudge
from arenabench.judges.latency import LatencyJudge, ServedJudge, Unbatched, run_virtual
from arenabench.judges.stack import JudgeStack
from arenabench.rewards.base import Constructor, Outcome
from arenabench.sim import simulate_groups
from arenabench.types import JudgeFailure, Match, Rank, RankJudgment, RankRequest, RankResult, Score


@dataclasses.dataclass
class Asker(Constructor):
    """Yields the given waves of asks; keeps every reply it got (in ``extra["replies"]``)."""

    name = "asker"
    waves: tuple = ()

    def play(self, group, rng):
        got = []
        for wave in self.waves:
            got.append((yield list(wave)))
        return Outcome(rank=np.zeros(len(group)), extra={"replies": got})


class TableLists:
    """A listwise judge answering from ``{(texts in the shown order, sample, attempt): reply}``;
    anything else fails. Records every request it was sent (batch by batch)."""

    rejudge_share = 1.0

    def __init__(self, table):
        self.table = table
        self.batches: list[list] = []

    def rank_lists(self, requests):
        self.batches.append(list(requests))
        out = []
        for r in requests:
            key = (tuple(t.text for t in r.trajs), r.sample, r.attempt)
            out.append(self.table.get(key, JudgeFailure("not scripted")))
        return out


def group3():
    return make_group([0.1, 0.2, 0.3], texts=["a", "b", "c"])


def replies(result, wave=0):
    return result.results[0].extra["replies"][wave]


def run(judge, waves, schedule="lockstep", **kw):
    return Engine(judge, schedule=schedule, **kw).run(Asker(waves=tuple(waves)), [group3()])


def test_a_three_item_list_gives_the_exact_rank_result():
    judge = TableLists({(("c", "a", "b"), 0, 0): RankJudgment((2, 0.5, 0.5))})
    out = run(judge, [[Rank((2, 0, 1))]])
    (res,) = replies(out)
    assert res == RankResult(items=(2, 0, 1), scores=(2.0, 0.5, 0.5), failed=False, samples=[(2.0, 0.5, 0.5)])
    assert all(type(s) is float for s in res.scores)  # normalized once (rank_reply)
    (batch,) = judge.batches
    (req,) = batch
    assert [t.text for t in req.trajs] == ["c", "a", "b"] and req.prompt == "p" and req.sample == 0
    s, r = out.stats, out.results[0]
    assert (s.requests, s.judge_calls, s.judge_batches, s.failures, s.retries) == (1, 1, 1, 0, 0)
    assert (r.judge_calls, r.comparisons, r.failures, r.waves) == (1, 0, 0, 1)


def test_votes_ask_consecutive_samples_and_average_per_item():
    table = {
        (("a", "b", "c"), 3, 0): RankJudgment((2.0, 1.0, 0.0)),
        (("a", "b", "c"), 4, 0): RankJudgment((1.0, 2.0, 0.0)),
        (("a", "b", "c"), 5, 0): RankJudgment((0.5, 2.0, 0.5)),
    }
    out = run(TableLists(table), [[Rank((0, 1, 2), votes=3, sample=3)]])
    (res,) = replies(out)
    assert res.scores == (3.5 / 3, 5.0 / 3, 0.5 / 3) and not res.failed
    assert res.samples == [(2.0, 1.0, 0.0), (1.0, 2.0, 0.0), (0.5, 2.0, 0.5)]
    assert out.stats.judge_calls == 3 and out.results[0].judge_calls == 3


def test_a_failed_vote_is_retried_then_left_out_and_counted():
    # sample 0 answers on its first attempt; sample 1 fails twice, then answers on attempt 2;
    # sample 2 never answers (malformed: a wrong number of scores, then failures)
    table = {
        (("a", "b", "c"), 0, 0): RankJudgment((2.0, 1.0, 0.0)),
        (("a", "b", "c"), 1, 2): RankJudgment((0.0, 1.0, 2.0)),
        (("a", "b", "c"), 2, 0): RankJudgment((1.0, 0.0)),
    }
    judge = TableLists(table)
    out = run(judge, [[Rank((0, 1, 2), votes=3)]], max_retries=2)
    (res,) = replies(out)
    assert res.scores == (1.0, 1.0, 1.0) and res.samples == [(2.0, 1.0, 0.0), (0.0, 1.0, 2.0)]
    s, r = out.stats, out.results[0]
    assert (s.judge_calls, s.retries, s.failures, s.judge_batches) == (3 + 4, 4, 1, 3)
    assert s.failure_reasons == {"not scripted": 1}
    assert (r.judge_calls, r.retries, r.failures) == (7, 4, 1)
    assert [len(b) for b in judge.batches] == [3, 2, 2]
    assert [r.attempt for r in judge.batches[1]] == [1, 1]


def test_every_vote_failed_is_nan_scores_and_failed():
    out = run(FailingJudge("down"), [[Rank((0, 1, 2), votes=2)]], max_retries=1)
    (res,) = replies(out)
    assert res.failed and len(res.scores) == 3 and all(math.isnan(x) for x in res.scores)
    assert res.samples == [] and res.items == (0, 1, 2)
    assert (out.stats.failures, out.stats.retries, out.stats.judge_calls) == (2, 2, 4)
    assert out.results[0].failures == 2


def test_a_rank_wave_mixes_with_matches_and_scores_each_to_its_judge():
    const = ConstantJudge(score=7.0, point=0.25)
    lists = TableLists({(("b", "c"), 0, 0): RankJudgment((1.0, 0.0))})
    out = Engine(const, listwise_judge=lists).run(
        Asker(waves=([Match(0, 1), Rank((1, 2)), Score(2)], [Rank((0, 1, 2))])), [group3()]
    )
    m, rk, sc = replies(out)
    assert (m.score_i, m.score_j, sc.score) == (14.0, 14.0, 0.25)
    assert rk == RankResult((1, 2), (1.0, 0.0), samples=[(1.0, 0.0)])
    (tie,) = replies(out, 1)  # the ConstantJudge is not the listwise judge: TableLists fails it
    assert tie.failed
    assert (const.pair_requests, const.point_requests, const.rank_requests) == (2, 1, 0)
    assert out.results[0].comparisons == 1  # a ranking is no pairwise comparison


def test_the_constant_judge_ties_every_item():
    out = run(ConstantJudge(), [[Rank((0, 1, 2)), Rank((2, 0))]])
    a, b = replies(out)
    assert a.scores == (1.0, 1.0, 1.0) and b.scores == (0.5, 0.5)


def test_a_duplicate_list_in_a_wave_is_judged_once_and_paid_by_its_first_asker():
    judge = ConstantJudge()
    g1, g2 = group3(), make_group([0.1, 0.2, 0.3], texts=["a", "b", "c"])
    out = Engine(judge).run(Asker(waves=([Rank((0, 1)), Rank((0, 1)), Rank((1, 0))],)), [g1, g2])
    assert judge.rank_requests == 2  # (a, b) once for both groups, (b, a) once: another order
    assert (out.stats.requests, out.stats.dedup_hits) == (6, 4)
    assert [r.judge_calls for r in out.results] == [2, 0]


def test_a_judge_without_rank_lists_is_a_loud_error():
    class PairsOnly:
        def judge_pairs(self, requests):
            return []

    with pytest.raises(ValueError, match="listwise questions.*PairsOnly has no rank_lists"):
        run(PairsOnly(), [[Rank((0, 1))]])
    with pytest.raises(ValueError, match="listwise questions.*FaultyJudge has no rank_lists"):
        run(FaultyJudge(PairsOnly(), rate=0.0), [[Rank((0, 1))]], schedule="pipelined")


@pytest.mark.parametrize("preset", ["calibrated", "noiseless"])
def test_both_schedules_give_identical_rankings(preset):
    judge = FaultyJudge(judges.get(preset), rate=0.3, seed=2, kinds=("timeout", "malformed", "nan"))
    waves = [[Rank((0, 1, 2), votes=3), Match(0, 2)], [Rank((2, 1), votes=2, sample=1), Score(1)]]
    lock = run(judge, waves, schedule="lockstep")
    pipe = run(judge, waves, schedule="pipelined")
    assert repr(lock.results[0].extra) == repr(pipe.results[0].extra)
    a, b = dataclasses.asdict(lock.stats), dataclasses.asdict(pipe.stats)
    a.pop("judge_batches"), b.pop("judge_batches")
    assert a == b and a["retries"] > 0


def test_injected_faults_fail_rank_requests_and_count_them():
    inner = ConstantJudge()
    faulty = FaultyJudge(inner, rate=1.0, seed=0, kinds=("nan",))
    out = run(faulty, [[Rank((0, 1, 2), votes=2)]], max_retries=1)
    (res,) = replies(out)
    assert res.failed and inner.rank_requests == 0
    assert faulty.faulted == 4 and faulty.by_kind == {"nan": 4}
    assert out.stats.failure_reasons == {"non-finite score": 2}
    (nan,) = faulty.rank_lists([request((0, 1, 2))])  # the kind's shape: k NaN scores
    assert isinstance(nan, RankJudgment) and len(nan.scores) == 3 and all(map(math.isnan, nan.scores))
    # timeouts and malformed replies: JudgeFailures, retried, counted by reason prefix
    faulty = FaultyJudge(ConstantJudge(), rate=0.5, seed=3, kinds=("timeout", "malformed"))
    out = run(faulty, [[Rank((0, 1, 2), votes=8)]], max_retries=1)
    s = out.stats
    assert faulty.faulted == s.retries + s.failures > 0
    assert sum(s.failure_reasons.values()) == s.failures


def request(items, sample=0):
    g = group3()
    return RankRequest(g.prompt, tuple(g.arena[i] for i in items), sample)


def test_rank_replies_round_trip_through_the_cache_in_memory_and_persisted(tmp_path):
    path = tmp_path / "judgments.sqlite"
    waves = [[Rank((0, 1, 2), votes=2), Rank((2, 1), sample=4)]]
    first = CachedJudge(judges.get("calibrated"), JudgmentCache(path), model="sim", rubric="r")
    a = run(first, waves)
    assert (first.hits, first.misses) == (0, 3)
    again = run(first, waves)  # the same wrapper: every list answered from the cache
    assert (first.hits, first.misses) == (3, 3) and repr(again.results[0].extra) == repr(a.results[0].extra)
    first.cache.close()
    inner = ConstantJudge()  # a different judge behind the persisted file: only hits can match
    second = CachedJudge(inner, JudgmentCache(path), model="sim", rubric="r")
    b = run(second, waves)
    assert (second.hits, second.misses, inner.rank_requests) == (3, 0, 0)
    assert repr(b.results[0].extra) == repr(a.results[0].extra)


def test_rank_cache_keys_hash_the_texts_in_order_and_never_hold_them(tmp_path):
    cached = CachedJudge(ConstantJudge(), JudgmentCache(tmp_path / "c.sqlite"), model="m", rubric="r")
    reqs = [request((0, 1, 2)), request((1, 0, 2)), request((0, 1, 2), sample=1)]
    keys = [cached.key(r) for r in reqs]
    assert len(set(keys)) == 3 and all(len(k) == 64 for k in keys)  # order and sample matter
    cached.rank_lists(reqs)
    rows = cached.cache._connection().execute("SELECT key, value FROM judgments").fetchall()
    assert sorted(k for k, _ in rows) == sorted(keys)
    assert all("scores" in v and '"a"' not in v for _, v in rows)


def test_a_bad_stored_ranking_is_a_counted_miss_asked_again(tmp_path):
    cached = CachedJudge(ConstantJudge(), JudgmentCache(tmp_path / "c.sqlite"), model="m", rubric="r")
    req = request((0, 1, 2))
    for bad in ({"scores": [1.0, 2.0]}, {"scores": "120"}, {"scores": [1.0, None, 0.0]}, {}):
        cached.cache.put(cached.key(req), bad)
        assert cached.rank_lists([req]) == [RankJudgment((1.0, 1.0, 1.0))]
    assert cached.bad_rows == 4 and cached.inner.rank_requests == 4


MIXED = (
    [Rank((0, 1, 2, 3), votes=2), Rank((5, 4)), Match(0, 5)],
    [Rank((1, 3, 5)), Score(2, votes=2)],
)


def test_rank_asks_through_a_judge_stack_with_cache_and_faults(tmp_path):
    groups = simulate_groups(3, 6, seed=2)
    bare = Engine(judges.get("calibrated")).run(Asker(waves=MIXED), groups)
    faults = {"rate": 0.3, "seed": 0, "kinds": ["malformed", "nan", "raise"]}
    stack = JudgeStack(judges.get("calibrated"), cache=str(tmp_path / "c.sqlite"), faults=faults)
    out = Engine(stack, max_retries=8).run(Asker(waves=MIXED), groups)
    assert out.stats.failures == 0 and out.stats.retries > 0  # every fault retried away ...
    for a, b in zip(bare.results, out.results, strict=True):  # ... to the bare judge's answers
        assert repr(a.extra) == repr(b.extra)
    first = stack.step_metrics()
    assert first["cache_hits"] == 0 and first["judge_faults"] == stack.faulty.faulted > 0
    again = Engine(stack).run(Asker(waves=MIXED), groups)  # every request now a cache hit
    assert [repr(r.extra) for r in again.results] == [repr(r.extra) for r in bare.results]
    # per group 4 rankings, 2 pair requests, 2 scores: 8 distinct requests, all hits, no new fault
    assert stack.step_metrics()["cache_hits"] == 3 * 8 and stack.stats["faults"] == first["judge_faults"]


def test_rank_asks_through_the_latency_wrappers_and_a_served_judge():
    groups = simulate_groups(3, 6, seed=2)
    bare = Engine(judges.get("calibrated")).run(Asker(waves=MIXED), groups)
    want = [repr(r.extra) for r in bare.results]
    for judge in (LatencyJudge(judges.get("calibrated")), Unbatched(judges.get("calibrated"))):
        assert [repr(r.extra) for r in Engine(judge).run(Asker(waves=MIXED), groups).results] == want
    served = ServedJudge(judges.get("calibrated"), slots=2)
    engine = Engine(served)
    assert engine.resolved_schedule == "pipelined" and hasattr(served, "arank_lists")
    pipe, _ = run_virtual(engine.arun(Asker(waves=MIXED), groups))
    assert [repr(r.extra) for r in pipe.results] == want
    assert served.requests == 3 * 8 and served.max_running <= 2


@pytest.mark.parametrize("order", ["prefix", "asked"])
def test_a_lockstep_rank_batch_is_sent_grouped_by_its_first_item(order):
    """Listwise requests share a prompt prefix up to their first item, as pairwise ones do up to
    A: ``request_order="prefix"`` sends them grouped by it (replies still land where asked)."""
    judge = TableLists({})
    asks = [Rank((1, 0)), Rank((0, 1)), Rank((1, 2)), Rank((2, 0)), Rank((0, 2))]
    out = run(judge, [asks], request_order=order)
    sent = ["".join(t.text for t in r.trajs) for r in judge.batches[0]]
    if order == "prefix":
        assert sent == ["ba", "bc", "ab", "ac", "ca"]
    else:
        assert sent == ["ba", "ab", "bc", "ca", "ac"]
    assert [r.items for r in replies(out)] == [a.items for a in asks]
