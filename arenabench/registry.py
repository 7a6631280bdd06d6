"""Name → class registries (model: lm-evaluation-harness ``api/registry.py``).

Registered objects are *classes*, never closures, so that hydra launchers can pickle
jobs that hold them.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """An unknown registry name; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class BadValueError(TypeError, ValueError):
    """A parameter value of the wrong type (``cara="flase"``); the message says what fits."""


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
    check_types(cls, params, what)


def check_types(cls: type, params: Mapping[str, Any], what: str) -> None:
    """Reject a value whose type does not match the dataclass field it sets (``cara="flase"`` is
    not a boolean: a truthy string would silently turn CARA on). Non-dataclasses pass."""
    if not dataclasses.is_dataclass(cls):
        return
    hints = typing.get_type_hints(cls)
    for name, value in params.items():
        if name in hints and (problem := type_problem(value, hints[name])):
            raise BadValueError(f"{what}: {name} {problem}; got {value!r}")


_EXPECT = {bool: "must be true or false", int: "must be an integer", float: "must be a number",
           str: "must be a string"}  # fmt: skip


def type_problem(value: Any, hint: Any) -> str | None:
    """Why ``value`` does not fit the annotation ``hint`` ("must be true or false", ...), or None.

    Strict where a silent cast would change meaning: a bool field takes only booleans, an int
    field only integers (not booleans, not 2.5), a float field any finite-or-not real number but
    not a boolean or a string. Unions, ``Literal`` and containers are checked by kind; other
    annotations (classes, ``Any``) pass."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if any(type_problem(value, a) is None for a in args):
            return None
        problems = [type_problem(value, a) for a in args if a is not type(None)]
        kinds = [p.removeprefix("must be ") for p in problems if p]
        null = " (or null)" if type(None) in args else ""
        return "must be " + " or ".join(dict.fromkeys(kinds)) + null
    if hint is type(None):
        return None if value is None else "must be null"
    if origin is typing.Literal:
        allowed = typing.get_args(hint)
        return None if value in allowed else f"must be one of {', '.join(map(repr, allowed))}"
    if hint is bool:
        return None if isinstance(value, bool) else _EXPECT[bool]
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else _EXPECT[int]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else _EXPECT[float]
    if hint is str:
        return None if isinstance(value, str) else _EXPECT[str]
    base = origin or hint
    if base in (dict, Mapping) or (isinstance(base, type) and issubclass(base, Mapping)):
        return None if isinstance(value, Mapping) else "must be a mapping"
    if base in (list, tuple, typing.Sequence):
        return None if isinstance(value, list | tuple) else "must be a list"
    return None
