"""Reward constructors, registered by name: ``arenabench.rewards.get("seeded_single_elim")``."""

from collections.abc import Mapping
from typing import Any

from arenabench.rewards import (  # noqa: F401  (importing registers)
    adaptive,
    anchor,
    controls,
    double_elim,
    kwise_knockout,
    listwise,
    pointwise,
    reasoning_arena,
    round_robin,
    rrc,
    single_elim,
    sparse,
    swiss,
    writing_zero,
)
from arenabench.rewards.base import REGISTRY, Constructor, Outcome, register


def get(name: str, **params) -> Constructor:
    """The constructor registered as ``name``; unknown names/params raise one clear error."""
    return REGISTRY.get(name, **params)


def build(cfg: Mapping[str, Any]) -> Constructor:
    """The constructor of a ``reward`` config entry: ``name`` plus its parameters (both trainers)."""
    cfg = dict(cfg)
    return REGISTRY.get(cfg.pop("name"), **cfg)


def names() -> list[str]:
    return REGISTRY.names()


def spec_value(text: str) -> Any:
    """One ``key=value`` value of a spec: ``true``/``false`` (any case), ``null``, an integer, a
    number, a YAML list/mapping (``[a, b]``, ``{k: v}``), else the string itself. Stricter than
    YAML 1.1, which reads ``yes``/``on`` as true: here they stay strings, so that the registry's
    type check rejects them for a boolean parameter (one error naming true/false)."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    if t[:1] in "[{":
        import yaml

        return yaml.safe_load(t)
    return t


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"name:key=value:..."`` → (name, params), values parsed by :func:`spec_value`."""
    name, *parts = spec.strip().split(":")
    params = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad constructor spec {spec!r}: write name:key=value[:key=value...]")
        params[key.strip()] = spec_value(value)
    return name.strip(), params


def from_spec(spec: str) -> Constructor:
    """``"name"`` or ``"name:key=value:key=value"`` (values parsed as YAML), e.g.
    ``rrc_scr:cara=true`` — how the CLI and the fidelity study name a configured variant. Names,
    parameter names and value types are checked by the registry (one error naming the valid ones)."""
    name, params = parse_spec(spec)
    return REGISTRY.get(name, **params)


def with_order(spec: str, order: str | None) -> str:
    """``spec`` shown in slot-order policy ``order`` (``:order=...`` appended) unless it names
    its own order or ``order`` is None — how ``arenabench fidelity --order`` applies a policy."""
    if order is None or "order" in parse_spec(spec)[1]:
        return spec
    return f"{spec}:order={order}"


__all__ = [
    "Constructor",
    "Outcome",
    "REGISTRY",
    "build",
    "from_spec",
    "get",
    "names",
    "parse_spec",
    "register",
    "with_order",
]
