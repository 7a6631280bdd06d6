"""Toy tasks for the local trainer: a response's *true quality* is known to the simulated judge
and to the evaluator, never to the policy.

A prompt p is a few tokens; a response is ``response_len`` tokens. Each token v has a hidden
value ``(w·g[v] + h[p, v]) / √(1 + w²)`` (shared + prompt-specific, g, h ~ N(0, 1), so every value
is N(0, 1); ``w = shared_weight``, default 1; 0 makes the values purely prompt-specific, so no
prompt-blind policy does well: ``conf/task/hard.yaml``), and the quality of a
response is ``base + scale · mean_t value[p, y_t]``. A random policy sits near ``base``; a policy
that learns the good tokens climbs towards ``base + scale·max_v value`` ≈ 3.5 — into the
saturated region of the simulated pointwise judge, where discriminative collapse happens.

The ``rlvr`` variant adds a verifiable answer: the last token must equal the prompt's target
(the text ends in ``Answer: t<k>``), worth ``answer_bonus`` latent units; ``exact_match`` reads it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from arenabench.registry import Registry
from arenabench.types import Group, Trajectory

TASKS: Registry = Registry("task")


@TASKS.register("preference")
@dataclass
class PreferenceTask:
    n_prompts: int = 32
    vocab: int = 16
    prompt_len: int = 4
    response_len: int = 8
    base: float = 0.5
    scale: float = 1.5
    seed: int = 0
    shared_weight: float = 1.0
    values: np.ndarray = field(init=False, repr=False)
    prompts: np.ndarray = field(init=False, repr=False)

    verifiable = False

    def __post_init__(self) -> None:
        for name in ("n_prompts", "vocab", "prompt_len", "response_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"task {name} must be >= 1; got {getattr(self, name)}")
        rng = np.random.default_rng([self.seed, 7])
        shared = rng.standard_normal(self.vocab)
        own = rng.standard_normal((self.n_prompts, self.vocab))
        w = float(self.shared_weight)
        self.values = (w * shared[None, :] + own) / np.sqrt(1.0 + w * w)
        self.prompts = rng.integers(0, self.vocab, size=(self.n_prompts, self.prompt_len))

    def quality(self, prompt_ids: np.ndarray, responses: np.ndarray) -> np.ndarray:
        """True quality of each response (rows) to its prompt."""
        v = self.values[prompt_ids[:, None], responses]
        return self.base + self.scale * v.mean(axis=1)

    def text(self, prompt_id: int, response: np.ndarray) -> str:
        return " ".join([self._words[t] for t in response.tolist()])

    @functools.cached_property
    def _words(self) -> list[str]:
        """Token v's text ``t<v>`` (built once: a step renders K·N responses per seed)."""
        return [f"t{v}" for v in range(self.vocab)]

    def group(self, prompt_id: int, responses: np.ndarray, anchor: int | None = 0) -> Group:
        """The N responses to one prompt as a Group the engine and judges understand."""
        q = self.quality(np.full(len(responses), prompt_id), responses)
        trajs = tuple(
            Trajectory(
                id=f"p{prompt_id}-{k}",
                text=self.text(prompt_id, r),
                length=self.response_len,
                meta={"quality": float(q[k])},
            )
            for k, r in enumerate(responses)
        )
        return Group(
            prompt=f"prompt {prompt_id}", trajectories=trajs, anchor=anchor, meta=self.meta(prompt_id)
        )

    def meta(self, prompt_id: int) -> dict:
        return {"prompt_id": prompt_id}


@TASKS.register("rlvr")
@dataclass
class RLVRTask(PreferenceTask):
    """The preference task with a verifiable final answer (see the module docstring)."""

    answer_bonus: float = 1.0
    targets: np.ndarray = field(init=False, repr=False)

    verifiable = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self.targets = np.random.default_rng([self.seed, 11]).integers(0, self.vocab, self.n_prompts)

    def correct(self, prompt_ids, responses) -> np.ndarray:
        """What the exact-match verifier says of each response: its last token is the target."""
        return responses[:, -1] == self.targets[prompt_ids]

    def answer_elsewhere(self, prompt_ids, responses) -> np.ndarray:
        """Per response, the share of its other positions (all but the last) holding the target
        token: the rlvr arm's degeneration (the answer token emitted everywhere) in one number."""
        return np.mean(responses[:, :-1] == self.targets[prompt_ids][:, None], axis=1)

    def quality(self, prompt_ids, responses):
        right = self.correct(prompt_ids, responses)
        return super().quality(prompt_ids, responses) + self.answer_bonus * right

    def text(self, prompt_id, response):
        return f"{super().text(prompt_id, response)} Answer: t{int(response[-1])}"

    def meta(self, prompt_id):
        return {"prompt_id": prompt_id, "answer": f"t{int(self.targets[prompt_id])}"}


from arenabench.trainers.local import hackable  # noqa: E402, F401  (registers task=hackable)
