"""Name → class registries (model: lm-evaluation-harness ``api/registry.py``).

Registered objects are *classes*, never closures, so that hydra launchers can pickle
jobs that hold them.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """An unknown registry name; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Registry(Generic[T]):
    """A small name → class mapping with helpful errors."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def deco(cls: type[T]) -> type[T]:
            if name in self._items and self._items[name] is not cls:
                raise ValueError(f"{self.kind} {name!r} is already registered to {self._items[name]!r}")
            self._items[name] = cls
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def lookup(self, name: str) -> type[T]:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        return unknown_message(self.kind, name, self.names())

    def get(self, name: str, **params: Any) -> T:
        """Instantiate ``name`` with ``params``; unknown parameters are one clear error."""
        cls = self.lookup(name)
        check_params(cls, params, f"{self.kind} {name!r}")
        return cls(**params)


def unknown_message(kind: str, name: object, names: list[str]) -> str:
    """'unknown <kind> <name>; registered: ...' plus a did-you-mean suggestion."""
    msg = f"unknown {kind} {name!r}; registered: {', '.join(names)}"
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.5)
    if close:
        msg += f". Did you mean {close[0]!r}?"
    return msg


def check_params(cls: type, params: dict[str, Any], what: str) -> None:
    """Reject parameters the class's ``__init__`` does not take, naming the valid ones."""
    sig = inspect.signature(cls.__init__)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    valid = [p for p in sig.parameters if p != "self"]
    bad = sorted(set(params) - set(valid))
    if bad:
        raise TypeError(f"{what} got unknown parameter(s) {', '.join(bad)}; valid: {', '.join(valid)}")
