"""arenabench: build LLM-RL rewards from a judge, and compare how they are built.

Layers: judges → engine → rewards (constructors) → advantages → trainers; tracking and the
CLI sit at the edge (ARCHITECTURE.md's layer table, held by tests/test_layers.py). Heavy
dependencies (verl, vllm, trl) are imported only inside their adapters.

The names below are imported on first use (PEP 562), so that ``arenabench --help`` and
``arenabench list`` do not pay for numpy, the engine and every constructor up front.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "judges": "arenabench.judges",
    "rewards": "arenabench.rewards",
    "Engine": "arenabench.engine",
    "StepResult": "arenabench.engine",
    "StepStats": "arenabench.engine",
    "ConstructorResult": "arenabench.types",
    "Group": "arenabench.types",
    "Match": "arenabench.types",
    "MatchResult": "arenabench.types",
    "Score": "arenabench.types",
    "Trajectory": "arenabench.types",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'arenabench' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if module.endswith(name) else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
