"""Loaders on small fixtures cut from the real files: exact row counts, bad rows counted."""

import json
import re
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


# --- bad values: one line naming the file, the line (or item) and the field (issue 43 §3) -------

_OK_POINT = {
    "judge": "m",
    "item": "p1",
    "kind": "point",
    "a": "r1",
    "response": "r1",
    "score": 8,
    "grid_lo": 1,
    "grid_hi": 10,
}


@pytest.mark.parametrize(
    ("raw", "field", "why"),
    [
        ('"score": 1e400', "score", "not a finite number"),
        ('"score": NaN', "score", "not a finite number"),
        ('"score": -Infinity', "score", "not a finite number"),
        ('"score": "8"', "score", "not a number"),
        ('"score": [8]', "score", "not a number"),
        ('"grid_lo": "1"', "grid_lo", "not a number"),
        ('"repeat": 1e400', "repeat", "not a finite number"),
        ('"judge": ["m"]', "judge", "not a string"),
        ('"gold": 1', "gold", "not a string"),
    ],
)
def test_our_jsonl_bad_value_names_file_line_and_field(tmp_path, raw, field, why):
    path = tmp_path / "bad.jsonl"
    good = json.dumps(_OK_POINT)
    key = raw.split(":")[0].strip('"')
    bad = json.dumps({k: v for k, v in _OK_POINT.items() if k != key})[:-1] + ", " + raw + "}"
    path.write_text(good + "\n\n" + bad + "\n")
    with pytest.raises(CalibrationDataError) as err:
        load_jsonl(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:3: field '{field}': {why}") and "\n" not in msg


@pytest.mark.parametrize(
    ("raw", "why"),
    [("1e400", "not a finite number"), ("NaN", "not a finite number"), ('"7"', "not a number")],
)
def test_fastchat_single_bad_score_names_file_line_and_field(tmp_path, raw, why):
    path = tmp_path / "gpt-4_single.jsonl"
    rec = '{"question_id": 81, "model": "m", "judge": ["gpt-4", "single-v1"], "turn": 1, "score": %s}'
    path.write_text(rec % "7" + "\n" + rec % raw + "\n")
    with pytest.raises(CalibrationDataError, match=rf"^{re.escape(str(path))}:2: field 'score': {why}"):
        load_fastchat_single(path)


def test_fastchat_pair_bad_turn_names_file_line_and_field(tmp_path):
    path = tmp_path / "gpt-4_pair.jsonl"
    path.write_text(
        '{"question_id": 81, "model_1": "x", "model_2": "y", "g1_winner": "model_1", '
        '"g2_winner": "model_2", "judge": ["gpt-4", "pair-v2"], "turn": 1e400}\n'
    )
    with pytest.raises(CalibrationDataError, match=r":1: field 'turn': not a finite number"):
        load_fastchat_pair(path)


def test_llmbar_bad_label_names_file_item_and_field(tmp_path):
    d = tmp_path / "Natural" / "GPT-4" / "Vanilla"
    d.mkdir(parents=True)
    item = {
        "input": "q",
        "output_1": "x",
        "output_2": "y",
        "label": 1,
        "results": [{"swap = False": {"winner": 1}, "swap = True": {"winner": 2}}],
    }
    (d / "result.json").write_text(json.dumps([item, {**item, "label": [1]}]))
    with pytest.raises(CalibrationDataError, match=r"result.json: item 1: field 'label': not an integer"):
        load_llmbar(d / "result.json")
