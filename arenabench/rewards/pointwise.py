"""Pointwise LLM-as-judge baseline: one absolute score per trajectory, then GRPO standardization."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arenabench.rewards.base import Constructor, Outcome, register
from arenabench.types import Score


@register("pointwise")
@dataclass
class Pointwise(Constructor):
    """reward = judge score (mean over ``votes`` samples); advantage = (r − μ)/(σ + ε).

    This is the path that discriminative collapse breaks: when in-group scores sit in a
    narrow band, σ is mostly judge noise and dividing by it amplifies that noise. A
    trajectory whose every score request failed is left unranked (advantage 0, flagged).

    No information, no advantage: a ranking decision that the judge's evidence does not support
    carries no advantage. Equal scores (a rubric grid makes them common) share their rank and
    get equal rewards; all equal or all failed: advantage 0. Nothing is ordered by index.
    """

    unused_params = ("order",)  # scores only: no comparison to show in an order

    def play(self, group, rng):
        replies = yield [Score(i, votes=self.votes) for i in range(len(group))]
        score = np.array([r.score for r in replies])
        flags = ["singleton_group"] if len(group) == 1 else []
        return Outcome(reward=score, flags=flags, extra={"score": score})
