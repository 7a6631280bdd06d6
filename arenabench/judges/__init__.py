"""Judges: anything that answers batches of pairwise or pointwise requests."""

from arenabench.judges.base import PairwiseJudge, PointwiseJudge
from arenabench.judges.constant import ConstantJudge, FailingJudge
from arenabench.judges.faults import FaultyJudge, InjectedJudgeError
from arenabench.judges.simulated import PRESETS, SimulatedJudge, SimulatedJudgeConfig, true_quality


def get(preset: str = "calibrated", **overrides) -> SimulatedJudge:
    """A simulated judge from a named preset (``calibrated``, ``noiseless``, ...)."""
    return SimulatedJudge(preset, **overrides)


def presets() -> list[str]:
    return sorted(PRESETS)


__all__ = [
    "ConstantJudge",
    "FailingJudge",
    "FaultyJudge",
    "InjectedJudgeError",
    "PairwiseJudge",
    "PointwiseJudge",
    "SimulatedJudge",
    "SimulatedJudgeConfig",
    "PRESETS",
    "get",
    "presets",
    "true_quality",
]
