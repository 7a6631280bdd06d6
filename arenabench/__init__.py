"""arenabench: build LLM-RL rewards from a judge, and compare how they are built.

Layers: judges → engine → rewards (constructors) → advantages → trainers; tracking and the
CLI sit at the edge. Heavy dependencies (verl, vllm) are imported only inside their adapters.
"""

from arenabench import judges, rewards
from arenabench.engine import Engine, StepResult, StepStats
from arenabench.types import ConstructorResult, Group, Match, MatchResult, Score, Trajectory

__version__ = "0.1.0"

__all__ = [
    "ConstructorResult",
    "Engine",
    "Group",
    "Match",
    "MatchResult",
    "Score",
    "StepResult",
    "StepStats",
    "Trajectory",
    "judges",
    "rewards",
]
