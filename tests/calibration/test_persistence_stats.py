"""Persistent / surface-error statistics (issue 39) on hand-built items, every value by hand.

Five items (gold: +1 = a better; verdict with a shown first; with b shown first; scores a, b;
lengths of a, b in characters):

    0: +1  +1 +1  5 3  10 20   right in both orders, scores right, gold shorter
    1: +1  -1 -1  2 4  10 30   wrong in both orders, scores wrong, gold shorter
    2: -1  +1 -1  4 4  30 10   wrong with a first only, scores tie, gold shorter
    3: -1  -1 -1  3 5  10 20   right in both orders, scores right, gold longer
    4: +1  +1 -1  1 6  10 10   wrong with b first only, scores wrong, equal lengths
"""

import math

import numpy as np
import pytest

from arenabench.calibration import judge_data, load_files, write_jsonl
from arenabench.calibration.persistence import logistic, measure_persistence
from arenabench.calibration.stats import JudgeData, measure
from arenabench.calibration.table import Judgment

NAN = math.nan


def data(gold, v_ab, v_ba, s_a, s_b, len_a=None, len_b=None, occ=None, r1=(), r2=()):
    n = len(gold)
    return JudgeData(
        judge="hand",
        grid=(0, 9),
        gold=np.array(gold, float),
        s_a=np.array(s_a, float),
        s_b=np.array(s_b, float),
        occ_item=np.array(occ if occ is not None else range(n), int),
        v_ab=np.array(v_ab, float),
        v_ba=np.array(v_ba, float),
        scores=np.array([x for x in list(s_a) + list(s_b) if not math.isnan(x)], float),
        r1=np.array(r1, float),
        r2=np.array(r2, float),
        len_a=None if len_a is None else np.array(len_a, float),
        len_b=None if len_b is None else np.array(len_b, float),
    )


FIVE = data(
    gold=[1, 1, -1, -1, 1],
    v_ab=[1, -1, 1, -1, 1],
    v_ba=[1, -1, -1, -1, -1],
    s_a=[5, 2, 4, 3, 1],
    s_b=[3, 4, 4, 5, 6],
    len_a=[10, 10, 30, 10, 10],
    len_b=[20, 30, 10, 20, 10],
)


@pytest.mark.parametrize(
    "name,value,n",
    [
        # wrong with a first: items 1, 2; with b first: items 1, 4; both: item 1
        ("pair_both_wrong", 1 / 5, 5),
        ("pair_both_wrong_independent", (2 / 5) * (2 / 5), 5),
        ("pair_both_wrong_ratio", (1 / 5) / (4 / 25), 5),
        ("pair_wrong_given_other_wrong", 2 * 1 / (2 + 2), 5),
        # point wrong (gold strictly lower): items 1 and 4; of the 10 calls, wrong and point wrong:
        # both calls of item 1 and the b-first call of item 4
        ("cross_both_wrong", 3 / 10, 10),
        ("cross_both_wrong_independent", (4 / 10) * (4 / 10), 10),
        ("point_wrong_given_pair_both_wrong", 1.0, 1),
        ("point_wrong_given_pair_both_right", 0.0, 2),
        # decisive calls on items with unequal lengths: gold longer (item 3): the longer picked 2 of 2;
        # gold shorter (items 0, 1, 2): the longer picked 0 + 2 + 1 of 6
        ("pair_length_bias_index", 2 / 2 + 3 / 6 - 1, 8),
        # unequal scores and lengths: items 0, 1, 3; longer picked: item 3 of 1, item 1 of (0, 1)
        ("point_length_bias_index", 1 / 1 + 1 / 2 - 1, 3),
    ],
)
def test_hand_built_values(name, value, n):
    got = measure_persistence(FIVE, n_boot=200)
    assert got[name]["value"] == pytest.approx(value, abs=1e-12)
    assert got[name]["n"] == n
    assert got[name]["lo"] <= got[name]["hi"] or name == "point_wrong_given_pair_both_right"


def test_length_coefficients_are_the_log_odds_ratio_of_a_balanced_design():
    # 8 items, gold a; 4 with a 10 chars longer (standardized +1: the RMS difference is 10), 4 with
    # a 10 shorter (-1). Gold picked in 3 of 4 when longer, 1 of 4 when shorter, the same call in
    # both orders (so the slot coefficient is 0): logit = b0 + b1 x with b1 = (ln 3 - (-ln 3)) / 2
    gold = [1] * 8
    picks = [1, 1, 1, -1, 1, -1, -1, -1]
    d = data(
        gold,
        picks,
        picks,
        s_a=[5 if p > 0 else 3 for p in picks],
        s_b=[4] * 8,
        len_a=[20] * 4 + [10] * 4,
        len_b=[10] * 4 + [20] * 4,
    )
    got = measure_persistence(d, n_boot=0)
    assert got["pair_length_coef"]["value"] == pytest.approx(math.log(3), abs=1e-9)
    assert got["point_length_coef"]["value"] == pytest.approx(math.log(3), abs=1e-9)
    assert got["pair_length_coef"]["n"] == 16 and got["point_length_coef"]["n"] == 8
    beta = logistic(np.column_stack([np.ones(4), [1, 1, -1, -1]]), np.array([1.0, 0, 1, 0]), np.ones((1, 4)))
    assert beta[0] == pytest.approx([0.0, 0.0], abs=1e-12)


def test_majority_over_repeated_calls_and_the_stable_rescore_share():
    # item 0 (gold a) asked 3 times: calls +1 -1, +1 +1, -1 -1 -> majority a tie (1/2), per call 3/6;
    # item 1 (gold a) twice: +1 +1, +1 -1 -> majority right, per call 1/4; item 2 once: not counted
    d = data(
        gold=[1, 1, 1],
        v_ab=[1, 1, -1, 1, 1, 1],
        v_ba=[-1, 1, -1, 1, -1, 1],
        s_a=[NAN] * 3,
        s_b=[NAN] * 3,
        occ=[0, 0, 0, 1, 1, 2],
        r1=[2, 4, 6],
        r2=[2, 4, 8],
    )
    got = measure_persistence(d, n_boot=100)
    assert got["pair_majority_error"]["value"] == pytest.approx((0.5 + 0.0) / 2)
    assert got["pair_call_error"]["value"] == pytest.approx((3 / 6 + 1 / 4) / 2)
    assert got["pair_majority_error"]["n"] == 2
    # fresh variance mean((s1 - s2)^2 / 2) = 2/3; pooled variance of 2 4 6 2 4 8 = 41/9
    assert got["rescore_stable_share"]["value"] == pytest.approx(1 - (2 / 3) / (41 / 9))


def test_measure_adds_them_after_the_others_and_leaves_those_unchanged():
    base = measure(FIVE, n_boot=300)
    both = measure(FIVE, n_boot=300, persistence=True)
    assert list(both)[: len(base)] == list(base)
    assert all(both[k] == base[k] for k in base)
    assert "pair_both_wrong" in both and "pair_both_wrong" not in base


def test_llmbar_texts_give_lengths_and_jsonl_carries_them(tmp_path):
    from pathlib import Path

    fix = Path(__file__).parent / "fixtures" / "llmbar" / "Adversarial_Manual"
    table = load_files([fix])
    d = judge_data(table, "GPT-4")
    assert d.len_a is not None and not np.any(np.isnan(d.len_a))
    row = next(r for r in table.rows if r.kind == "pair")
    assert d.len_a[0] == len(row.text_a) and d.len_b[0] == len(row.text_b)
    write_jsonl(table.rows, tmp_path / "mine.jsonl")
    again = load_files([tmp_path / "mine.jsonl"])
    assert not again.skipped and again.rows[0].text_a == table.rows[0].text_a
    np.testing.assert_array_equal(judge_data(again, "GPT-4").len_b, d.len_b)
    with pytest.raises(ValueError, match="text_a"):
        Judgment("j", "s", "i", "p", "pair", "a", "b", "ab", "a", text_a=3)
