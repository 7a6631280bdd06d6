"""Judges: anything that answers batches of pairwise or pointwise requests.

``build(cfg)`` makes any judge from a ``judge`` config entry (``kind``: simulated, ordinal, vllm, openai);
``JudgeStack.from_config(cfg)`` adds the ``cache`` / ``faults`` wrappers a trainer uses;
``get(name)`` is the shorthand for a simulated preset or a fitted judge (``conf/judge/<name>.yaml``
of ``kind: ordinal``, written by ``arenabench calibrate``).
"""

from pathlib import Path

import yaml

from arenabench.judges.accounting import STAT_KEYS
from arenabench.judges.base import PairwiseJudge, PointwiseJudge
from arenabench.judges.constant import ConstantJudge, FailingJudge
from arenabench.judges.factory import JUDGE_KINDS, JUDGES, build, judge_class
from arenabench.judges.faults import FaultyJudge, InjectedJudgeError
from arenabench.judges.simulated import PRESETS, SimulatedJudge, SimulatedJudgeConfig, true_quality
from arenabench.judges.stack import JudgeStack
from arenabench.registry import unknown_message

FITTED_DIR = Path(__file__).resolve().parents[2] / "conf" / "judge"


def get(preset: str = "calibrated", **overrides):
    """A simulated judge from a named preset (``calibrated``, ``noiseless``, ...), or a fitted
    judge by name (``conf/judge/<name>.yaml`` of kind ``ordinal``) or by the path of its YAML."""
    if preset in PRESETS:
        return SimulatedJudge(preset, **overrides)
    path = Path(preset) if str(preset).endswith((".yaml", ".yml")) else FITTED_DIR / f"{preset}.yaml"
    if path.is_file():
        cfg = yaml.safe_load(path.read_text()) or {}
        if cfg.get("kind") == "ordinal":
            return build({**cfg, **overrides})
    raise ValueError(unknown_message("judge preset", preset, presets() + fitted()))


def presets() -> list[str]:
    """The simulated judge presets (``simulated.PRESETS``)."""
    return sorted(PRESETS)


def fitted() -> list[str]:
    """The fitted judges committed under ``conf/judge/`` (kind ``ordinal``)."""
    out = []
    for p in sorted(FITTED_DIR.glob("*.yaml")):
        if (yaml.safe_load(p.read_text()) or {}).get("kind") == "ordinal":
            out.append(p.stem)
    return out


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
    "fitted",
    "get",
    "judge_class",
    "presets",
    "true_quality",
]
