"""Verifiers: rule-based rewards for RLVR (Reasoning Arena keeps them where they discriminate)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from arenabench.registry import Registry
from arenabench.types import Group

REGISTRY: Registry = Registry("verifier")

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*([^\n]+)", re.IGNORECASE)


def extract_answer(text: str) -> str | None:
    """The last ``\\boxed{...}``, else the text after the last ``Answer:``; None if neither."""
    if boxed := _BOXED.findall(text):
        return boxed[-1]
    if found := _ANSWER.findall(text):
        return found[-1]
    return None


def normalize(answer: str) -> str:
    """Case, surrounding whitespace/``$``, a trailing period and inner spaces do not count."""
    a = answer.strip().strip("$").strip().rstrip(".").strip().lower()
    return re.sub(r"\s+", "", a)


@REGISTRY.register("exact_match")
@dataclass
class ExactMatch:
    """1.0 when the extracted final answer equals ``Group.meta["answer"]`` after
    :func:`normalize`, else 0.0 (no answer found counts as wrong)."""

    def __call__(self, group: Group) -> np.ndarray:
        if "answer" not in group.meta:
            raise ValueError(
                f"exact_match needs the reference answer in Group.meta['answer'] (prompt {group.prompt!r})"
            )
        ref = normalize(str(group.meta["answer"]))
        out = np.zeros(len(group))
        for k, t in enumerate(group.trajectories):
            got = extract_answer(t.text)
            out[k] = float(got is not None and normalize(got) == ref)
        return out


def get(name: str = "exact_match", **params):
    return REGISTRY.get(name, **params)


def names() -> list[str]:
    return REGISTRY.names()
