"""experiments/anchor_bias.py (issue 31.3): it measures on the slow test's groups, a small run
writes both tables with a row per cell, and the ``anchor_seed`` rules it measures and the
constructor does not take (``match``, ``neutral``, ``h2h``, ``h2h_tier``, ``lattice_key``: the
study's ``MEASURED``) do what ``docs/constructors-notes.md`` §3 says."""

import importlib.util
import math
import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import make_group
from helpers import ROOT

from arenabench import Engine, judges, rewards, sim
from arenabench.rewards.brackets import Seeding, decide, seed_order, tier_scores
from arenabench.types import MatchResult

spec = importlib.util.spec_from_file_location("anchor_bias", ROOT / "experiments" / "anchor_bias.py")
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)
sys.path.insert(0, str(ROOT / "tests" / "rewards"))
import test_single_elim_anchor as slow  # noqa: E402  the production rules' tests: groups and helpers


def test_the_script_measures_on_the_slow_tests_groups():
    """One builder (``sim.equal_quality_groups``) for the script and the slow test, and it gives
    the groups the published numbers were measured on (``make_group`` per prompt, as before)."""
    assert ab.equal_quality_groups is slow.equal_quality_groups is sim.equal_quality_groups
    rng = np.random.default_rng(11)
    before = [
        make_group([1.7 + 0.3 * rng.standard_normal()] * 8, anchor=0, prompt=f"eq{g}") for g in range(5)
    ]
    for mine, theirs in zip(sim.equal_quality_groups(5, 8), before, strict=True):
        assert mine.prompt == theirs.prompt and mine.anchor == theirs.anchor == 0
        assert [(t.id, t.text, t.length, t.meta) for t in mine.trajectories] == [
            (t.id, t.text, t.length, t.meta) for t in theirs.trajectories
        ]
        assert mine.meta == theirs.meta


def test_a_small_run_writes_every_cell(tmp_path, monkeypatch):
    argv = ["anchor_bias.py", "--out", str(tmp_path), "--rules", "mean,neutral", "--judges", "integer"]
    argv += ["--sizes", "4", "--groups", "30", "--fidelity-groups", "20"]
    monkeypatch.setattr(sys, "argv", argv)
    ab.main()
    bias = pd.read_csv(tmp_path / "bias.csv")
    assert sorted(bias.rule) == ["mean", "neutral"] and (bias.groups == 30).all() and (bias.se > 0).all()
    fid = pd.read_csv(tmp_path / "fidelity.csv")
    assert fid.rule.tolist() == ["neutral"] and fid.base.tolist() == ["mean"]
    assert fid.d_kendall_tau_lo[0] <= fid.d_kendall_tau[0] <= fid.d_kendall_tau_hi[0]
    md = (tmp_path / "anchor_bias.md").read_text()
    assert "| `integer` | 4 |" in md and "| `integer` | 4 | neutral |" in md


@pytest.mark.slow
@pytest.mark.parametrize("n,preset", [(8, "calibrated"), (8, "integer"), (16, "calibrated"), (16, "integer")])
def test_match_gives_the_anchor_no_mean_advantage_in_equal_quality_groups(n, preset):
    """``anchor_seed=match`` on the slow test's 4,000 equal-quality groups and seeds
    (``anchor_bias``): |mean anchor advantage| <= 2 SE. Measured when written (chunks of 500),
    N = 8 / 16: z = +1.45 / +0.61 (calibrated), −0.97 / +0.14 (integer; re-measured for issue
    31.3, ``results/anchor_bias/``)."""
    row = ab.anchor_bias("match", n, preset, slow.GROUPS)
    assert row["groups"] == slow.GROUPS and abs(row["mean_adv"]) <= 2 * row["se"], row


def test_the_study_takes_every_rule_and_the_constructor_only_its_own():
    """``constructor`` builds ``seeded_single_elim`` with any rule, the production ones included;
    the registered constructor refuses the study's (one error naming its own)."""
    for rule in ("auto", *ab.ANCHOR_RULES, *ab.MEASURED):
        c = ab.constructor(rule)
        assert c.name == "seeded_single_elim" and c.rule == (rule if rule != "auto" else "lattice")
    for rule in ab.MEASURED:
        with pytest.raises(ValueError, match="must be one of auto, mean, lattice, record"):
            rewards.get("seeded_single_elim", anchor_seed=rule)


def test_the_anchor_seeds_on_one_of_its_seeding_matches_drawn_uniformly():
    """``one_match_seeding``: the anchor's entry is its own side of one successful seeding match
    (either slot), each drawn equally often (7 explorers, 7,000 draws: within 4 SE of 1,000);
    explorers' scores and a failed match's NaN are untouched."""
    a = 3
    results = [MatchResult(i, a, float(i), 10.0 + i) for i in (0, 1, 2, 4, 7)]  # anchor 10, 11, 12, 14, 17
    results.append(MatchResult(a, 5, 15.0, 5.0))  # the anchor in slot i: 15
    results.append(MatchResult(6, a, math.nan, math.nan, failed=True))
    score = np.array([0.0, 1, 2, 99, 4, 5, math.nan, 7])
    counts = {}
    for seed in range(7000):
        out = ab.one_match_seeding(score, results, a, np.random.default_rng(seed))
        assert np.array_equal(np.delete(out, a), np.delete(score, a), equal_nan=True)
        counts[out[a]] = counts.get(out[a], 0) + 1
    assert sorted(counts) == [10.0, 11.0, 12.0, 14.0, 15.0, 17.0]  # never the failed match's
    expected = 7000 / 6
    assert all(abs(c - expected) <= 4 * math.sqrt(expected) for c in counts.values()), counts


def test_anchor_seed_match_ranks_as_the_mean_on_a_noiseless_judge():
    """On a noiseless judge, whose scores ignore the opponent, the anchor's one match score is
    its mean, so both rules give the same ranks."""
    quality = [1.9, 1.5, 1.7, 2.1, 1.6, 1.8, 1.4, 2.0]
    groups = [make_group(quality, anchor=2, prompt=f"m{k}") for k in range(3)]
    engine = Engine(judges.get("noiseless"), seed=0)
    by_mean = engine.run(rewards.get("seeded_single_elim", anchor_seed="mean"), groups).results
    by_match = engine.run(ab.constructor("match"), groups).results
    for r, s in zip(by_match, by_mean, strict=True):
        assert np.array_equal(r.rank, s.rank)


def test_neutral_seeding_orders_the_anchor_by_each_head_to_head_game_and_keeps_ties_exact():
    """``neutral_seeding``: an explorer's value is the anchor's mean plus half its margin in their
    game, so it is above the anchor iff it won and exactly equal iff they tied; a failed match
    stays NaN. X = 1 beat the anchor (15 vs 14) yet scores below its mean (16): ``mean`` seeds it
    below the anchor, ``neutral`` above."""
    a = 0
    results = [
        MatchResult(1, a, 15.0, 14.0),  # won with a score below the anchor's mean
        MatchResult(a, 2, 17.0, 16.0),  # the anchor in slot i; lost
        MatchResult(3, a, 17.0, 17.0),  # a tie
        MatchResult(4, a, 18.0, 16.0),
        MatchResult(5, a, math.nan, math.nan, failed=True),
    ]
    score = np.array([16.0, 15, 16, 17, 18, math.nan])  # anchor_phase's: the anchor's mean 64 / 4
    out = ab.neutral_seeding(score, results, a)
    assert out.tolist()[:5] == [16.0, 16.5, 15.5, 16.0, 17.0] and math.isnan(out[5])
    by_mean, by_neutral = (
        seed_order(score, np.random.default_rng(0)),
        seed_order(out, np.random.default_rng(0)),
    )
    assert by_mean.index(1) > by_mean.index(a) and by_neutral.index(1) < by_neutral.index(a)


def test_neutral_keys_that_are_equal_in_exact_arithmetic_are_equal_floats():
    """The anchor's mean 30 / 9 is not a float; X = 1 beat it by 2 (+1 from the tie point), then
    scored 12 and 8 in the bracket, the anchor 13 and 8: both keys are (30/9 + 21) / 3. Summed as
    floats from the raw mean they differ in the last place (``decide`` and the tier ranks would
    split a tie by rounding); on the 2^-20 grid they are equal."""
    a = 0
    anchor_scores = [3.0] * 6 + [4.0] * 3  # mean 30 / 9
    results = [
        MatchResult(x, a, s + (2.0 if x == 1 else 0.0), s)
        for x, s in zip(range(1, 10), anchor_scores, strict=True)
    ]
    score = np.array([30 / 9] + [r.score_i for r in results])
    out = ab.neutral_seeding(score, results, a)
    bracket = [
        MatchResult(1, 5, 12.0, 11.0),
        MatchResult(a, 6, 13.0, 9.0),
        MatchResult(1, 7, 8.0, 6.0),
        MatchResult(a, 8, 8.0, 9.0),
    ]
    raw = np.array(score)
    raw[1] = raw[a] + 1.0
    assert (
        tier_scores(10, results + bracket, Seeding(raw, len(results)))[1]
        != tier_scores(10, results + bracket, Seeding(raw, len(results)))[a]
    )
    key = tier_scores(10, results + bracket, Seeding(out, len(results)))
    assert key[1] == key[a]


def test_neutral_with_an_anchor_whose_every_seeding_match_failed_keeps_nan():
    a = 1
    results = [
        MatchResult(0, a, math.nan, math.nan, failed=True),
        MatchResult(2, a, math.nan, math.nan, failed=True),
    ]
    score = np.full(3, math.nan)
    assert np.isnan(ab.neutral_seeding(score, results, a)).all()


def test_h2h_settles_the_anchors_tied_game_by_their_seeding_game_and_pools_a_tied_one():
    """``anchor_seed=h2h`` (``head_to_head``): a tied bracket game between the anchor (0)
    and an explorer goes to the winner of their seeding game, even against the accumulated
    averages (``decide``'s evidence otherwise); a seeding game that was tied or failed too leaves
    a coin flip recorded in ``links``; a tie between two explorers is decided as before."""
    a = 0
    seeding_results = [
        MatchResult(1, a, 15.0, 14.0),  # 1 beat the anchor
        MatchResult(a, 2, 17.0, 16.0),  # the anchor beat 2
        MatchResult(3, a, 16.0, 16.0),  # a tie
        MatchResult(4, a, math.nan, math.nan, failed=True),
    ]
    score = np.array([16.0, 15, 16, 16, math.nan])  # anchor_phase's: the anchor's mean 47 / 3 -> say 16
    h2h, by_mean = Seeding(score, 4, ab.MEASURED["h2h"].tiebreak(a)), Seeding(score, 4)
    for x, y, want in [(a, 1, 1), (2, a, a)]:
        hist = [*seeding_results, MatchResult(x, y, 20.0, 20.0)]
        flags, links = Counter(), []
        assert decide(hist[-1], x, y, hist, flags, np.random.default_rng(0), links, h2h)[0] == want
        assert flags["head_to_head_tiebreak"] == 1 and not links
    # under mean the accumulated averages decide: the anchor (16, 20 -> 18) over 1 (15, 20 -> 17.5)
    hist = [*seeding_results, MatchResult(a, 1, 20.0, 20.0)]
    assert decide(hist[-1], a, 1, hist, Counter(), np.random.default_rng(0), [], by_mean)[0] == a
    for x in (3, 4):  # tied and failed seeding games: a coin, both sides seen, always linked
        winners = set()
        for seed in range(20):
            hist = [*seeding_results, MatchResult(a, x, 20.0, 20.0)]
            flags, links = Counter(), []
            winners.add(decide(hist[-1], a, x, hist, flags, np.random.default_rng(seed), links, h2h)[0])
            assert links == [(a, x)] and flags["coin_flip"] == 1
        assert winners == {a, x}
    hist = [*seeding_results, MatchResult(1, 2, 20.0, 20.0)]  # explorers: averages 17.5 vs 18
    flags = Counter()
    assert decide(hist[-1], 1, 2, hist, flags, np.random.default_rng(0), [], h2h)[0] == 2
    assert flags["evidence_tiebreak"] == 1


def test_h2h_tier_places_the_anchor_among_its_tier_mates_by_their_seeding_games():
    """``place_anchor_by_head_to_head`` (``anchor_seed=h2h_tier``): tier depth 1 holds the anchor
    (ranked first there) and mates 1–4, kept in their order 1, 2, 3, 4; 1 beat the anchor in
    seeding, 2 tied it, 3 and 4 lost: the anchor goes below 1 and level with 2 (slot 1.5 among
    the mates: ranks 2.5 shared), above 3 and 4. Player 5 (a deeper tier) keeps rank 0; a tier
    without mates and an unranked anchor are unchanged."""
    a = 0
    seeding = [
        MatchResult(1, a, 3.0, 2.0),
        MatchResult(2, a, 2.0, 2.0),
        MatchResult(a, 3, 2.0, 1.0),
        MatchResult(4, a, 1.0, 2.0),
        MatchResult(5, a, 5.0, 2.0),
    ]
    depth = np.array([1.0, 1, 1, 1, 1, 2])
    rank = np.array([1.0, 2, 3, 4, 5, 0])
    out = ab.place_anchor_by_head_to_head(rank, depth, a, seeding)
    assert out.tolist() == [2.5, 1.0, 2.5, 4.0, 5.0, 0.0] and out.sum() == rank.sum()
    alone = np.array([1.0, 2, 2, 2, 2, 0])
    assert ab.place_anchor_by_head_to_head(rank, alone, a, seeding).tolist() == rank.tolist()
    unranked = np.array([math.nan, 1, 2, 3, 4, 0])
    assert np.array_equal(
        ab.place_anchor_by_head_to_head(unranked, depth, a, seeding), unranked, equal_nan=True
    )


def test_lattice_key_seeds_on_the_mean_and_compares_the_anchor_on_the_lattice():
    """``anchor_seed=lattice_key``: on ``calibrated`` (continuous replies) the ranks of ``mean``
    bit for bit; on ``integer`` (N = 16, 300 equal-quality groups, the slow test's seeds) the
    bracket is seeded on the anchor's exact mean, off the integer lattice in most groups, in
    descending order of the seeding scores, and the anchor shares a rank about as often as an
    explorer (within 0.08; under ``mean`` far less often, ``test_lattice_is_the_papers_rule_…``
    in ``tests/rewards/test_single_elim_anchor.py``):
    its tier key and tied games are on the lattice."""
    groups = sim.equal_quality_groups(300, 16)
    slow._assert_mean_on_continuous_replies(ab.constructor("lattice_key"), groups[:100])
    integer = Engine(judges.get("integer", seed=4), seed=0)
    results = integer.run(ab.constructor("lattice_key"), groups).results
    off_lattice = 0
    for g, r in zip(groups, results, strict=True):
        score = r.extra["seed_score"]
        off_lattice += score[g.anchor] != round(score[g.anchor])
        assert np.all(np.diff(score[r.extra["seeds"]]) <= 0)  # seeded best first on these values
    assert off_lattice >= len(groups) // 2, off_lattice  # 190 of 300 when written
    anchor, explorers = slow._shared_rank_shares(results)
    assert abs(anchor - explorers) <= 0.08, (anchor, explorers)
