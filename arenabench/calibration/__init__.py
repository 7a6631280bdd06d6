"""Judge calibration: recorded judgments of real judges in, statistics and fitted simulated
judges out (``arenabench judge-stats``, ``arenabench calibrate``; ``docs/calibration.md``)."""

from arenabench.calibration.stats import STATISTICS, JudgeData, format_stats, judge_data, measure, stats_rows
from arenabench.calibration.table import (
    CalibrationDataError,
    Judgment,
    JudgmentTable,
    load_fastchat_pair,
    load_fastchat_single,
    load_files,
    load_jsonl,
    load_llmbar,
    write_jsonl,
)

__all__ = [
    "CalibrationDataError",
    "JudgeData",
    "Judgment",
    "JudgmentTable",
    "STATISTICS",
    "format_stats",
    "judge_data",
    "load_fastchat_pair",
    "load_fastchat_single",
    "load_files",
    "load_jsonl",
    "load_llmbar",
    "measure",
    "stats_rows",
    "write_jsonl",
]
