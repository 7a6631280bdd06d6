"""Issue 31 (3): seeded single elimination gives the greedy anchor no systematic advantage.

In groups of equal true quality nothing but judge noise (and, on an integer grid, ties) separates
the rollouts, so the anchor's mean advantage must be 0 within 2 standard errors. The N = 8, 400
group check of ``test_ties.py`` could not see the bias this file guards against (+0.044 ± 0.015
at N = 16 on the continuous judge, −0.061 ± 0.018 on the integer one, 4,000 groups): the anchor's
N − 1 seeding matches weighed in its tier key, and its bracket games replayed its seeding verdicts.
Fixed by the tier key (``brackets.tier_scores``: the seeding score counted once) and by asking a
rematch as a new judgment (``brackets.rematch``) — except, under the paper's rule (the anchor
seeded on its mean seeding score, the default), on the integer judge at N = 16 (−0.069 ± 0.019):
a mean of N − 1 lattice scores sorted among single ones. ``anchor_seed=lattice`` (the mean
stochastically rounded onto the replies' score lattice) removes it, keeping the mean's
information: −0.007 ± 0.014. Not covered: the
fitted LLMBar judges repeat a verdict when re-asked, so the anchor's bracket games copy its
seeding and it is biased under every rule (gpt4_llmbar N = 16: ``mean`` −0.117 ± 0.021,
``lattice`` +0.041 ± 0.013; ``docs/constructors-notes.md``). For such a judge
``anchor_seed=record`` (the anchor sits the bracket out and is ranked by its seeding record):
gpt4_llmbar N = 16 −0.001 ± 0.005; on the integer judge at N = 16 it is biased (−0.030 ± 0.011,
a strict xfail), which re-judges afresh and is not the judge it is for. The default,
``anchor_seed=auto``, takes ``record`` for a judge that repeats its verdicts (``rejudge_share`` <
½) and otherwise ``lattice``, and is held here on all four judges. The rules measured and not
taken (``match``, ``neutral``, ``h2h``, ``h2h_tier``, ``lattice_key``) are the study's, tested with
it (``tests/test_anchor_bias_script.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_group

from arenabench import Engine, judges, rewards
from arenabench.rewards.brackets import (
    lattice_seeding,
    reply_lattice,
)
from arenabench.sim import equal_quality_groups
from arenabench.types import MatchResult

GROUPS = 4000
CHUNK = 500  # groups per engine run (a step); the engine draws each group's rng from (seed, step, index)


OPEN = pytest.mark.xfail(
    strict=True,
    reason="issue 31: the paper's rule (anchor_seed=mean) on the integer judge at N = 16, anchor mean "
    "advantage -0.069 ± 0.019 (a mean of N-1 integer seeding scores among single ones); "
    "anchor_seed=lattice and the default (auto: lattice here) remove it",
)
MEAN = "seeded_single_elim:anchor_seed=mean"  # the paper's rule (the default was, before auto)
LATTICE = "seeded_single_elim:anchor_seed=lattice"
RECORD = "seeded_single_elim:anchor_seed=record"
RECORD_OPEN = pytest.mark.xfail(
    strict=True,
    reason="anchor_seed=record on the integer judge at N = 16 (a judge that re-judges afresh, not the "
    "repeating judge the rule is for): -0.030 ± 0.011, through GRPO's per-group sigma",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,n,preset",
    [
        # the default, anchor_seed=auto: lattice on the simulated judges (which re-judge afresh;
        # on continuous replies it is the paper's mean exactly), record on the LLMBar fits
        # (which repeat their verdicts, rejudge_share = 0); test_auto_is_... checks the mapping
        ("seeded_single_elim", 8, "calibrated"),
        ("seeded_single_elim", 8, "integer"),
        ("seeded_single_elim", 16, "calibrated"),
        ("seeded_single_elim", 16, "integer"),
        ("seeded_single_elim", 8, "gpt4_llmbar"),
        ("seeded_single_elim", 16, "gpt4_llmbar"),
        ("seeded_single_elim", 8, "chatgpt_llmbar"),
        ("seeded_single_elim", 16, "chatgpt_llmbar"),
        # the paper's rule where it is biased (calibrated N = 8, 16 and integer N = 8 are the
        # default's cells above: lattice = mean on continuous replies; integer N = 8 within 1 SE
        # in results/anchor_bias/)
        pytest.param(MEAN, 16, "integer", marks=OPEN),
        # record on a judge that re-judges afresh, which it is not for (calibrated N = 8, 16 and
        # integer N = 8: within 1 SE, results/anchor_bias/record/)
        pytest.param(RECORD, 16, "integer", marks=RECORD_OPEN),
        # test_ties.py's 400-group check, powered (see POWERED there)
        ("double_elim", 8, "calibrated"),
        ("double_elim", 8, "integer"),
    ],
)
def test_anchor_mean_advantage_is_zero_in_equal_quality_groups(name, n, preset):
    """4,000 equal-quality groups (seeds: groups 11, judge 4, engine 0, as ``test_ties``):
    |mean anchor advantage| <= 2 SE. Measured when written (chunks of 500), N = 8 / 16: the
    paper's rule z = +0.17 / −0.72 (calibrated), −0.41 / −3.56 (integer, N = 16 a strict xfail:
    it fails loudly if fixed); the default (``auto``) z = +0.17 / −0.72 (calibrated: the paper's
    rule exactly), −0.55 / −0.52 (integer, ``lattice``), and ``record``'s on the LLMBar fits,
    below (the study's ``match``: ``tests/test_anchor_bias_script.py``); double elimination
    (N = 8) z = +0.35, +1.53; ``anchor_seed=lattice`` z = +0.17 / −0.72 (calibrated: no lattice,
    the paper's rule exactly), −0.55 / −0.52 (integer). The study's ``neutral``, ``h2h`` and
    ``h2h_tier`` are not here: they are biased (integer N = 8 z = +3.6, +4.0, +5.5), measured in
    ``results/anchor_bias/``. ``anchor_seed=record`` z = −0.64 / −0.15 (gpt4_llmbar), −0.15 /
    +0.52 (chatgpt_llmbar), −2.65 at integer N = 16 (a strict xfail; calibrated and integer N = 8,
    within 1 SE, are in ``results/anchor_bias/record/``)."""
    engine = Engine(judges.get(preset, seed=4), seed=0)
    groups = equal_quality_groups(GROUPS, n)
    adv0 = []
    for k in range(0, GROUPS, CHUNK):
        out = engine.run(rewards.from_spec(name), groups[k : k + CHUNK], step=k // CHUNK)
        adv0 += [float(r.advantage[0]) for r in out.results]
    a = np.array(adv0)
    se = a.std(ddof=1) / math.sqrt(len(a))
    assert abs(a.mean()) <= 2 * se, f"anchor mean advantage {a.mean():+.4f}, 2 SE = {2 * se:.4f}"


def test_a_rule_that_is_not_the_constructors_is_one_error_naming_the_valid_ones():
    """The production rules are ``auto``, ``mean``, ``lattice`` and ``record``; the rules measured
    and not taken (``match``, ``neutral``, ``h2h``, ``h2h_tier``, ``lattice_key``) are the study's
    (``experiments/anchor_bias.py``, ``tests/test_anchor_bias_script.py``)."""
    for bad in ("median", "match", "neutral", "h2h", "h2h_tier", "lattice_key"):
        with pytest.raises(ValueError, match=f"must be one of auto, mean, lattice, record; got '{bad}'"):
            rewards.get("seeded_single_elim", anchor_seed=bad)


def test_reply_lattice_is_the_rational_gcd_of_the_replies():
    """``reply_lattice``: integer scores give step 1 (2 if every one is even: a group's replies
    are all it sees), halves ½, an average over 3 votes ⅓; NaN is skipped; a continuous
    score, or only zeros, gives None."""
    from fractions import Fraction

    assert reply_lattice([16.0, 17.0, 18.0, 3.0]) == 1
    assert reply_lattice([16.0, 18.0, 4.0]) == 2
    assert reply_lattice([1.0, 0.5, 2.0, 0.0]) == Fraction(1, 2)
    assert reply_lattice([17 / 3, 6.0, math.nan]) == Fraction(1, 3)
    assert reply_lattice([16.0, 17.0, 16.31415926]) is None
    assert reply_lattice([0.0, 0.0]) is None and reply_lattice([]) is None


def _seeding_results(a, anchor_scores, explorer_scores):
    """Explorer x vs the anchor; each summed score split over the two orders as whole points
    and the rest (an integer rubric's replies when the scores are integers)."""

    def split(t):
        return (math.floor(t / 2), t - math.floor(t / 2))

    return [
        MatchResult(x, a, e, s, samples=list(zip(split(e), split(s), strict=True)))
        for x, (s, e) in enumerate(zip(anchor_scores, explorer_scores, strict=True), start=1)
    ]


def test_lattice_rounds_the_anchors_mean_to_a_neighbouring_lattice_point_keeping_its_expectation():
    """``lattice_seeding``: the anchor's seeding scores 16, 16, 17 (mean 49/3) on the integer
    lattice become 17 with probability 1/3, else 16 (6,000 draws: within 4 SE), so the mean
    of the value is the anchor's mean; the explorers' entries and a failed match's NaN are
    untouched, and the failed match is out of the anchor's mean."""
    a = 0
    results = _seeding_results(a, [16.0, 16.0, 17.0], [17.0, 18.0, 16.0])
    results.append(MatchResult(4, a, math.nan, math.nan, failed=True))
    score = np.array([49 / 3, 17.0, 18.0, 16.0, math.nan])
    ups = 0
    for seed in range(6000):
        out = lattice_seeding(score, results, a, np.random.default_rng(seed))
        assert np.array_equal(out[1:], score[1:], equal_nan=True)
        assert out[a] in (16.0, 17.0)
        ups += out[a] == 17.0
    sd = math.sqrt(6000 * (1 / 3) * (2 / 3))
    assert abs(ups - 2000) <= 4 * sd, ups


def test_lattice_draws_nothing_on_the_lattice_or_on_a_continuous_judge():
    """A mean on the lattice (16, 18 on the lattice of halves that 16.5 reveals) stays, and a
    continuous judge's mean stays the mean: no draw from the group's rng either way. A verdict
    judge's lattice (a ½ from a tied order) rounds the mean 5/3 to 1.5 or 2."""
    a = 0
    for anchor_scores, explorer_scores, want in [
        ([16.0, 18.0], [16.5, 17.0], 17.0),
        ([16.1234567, 17.7654321], [16.5, 17.0], (16.1234567 + 17.7654321) / 2),
    ]:
        results = _seeding_results(a, anchor_scores, explorer_scores)
        score = np.array([float(np.mean(anchor_scores)), *explorer_scores])
        rng = np.random.default_rng(5)
        out = lattice_seeding(score, results, a, rng)
        assert out[a] == want and rng.random() == np.random.default_rng(5).random()
    results = [
        MatchResult(1, a, 0.0, 2.0, samples=[(0.0, 1.0), (0.0, 1.0)]),
        MatchResult(2, a, 0.5, 1.5, samples=[(0.5, 0.5), (0.0, 1.0)]),
        MatchResult(a, 3, 2.0, 0.0, samples=[(1.0, 0.0), (1.0, 0.0)]),
    ]  # the anchor: 2, 1.5, 2 -> mean 11/6, between 1.5 and 2
    vals = {
        lattice_seeding(np.array([11 / 6, 0, 0.5, 0]), results, a, np.random.default_rng(s))[a]
        for s in range(50)
    }
    assert vals == {1.5, 2.0}
    nan = np.array([math.nan, math.nan])
    failed = [MatchResult(1, a, math.nan, math.nan, failed=True)]
    assert np.isnan(lattice_seeding(nan, failed, a, np.random.default_rng(0))).all()


def test_lattice_is_the_papers_rule_on_continuous_replies_and_pools_the_anchor_like_an_explorer():
    """On ``calibrated`` (continuous replies) ``anchor_seed=lattice`` gives the ranks of the
    default bit for bit. On ``integer`` at N = 16 the anchor shares a rank (a pooled coin-flip
    game, or equal keys) about as often as an explorer does — under the paper's rule it shared
    one in 38% of groups, an explorer in 88% (issue 31.3's diagnosis) — 300 equal-quality
    groups, seeds as the slow test: the anchor's share is within 0.08 of the explorers'."""
    groups = equal_quality_groups(300, 16)
    _assert_mean_on_continuous_replies(rewards.from_spec(LATTICE), groups[:100])
    integer = Engine(judges.get("integer", seed=4), seed=0)
    anchor, explorers = _shared_rank_shares(integer.run(rewards.from_spec(LATTICE), groups).results)
    assert abs(anchor - explorers) <= 0.08, (anchor, explorers)
    anchor_mean, explorers_mean = _shared_rank_shares(integer.run(rewards.from_spec(MEAN), groups).results)
    assert explorers_mean - anchor_mean >= 0.3, (anchor_mean, explorers_mean)


def _assert_mean_on_continuous_replies(constructor, groups):
    """``constructor`` gives ``mean``'s ranks and advantages bit for bit on ``calibrated``."""
    cal = Engine(judges.get("calibrated", seed=4), seed=0)
    for r, s in zip(
        cal.run(constructor, groups).results,
        cal.run(rewards.from_spec(MEAN), groups).results,
        strict=True,
    ):
        assert np.array_equal(r.rank, s.rank) and np.array_equal(r.advantage, s.advantage)


def _shared_rank_shares(results):
    """(share of groups in which the anchor — index 0 — shares its rank, the explorers' mean share)."""
    n = len(results[0].rank)
    shared = np.array([[np.sum(r.rank == r.rank[i]) > 1 for i in range(n)] for r in results])
    return shared[:, 0].mean(), shared[:, 1:].mean()


def test_record_places_the_anchor_at_losses_plus_half_its_ties_among_the_explorers():
    """``place_anchor_by_record`` (``anchor_seed=record``): the explorers 1–6 ranked 0..5 among
    themselves; 1 and 4 beat the anchor, 2 tied it, 6's game failed, 3 and 5 lost to it: slot
    L + T/2 = 2 + 2/2 = 3, between the explorers ranked 2 and 3 — which ones beat it does not
    matter, only how many. With one tie fewer (6 lost) the slot is 2.5: level with the explorer
    ranked 2 (a shared rank). Explorers sharing a pooled rank keep it when the slot is not theirs."""
    from arenabench.rewards.brackets import place_anchor_by_record

    a = 0
    seeding = [
        MatchResult(1, a, 2.0, 0.0),
        MatchResult(a, 2, 1.0, 1.0),
        MatchResult(3, a, 0.0, 2.0),
        MatchResult(a, 4, 0.5, 1.5),
        MatchResult(5, a, 1.0, 1.5),
        MatchResult(6, a, math.nan, math.nan, failed=True),
    ]
    rank = np.array([math.nan, 5, 0, 1, 2, 3, 4])
    assert place_anchor_by_record(rank, a, seeding).tolist() == [3.0, 6, 0, 1, 2, 4, 5]
    lost6 = [*seeding[:5], MatchResult(6, a, 0.0, 2.0)]
    assert place_anchor_by_record(rank, a, lost6).tolist() == [2.5, 6, 0, 1, 2.5, 4, 5]
    pooled = np.array([math.nan, 4.5, 0, 1, 2, 4.5, 3])  # 1 and 5 joined by a coin flip
    assert place_anchor_by_record(pooled, a, seeding).tolist() == [3.0, 5.5, 0, 1, 2, 5.5, 4]


def test_record_keeps_the_anchor_out_of_the_bracket_and_ranks_it_by_quality_on_a_noiseless_judge():
    """``anchor_seed=record``: 2N − 3 comparisons (the anchor's N − 1 seeding games, the explorers'
    bracket of N − 1) in 1 + ⌈log2(N − 1)⌉ waves, no bracket game with the anchor, its depth NaN;
    on the noiseless judge its rank is the number of better explorers, and the explorers'
    bracket is seeded by their seeding scores (best first)."""
    quality = [1.9, 1.5, 1.7, 2.1, 1.6, 1.8, 1.4, 2.0]
    for anchor in (0, 2, 6):
        group = make_group(quality, anchor=anchor, prompt=f"r{anchor}")
        r = Engine(judges.get("noiseless"), seed=0).run(rewards.from_spec(RECORD), [group]).results[0]
        assert r.judge_calls == 2 * (2 * 8 - 3) and r.comparisons == 2 * 8 - 3 and r.waves == 1 + 3
        assert math.isnan(r.extra["depth"][anchor]) and anchor not in r.extra["seeds"]
        better = sum(q > quality[anchor] for q in quality)
        assert r.rank[anchor] == better
        assert r.extra["seeds"] == sorted(r.extra["seeds"], key=lambda i: -quality[i])
        assert sorted(r.rank.tolist()) == list(map(float, range(8)))


def _play_with_a_judge_that_repeats_itself(constructor, group, seed):
    """Drive ``constructor.play`` with a verdict judge whose reply is a function of the pair
    (and the shown order) only — a temperature-0 judge: each order goes to the first slot, the
    second or a tie (1, 0 or ½ each) by a table drawn once per group, so a rematch at any sample
    replays the first verdict. Return (outcome, every match result in the order asked)."""
    rng = np.random.default_rng(seed)
    table = {}

    def verdict(x, y):  # the reply when x is shown first
        if (x, y) not in table:
            table[(x, y)] = float(rng.choice([1.0, 0.0, 0.5], p=[0.45, 0.45, 0.1]))
        return table[(x, y)]

    history = []
    gen = constructor.play(group, np.random.default_rng(seed))
    asks = next(gen)
    while True:
        results = []
        for m in asks:
            ij, ji = verdict(m.i, m.j), verdict(m.j, m.i)
            results.append(
                MatchResult(m.i, m.j, ij + 1 - ji, 1 - ij + ji, samples=[(ij, 1 - ij), (1 - ji, ji)])
            )
        history += results
        try:
            asks = gen.send(results)
        except StopIteration as stop:
            return stop.value, history


def test_record_ranks_the_anchor_by_its_seeding_record_on_a_judge_that_repeats_itself():
    """On a judge that repeats its verdicts, under ``mean`` every bracket game of the anchor is a
    copy of its seeding game against that opponent (the cause of the LLMBar fits' bias); under
    ``record`` the anchor plays no bracket game and its rank is exactly L + T/2 of its seeding
    games, also where coin flips pooled explorers (200 groups of 8 and 16)."""
    copies = pooled = 0
    for n in (8, 16):
        for k in range(100):
            group = make_group([1.7] * n, anchor=k % n, prompt=f"rep{n}-{k}")
            a = group.anchor
            outcome, hist = _play_with_a_judge_that_repeats_itself(rewards.from_spec(MEAN), group, k)
            seed_games = {frozenset((m.i, m.j)): m for m in hist[: n - 1]}
            for m in hist[n - 1 :]:
                if a in (m.i, m.j):
                    s = seed_games[frozenset((m.i, m.j))]
                    assert m.winner == s.winner and m.score_i + m.score_j == s.score_i + s.score_j
                    copies += 1
            outcome, hist = _play_with_a_judge_that_repeats_itself(rewards.from_spec(RECORD), group, k)
            assert len(hist) == 2 * n - 3 and all(a not in (m.i, m.j) for m in hist[n - 1 :])
            lost = sum(m.winner not in (None, a) for m in hist[: n - 1])
            tied = sum(m.winner is None for m in hist[: n - 1])
            assert math.isclose(outcome.rank.sum(), n * (n - 1) / 2)
            assert outcome.rank[a] == lost + tied / 2  # coin flips pool explorers only
            pooled += bool(outcome.extra["coin_flips"])
    assert pooled >= 20  # the explorers' ties were met, and the anchor kept its record through them
    assert copies >= 200  # the anchor played at least one bracket game in every group


@pytest.mark.parametrize("kind", ["fail", "tie"])
def test_record_gives_no_advantage_without_evidence(kind):
    """``test_ties``' no-evidence rule for ``anchor_seed=record`` (it checks registered defaults):
    a judge that fails every call or ties every comparison leaves the anchor at the middle slot
    and the explorers pooled by coin flips around it — every advantage 0, at N = 2, 3, 7, 8, 16."""
    judge = judges.FailingJudge() if kind == "fail" else judges.ConstantJudge(score=7.0, point=0.7)
    for n in (2, 3, 7, 8, 16):
        groups = [make_group(1.7 + 0.1 * np.arange(n), anchor=g % n, prompt=f"ne{n}-{g}") for g in range(2)]
        for r in Engine(judge, max_retries=1).run(rewards.from_spec(RECORD), groups).results:
            assert np.all(np.isfinite(r.advantage)) and not np.any(r.advantage), (n, r.rank.tolist())


def test_auto_is_record_for_a_judge_that_repeats_and_lattice_otherwise(tmp_path, caplog, monkeypatch):
    """``anchor_seed=auto`` (the default) reads the judge's ``rejudge_share`` (through the
    stack's wrappers): below ½ (a re-asked request mostly replays its reply: the LLMBar fits 0,
    the MT-bench fit 0.06, a temperature-0 LLM judge, a constant judge) ``record``, else
    ``lattice`` (the simulated presets, 1); a judge that does not say gets ``lattice`` and one
    warning per judge type. Through the engine the default's results are the resolved rule's bit
    for bit, and an explicit rule ignores the judge."""
    from arenabench.judges.openai_compat import OpenAIJudge
    from arenabench.judges.ordinal import OrdinalJudge
    from arenabench.rewards import single_elim
    from arenabench.rewards.single_elim import REPEATS_BELOW
    from arenabench.rewards.single_elim import auto_anchor_seed as rule_for
    from arenabench.types import JudgeTraits

    def auto_anchor_seed(judge):  # as the engine hands them over: the judge's traits
        return rule_for(JudgeTraits.of(judge))

    monkeypatch.setattr(single_elim, "_WARNED", set())  # no warning given by an earlier test
    assert REPEATS_BELOW == 0.5
    cases = {
        "calibrated": "lattice",
        "integer": "lattice",
        "gpt4_llmbar": "record",
        "chatgpt_llmbar": "record",
        "gpt4turbo_mtbench": "record",
    }
    for name, rule in cases.items():
        assert auto_anchor_seed(judges.get(name)) == rule, name
    assert auto_anchor_seed(OrdinalJudge(rejudge_share=0.49)) == "record"
    assert auto_anchor_seed(OrdinalJudge(rejudge_share=0.5)) == "lattice"
    assert auto_anchor_seed(judges.ConstantJudge()) == "record"
    stack = judges.JudgeStack(judges.get("gpt4_llmbar"), cache=str(tmp_path / "j.db"), faults={"rate": 0.1})
    assert auto_anchor_seed(stack) == "record"
    assert auto_anchor_seed(OpenAIJudge("http://127.0.0.1:1", "m", api_key_env=None)) == "record"
    assert auto_anchor_seed(None) == "lattice"  # play driven without an engine

    class Silent:  # declares nothing
        def judge_pairs(self, requests):
            return []

    with caplog.at_level("WARNING", logger="arenabench.rewards.single_elim"):
        warm = OpenAIJudge("http://127.0.0.1:1", "m", api_key_env=None, temperature=0.7)
        assert auto_anchor_seed(warm) == auto_anchor_seed(warm) == "lattice"
        assert auto_anchor_seed(Silent()) == "lattice"
    warned = [r for r in caplog.records if "declares no rejudge_share" in r.getMessage()]
    assert len(warned) == 2, [r.getMessage() for r in warned]  # once per judge type

    class Bad(Silent):
        rejudge_share = 1.5

    with pytest.raises(ValueError, match=r"rejudge_share must be in \[0, 1\]"):
        auto_anchor_seed(Bad())

    groups = equal_quality_groups(40, 8)
    for name, rule in (("integer", LATTICE), ("gpt4_llmbar", RECORD)):
        engine = Engine(judges.get(name, seed=4), seed=0)
        auto = engine.run(rewards.get("seeded_single_elim"), groups).results
        explicit = engine.run(rewards.from_spec(rule), groups).results
        for r, s in zip(auto, explicit, strict=True):
            assert np.array_equal(r.rank, s.rank) and np.array_equal(r.advantage, s.advantage)
            assert r.comparisons == s.comparisons and r.extra["anchor_seed"] == rule.split("=")[1]
        mean = engine.run(rewards.from_spec(MEAN), groups).results
        assert all(r.extra["anchor_seed"] == "mean" and r.comparisons == 14 for r in mean)
