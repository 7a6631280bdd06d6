"""``benchmarks/pipeline.py --quick`` runs and writes its table; its virtual-clock numbers obey
the bound (no timing on the real clock)."""

import csv
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT))
from benchmarks import pipeline  # noqa: E402


def test_quick_pipeline_benchmark(tmp_path):
    s = pipeline.run(tmp_path, quick=True, only="seeded_single_elim,round_robin,pointwise")
    assert s["cells"] == 3 and s["same_work"] and s["max_running_le_slots"]
    rows = list(csv.DictReader((tmp_path / "pipeline.csv").open()))
    assert {r["constructor"] for r in rows} == {"seeded_single_elim", "round_robin", "pointwise"}
    for r in rows:
        bound = float(r["bound_s"])
        assert float(r["pipelined_s"]) >= bound * (1 - 1e-9)
        assert float(r["lockstep_s"]) >= float(r["pipelined_s"]) * (1 - 1e-9)
        assert int(r["judge_calls"]) == int(r["pipelined_calls"])
        # all at once is a list schedule of the step's work: never under work / slots
        assert float(r["at_once_over_bound"]) * bound >= float(r["work_over_slots_s"]) * (1 - 1e-9)
        if r["waves"] == "1":  # a one-wave lockstep step is that same batch, sent in that order
            assert float(r["at_once_over_bound"]) == float(r["lockstep_over_bound"])
    assert "Lockstep vs pipelined" in (tmp_path / "pipeline.md").read_text()


def test_list_schedule_by_hand():
    # 2 slots; first come first served puts the long request last: 1+1 | 1+3
    assert pipeline.list_schedule_s([1.0, 1.0, 1.0, 3.0], 2) == 4.0
    # longest first: 3 | 1+1+1
    assert pipeline.list_schedule_s([1.0, 1.0, 1.0, 3.0], 2, longest_first=True) == 3.0
    assert pipeline.list_schedule_s([], 4) == 0.0


def test_virtual_clock_numbers_do_not_depend_on_the_run(tmp_path):
    a = pipeline.run(tmp_path / "a", quick=True, only="swiss")
    b = pipeline.run(tmp_path / "b", quick=True, only="swiss")
    assert a == b  # the summary holds only virtual-clock numbers
