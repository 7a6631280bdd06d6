"""Loaders on small fixtures cut from the real files: exact row counts, bad rows counted."""

from collections import Counter
from pathlib import Path

import pytest

from arenabench.calibration import (
    CalibrationDataError,
    Judgment,
    load_fastchat_pair,
    load_fastchat_single,
    load_files,
    load_jsonl,
    load_llmbar,
    write_jsonl,
)

FIX = Path(__file__).parent / "fixtures"
MANUAL = FIX / "llmbar" / "Adversarial_Manual" / "GPT-4"


def test_llmbar_vanilla_two_orders_per_item_in_output_terms():
    t = load_llmbar(MANUAL / "Vanilla" / "result.json")
    assert len(t) == 26 and not t.skipped
    assert Counter(r.order for r in t.rows) == {"ab": 13, "ba": 13}
    assert {r.judge for r in t.rows} == {"GPT-4"} and {r.source for r in t.rows} == {
        "llmbar/Adversarial_Manual"
    }
    first = [r for r in t.rows if r.item == t.rows[0].item]
    # item 0: label 2, both orders pick output 2 (swap = True is already mapped back by LLMBar)
    assert [(r.order, r.verdict, r.gold) for r in first] == [("ab", "b", "b"), ("ba", "b", "b")]
    # item 2: gold 1, swap=False says 2, swap=True says 1: a position flip
    item2 = [r for r in t.rows if r.item == t.rows[4].item]
    assert [(r.order, r.verdict, r.gold) for r in item2] == [("ab", "b", "a"), ("ba", "a", "a")]


def test_llmbar_rating_scores_and_the_same_items_as_vanilla():
    r = load_llmbar(MANUAL / "Rating" / "result.json")
    v = load_llmbar(MANUAL / "Vanilla" / "result.json")
    assert len(r) == 26 and not r.skipped
    assert {x.item for x in r.rows} == {x.item for x in v.rows}
    assert [x.score for x in r.rows[:4]] == [4, 9, 2, 6]
    assert all((x.grid_lo, x.grid_hi) == (0, 9) for x in r.rows)


def test_llmbar_bad_scores_are_skipped_and_counted():
    t = load_llmbar(FIX / "llmbar" / "Adversarial_GPTInst" / "GPT-4" / "Rating" / "result.json")
    assert len(t) == 5
    assert t.skipped == {"score not an integer (content management policy)": 1}
    t = load_llmbar(FIX / "llmbar" / "Adversarial_Neighbor" / "ChatGPT" / "Rating" / "result.json")
    assert len(t) == 3
    assert t.skipped == {"score 10 outside the grid 0..9": 1}


def test_fastchat_pair_orders_ties_and_repeats():
    t = load_fastchat_pair(FIX / "fastchat" / "gpt-4-turbo_pair.jsonl")
    assert len(t) == 10 and not t.skipped
    q81 = [r for r in t.rows if r.prompt == "mtbench/q81/t2"]
    assert [r.repeat for r in q81] == [0, 0, 1, 1, 2, 2]
    assert [(r.order, r.verdict) for r in q81[:2]] == [("ab", "tie"), ("ba", "a")]
    assert all(r.gold is None and r.judge == "gpt-4-turbo" for r in t.rows)


def test_fastchat_single_repeats_in_file_order():
    t = load_fastchat_single(FIX / "fastchat" / "gpt-4-turbo_single.jsonl")
    assert len(t) == 8 and not t.skipped
    twice = [r for r in t.rows if r.response == "mtbench/q81/t2/hb_answers"]
    assert [(r.repeat, r.score) for r in twice] == [(0, 4), (1, 3)]
    assert all((r.grid_lo, r.grid_hi) == (1, 10) for r in t.rows)


def test_our_jsonl_counts_every_bad_row_by_reason(tmp_path):
    t = load_jsonl(FIX / "ours.jsonl")
    assert len(t) == 5
    assert t.skipped == {
        "not a JSON line": 1,
        "a pair row needs b, order in ab/ba and verdict in a/b/tie": 1,
        "score 11 outside the grid 1..10": 1,
        "missing field(s) judge": 1,
        "unknown field(s) winner": 1,
        "score not an integer": 1,
    }
    assert t.rows[0].source == "ours" and t.rows[2].prompt == "p1"
    out = tmp_path / "again.jsonl"
    write_jsonl(t.rows, out)
    assert load_jsonl(out).rows == [Judgment(**{**vars(r), "source": "ours"}) for r in t.rows]


def test_a_file_without_usable_rows_is_one_clear_error():
    with pytest.raises(
        CalibrationDataError, match=r"unusable.jsonl: no usable judgment \(.*not a JSON line: 1"
    ):
        load_jsonl(FIX / "unusable.jsonl")
    with pytest.raises(CalibrationDataError, match="unknown judgment file; valid: LLMBar"):
        load_files([FIX / "README.md"])


def test_load_files_walks_folders_and_sums_the_skips():
    t = load_files([FIX / "llmbar", FIX / "fastchat", FIX / "ours.jsonl"])
    assert len(t) == 26 + 26 + 5 + 3 + 10 + 8 + 5
    assert sum(t.skipped.values()) == 1 + 1 + 6
    assert t.judges() == ["ChatGPT", "GPT-4", "gpt-4-turbo", "mine"]
    with pytest.raises(CalibrationDataError, match="unusable.jsonl"):
        load_files([FIX])  # one unusable file is an error, not a silent gap
