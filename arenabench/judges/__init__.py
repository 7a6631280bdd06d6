"""Judges: anything that answers batches of pairwise or pointwise requests.

``build(cfg)`` makes any judge from a ``judge`` config entry (``kind``: simulated, vllm, openai);
``JudgeStack.from_config(cfg)`` adds the ``cache`` / ``faults`` wrappers a trainer uses;
``get(preset)`` is the shorthand for a simulated preset.
"""

from arenabench.judges.accounting import STAT_KEYS
from arenabench.judges.base import PairwiseJudge, PointwiseJudge
from arenabench.judges.constant import ConstantJudge, FailingJudge
from arenabench.judges.factory import JUDGE_KINDS, JUDGES, build, judge_class
from arenabench.judges.faults import FaultyJudge, InjectedJudgeError
from arenabench.judges.simulated import PRESETS, SimulatedJudge, SimulatedJudgeConfig, true_quality
from arenabench.judges.stack import JudgeStack


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
    "JUDGES",
    "JUDGE_KINDS",
    "JudgeStack",
    "PairwiseJudge",
    "PointwiseJudge",
    "STAT_KEYS",
    "SimulatedJudge",
    "SimulatedJudgeConfig",
    "PRESETS",
    "build",
    "get",
    "judge_class",
    "presets",
    "true_quality",
]
