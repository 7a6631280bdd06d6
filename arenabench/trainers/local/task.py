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


@TASKS.register("chain")
@dataclass
class ChainTask(PreferenceTask):
    """Reasoning that causes the answer (issue 42; Reasoning Arena's setting).

    The response is a chain of ``response_len`` steps; each step token ``v`` is either a *valid*
    step for the prompt (``valid[p, v]``) or not. The state starts at ``s0[p]``; a valid step adds
    the prompt's increment ``d[p]``, an invalid one adds ``d[p] + e[p, v]`` with an error
    ``e ∈ [1, modulus)``; everything is mod ``modulus``. The final answer is the state the chain
    reaches (the text ends in ``Answer: <state>``) and the target is what an all-valid chain
    reaches, ``s0 + L·d``. So a chain with one invalid step is always wrong, one with two or more
    is right only when the errors happen to cancel (≈ 1/modulus: a lucky, unsupported answer),
    and a policy whose steps are more often valid reaches the target more often. ``exact_match``
    checks only that final answer.

    The judged quality is the reasoning's: ``base + scale · mean_t (valid[p, y_t] +
    pref_weight · value[p, y_t])`` — the share of valid steps plus (weighted down) the preference
    task's token values, which rank the valid steps among themselves (rigour among correct
    chains). No answer bonus: within a verifier group every trace has the same answer reward, and
    what the judge adds there is the reasoning.

    The prompts are a mixture, as the papers' data are: on an *easy* prompt the valid steps are
    the ``valid_easy`` tokens of highest value (the SFT teacher's instincts, which imitate the
    values, are mostly valid: nearly every chain is right); on a *hard* prompt
    (``hard_share`` of them) they are ``valid_hard`` tokens drawn independently of the values (the
    SFT start's instincts say nothing about which steps are valid: about half its steps are, so
    nearly every chain is wrong, yet traces differ in how many steps they got right). So at the
    SFT start (init=sft_chain) a large share of verifier groups is all-equal — all right on easy
    prompts, all wrong on hard ones (measured: docs/training.md) — and within the all-wrong
    groups the traces' reasoning quality differs: the case Reasoning Arena routes to a judge.
    The values and prompts are the preference task's (same ``seed``).
    """

    valid_easy: int = 10
    valid_hard: int = 6
    hard_share: float = 0.5
    modulus: int = 64
    pref_weight: float = 0.25
    valid: np.ndarray = field(init=False, repr=False)
    hard: np.ndarray = field(init=False, repr=False)
    start: np.ndarray = field(init=False, repr=False)
    increment: np.ndarray = field(init=False, repr=False)
    error: np.ndarray = field(init=False, repr=False)
    targets: np.ndarray = field(init=False, repr=False)

    verifiable = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("valid_easy", "valid_hard"):
            if not 1 <= getattr(self, name) <= self.vocab:
                raise ValueError(f"task {name} must be in [1, vocab={self.vocab}]; got {getattr(self, name)}")
        if not 0.0 <= self.hard_share <= 1.0:
            raise ValueError(f"task hard_share must be in [0, 1]; got {self.hard_share}")
        if self.modulus < 2:
            raise ValueError(f"task modulus must be >= 2; got {self.modulus}")
        if not np.isfinite(self.pref_weight):
            raise ValueError(f"task pref_weight must be finite; got {self.pref_weight}")
        rng = np.random.default_rng([self.seed, 13])
        P, V, M = self.n_prompts, self.vocab, self.modulus
        self.hard = rng.permutation(P) < round(self.hard_share * P)
        score = np.where(self.hard[:, None], rng.standard_normal((P, V)), self.values)
        rank = np.argsort(np.argsort(-score, axis=1, kind="stable"), axis=1, kind="stable")
        self.valid = rank < np.where(self.hard, self.valid_hard, self.valid_easy)[:, None]
        self.start = rng.integers(0, M, P)
        self.increment = rng.integers(1, M, P)
        self.error = np.where(self.valid, 0, rng.integers(1, M, (P, V)))
        self.targets = (self.start + self.response_len * self.increment) % M

    def answers(self, prompt_ids, responses) -> np.ndarray:
        """The state each chain reaches: its final answer."""
        prompt_ids = np.asarray(prompt_ids)
        err = self.error[prompt_ids[:, None], responses].sum(axis=1)
        return (self.start[prompt_ids] + responses.shape[1] * self.increment[prompt_ids] + err) % self.modulus

    def valid_share(self, prompt_ids, responses) -> np.ndarray:
        """Per response, the share of its steps that are valid (the reasoning's soundness)."""
        return self.valid[np.asarray(prompt_ids)[:, None], responses].mean(axis=1)

    def correct(self, prompt_ids, responses) -> np.ndarray:
        """What the exact-match verifier says of each response: the chain reaches the target."""
        return self.answers(prompt_ids, responses) == self.targets[np.asarray(prompt_ids)]

    def answer_elsewhere(self, prompt_ids, responses) -> np.ndarray:
        """0 for every response: the answer is computed by the chain, never emitted as a step
        token (the rlvr task's degeneration metric has nothing to measure here)."""
        return np.zeros(len(responses))

    def quality(self, prompt_ids, responses):
        prompt_ids = np.asarray(prompt_ids)
        per_step = (
            self.valid[prompt_ids[:, None], responses]
            + self.pref_weight * self.values[prompt_ids[:, None], responses]
        )
        return self.base + self.scale * per_step.mean(axis=1)

    def text(self, prompt_id, response):
        ans = int(self.answers(np.array([prompt_id]), response[None, :])[0])
        return f"{PreferenceTask.text(self, prompt_id, response)} Answer: {ans}"

    def meta(self, prompt_id):
        return {"prompt_id": prompt_id, "answer": str(int(self.targets[prompt_id]))}
