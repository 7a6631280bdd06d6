"""Reward constructors, registered by name: ``arenabench.rewards.get("seeded_single_elim")``."""

from arenabench.rewards import anchor, double_elim, pointwise, round_robin, single_elim, swiss  # noqa: F401
from arenabench.rewards.base import REGISTRY, Constructor, Outcome, register


def get(name: str, **params) -> Constructor:
    """The constructor registered as ``name``; unknown names/params raise one clear error."""
    return REGISTRY.get(name, **params)


def names() -> list[str]:
    return REGISTRY.names()


__all__ = ["Constructor", "Outcome", "REGISTRY", "get", "names", "register"]
