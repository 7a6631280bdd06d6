"""judge-stats on 13 LLMBar GPT-4 items, every number worked out by hand.

The fixture's items (gold; verdict with output 1 shown first; verdict with output 2 first;
score of output 1; score of output 2):

    0: 2 2 2 4 9    1: 2 2 2 2 6    2: 1 2 1 9 9    3: 2 1 2 9 9    4: 2 2 2 4 9
    5: 2 2 2 4 9    6: 2 2 2 7 8    7: 2 1 2 9 9    8: 2 2 2 2 9    9: 1 1 1 9 8
   10: 1 1 1 8 4   11: 2 2 2 6 7   12: 1 2 2 9 9
"""

import math
from pathlib import Path

import numpy as np
import pytest

from arenabench import cli
from arenabench.calibration import judge_data, load_files, measure
from arenabench.calibration.stats import stats_rows

FIX = Path(__file__).parent / "fixtures"
MANUAL = FIX / "llmbar" / "Adversarial_Manual"


@pytest.fixture(scope="module")
def stats():
    return measure(judge_data(load_files([MANUAL]), "GPT-4"), n_boot=500)


@pytest.mark.parametrize(
    "name,value,n",
    [
        # items 2, 3, 7 change their verdict with the order
        ("pair_consistency", 10 / 13, 13),
        ("pair_flip_rate", 3 / 13, 13),
        # wrong: with output 1 first items 2, 3, 7, 12; with output 2 first item 12
        ("pair_accuracy", 21 / 26, 26),
        ("pair_accuracy_both", (9 + 3 * 0.5) / 13, 13),
        # first slot chosen: output 1 first: 3, 7, 9, 10; output 2 first: all but 2, 9, 10
        ("pair_first_slot", 14 / 26, 26),
        ("pair_tie_rate", 0.0, 26),
        # equal scores: items 2, 3, 7, 12; every other item scored the right way round
        ("point_tie_rate", 4 / 13, 13),
        ("point_accuracy", (9 + 4 * 0.5) / 13, 13),
        ("point_top_share", 13 / 26, 26),
        ("hist_4", 4 / 26, 26),
        # both decisive: the 9 untied items, 2 verdicts each, all agree
        ("pair_point_agreement", 1.0, 18),
        # tied scores: items 2, 3, 7 right with output 2 first only, 12 wrong both times
        ("pair_breaks_point_tie", 3 / 8, 8),
        # tied items 2, 3, 7, 12: first slot chosen 0, 2, 2 and 1 times (item 12: with output 2 first)
        ("pair_first_slot_point_tie", 5 / 8, 8),
        # per item pair minus point: items 2, 3, 7 give 1/2 - 1/2, item 12 gives 0 - 1/2
        ("pair_minus_point_accuracy", -0.5 / 13, 13),
    ],
)
def test_statistics_match_the_hand_count(stats, name, value, n):
    assert stats[name]["value"] == pytest.approx(value, abs=1e-12)
    assert stats[name]["n"] == n


def test_bootstrap_interval_brackets_the_value_and_is_reproducible(stats):
    again = measure(judge_data(load_files([MANUAL]), "GPT-4"), n_boot=500)
    for name, s in stats.items():
        assert s["lo"] <= s["value"] + 1e-12 and s["value"] <= s["hi"] + 1e-12, name
        assert again[name] == s  # fixed seed
    assert stats["pair_consistency"]["hi"] - stats["pair_consistency"]["lo"] > 0.1  # 13 items: wide


def test_rescore_and_ties_on_fastchat_fixture():
    s = measure(judge_data(load_files([FIX / "fastchat"]), "gpt-4-turbo"), n_boot=0)
    assert s["rescore_agreement"]["value"] == 0.0  # hb_answers q81 t2: 4 then 3
    assert s["rescore_noise_sd"]["value"] == pytest.approx(math.sqrt(0.5))
    # 5 records x 2 orders, 3 ties (q81 t2: tie/a, a/tie, tie/a)
    assert s["pair_tie_rate"]["value"] == pytest.approx(3 / 10)
    assert "pair_accuracy" not in s and "point_accuracy" not in s  # no gold in MT-bench files


def test_judge_stats_cli_formats(tmp_path, capsys):
    assert cli.main(["judge-stats", str(MANUAL), "--boot", "200", "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "judge,statistic,value,lo,hi,n"
    row = next(line for line in out if ",pair_consistency," in line).split(",")
    assert float(row[2]) == pytest.approx(10 / 13)
    path = tmp_path / "s.md"
    assert (
        cli.main(["judge-stats", str(FIX / "llmbar"), "--by", "source", "--boot", "50", "-o", str(path)]) == 0
    )
    text = path.read_text()
    assert "| GPT-4 llmbar/Adversarial_Manual | pair_consistency | 0.769 |" in text
    assert cli.main(["judge-stats", str(MANUAL), "--judge", "Claude"]) == 2
    assert "no judgments of judge 'Claude'; judges in the files: GPT-4" in capsys.readouterr().err


def test_stats_rows_long_format():
    rows = stats_rows([("x", judge_data(load_files([MANUAL]), "GPT-4"))], n_boot=0)
    assert {r["judge"] for r in rows} == {"x"}
    assert all(np.isnan(r["lo"]) for r in rows)
