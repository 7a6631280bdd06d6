"""Reward constructors, registered by name: ``arenabench.rewards.get("seeded_single_elim")``."""

from arenabench.rewards import (  # noqa: F401  (importing registers)
    adaptive,
    anchor,
    double_elim,
    pointwise,
    reasoning_arena,
    round_robin,
    rrc,
    single_elim,
    swiss,
    writing_zero,
)
from arenabench.rewards.base import REGISTRY, Constructor, Outcome, register


def get(name: str, **params) -> Constructor:
    """The constructor registered as ``name``; unknown names/params raise one clear error."""
    return REGISTRY.get(name, **params)


def names() -> list[str]:
    return REGISTRY.names()


__all__ = ["Constructor", "Outcome", "REGISTRY", "get", "names", "register"]
