"""RRC's anchor pool: rollouts of a fixed reference policy, generated once per prompt and reused.

The pool is the expensive, reusable part of AGR: each prompt's ``n`` anchors cost ``n``
reference generations the first time the prompt is seen and nothing afterwards (until an
optional refresh). With a ``path`` the pool is written after every generation (atomically),
so a crashed sweep resumes with the same anchors and does not pay for them twice.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from arenabench.registry import Registry
from arenabench.types import Group, Trajectory, content_hash

# name -> reference policy class (AGR's ``reference``)
REFERENCE_POLICIES: Registry = Registry("reference policy")


@REFERENCE_POLICIES.register("simulated")
@dataclass
class SimulatedReference:
    """AGR's default reference policy (``"simulated"``), for simulated prompts: rollouts of quality
    μ_g + N(0, spread), μ_g the group's ``meta["prompt_quality"]``, i.e. the step-0 policy of
    :func:`arenabench.sim.simulate_groups` (``spread``'s default is ``sim.GROUP_SPREAD``, tested
    equal; a trainer binds its own policy instead). Deterministic in (seed, prompt, generation),
    so a stored pool can be regenerated and checked."""

    spread: float = 0.2
    seed: int = 0

    def generate(self, group: Group, n: int, generation: int = 0) -> list[Trajectory]:
        mu = group.meta.get("prompt_quality")
        if mu is None:
            raise ValueError(
                "the simulated reference policy needs Group.meta['prompt_quality'] (set by "
                "sim.simulate_groups); for other groups give the constructor a stored anchor pool"
            )
        rng = np.random.default_rng([self.seed, content_hash(group.prompt), generation])
        q = mu + self.spread * rng.standard_normal(n)
        return [
            Trajectory(
                id=f"ref{generation}-{k}",
                text=f"[reference gen {generation} rollout {k} for {group.prompt}]",
                length=512,
                meta={"quality": float(q[k]), "reference": True},
            )
            for k in range(n)
        ]


class AnchorPool:
    """prompt → anchors (a tuple of :class:`Trajectory`) from ``policy``.

    ``policy.generate(group, n, generation)`` makes a prompt's anchors; with ``policy=None``
    the pool is fixed (e.g. loaded from a file) and a prompt it lacks is an error.
    ``refresh_every=k > 0`` regenerates a prompt's anchors once they are k steps old (a new
    ``generation``; a trainer may point ``policy`` at a newer snapshot first).
    """

    def __init__(self, policy=None, n_anchors: int = 4, refresh_every: int = 0, path: str | None = None):
        if n_anchors < 1:
            raise ValueError(f"n_anchors must be >= 1; got {n_anchors}")
        if refresh_every < 0:
            raise ValueError(f"refresh_every must be >= 0 (0 = never); got {refresh_every}")
        self.policy = policy
        self.n_anchors = n_anchors
        self.refresh_every = refresh_every
        self.path = Path(path) if path else None
        self.entries: dict[str, dict] = {}  # prompt -> {"generation", "step", "anchors"}
        self.generated = 0  # reference rollouts generated: the pool's one-off cost
        self.hits = 0  # lookups served from the pool
        if self.path is not None and self.path.exists():
            self.load(self.path)

    @classmethod
    def fixed(cls, anchors: dict[str, list[Trajectory]]) -> AnchorPool:
        """A pool of given anchors and no policy (a prompt outside it is an error)."""
        pool = cls(policy=None, n_anchors=max((len(a) for a in anchors.values()), default=1))
        pool.entries = {p: {"generation": 0, "step": 0, "anchors": tuple(a)} for p, a in anchors.items()}
        return pool

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, prompt: object) -> bool:
        return prompt in self.entries

    def anchors(self, group: Group, step: int = 0) -> tuple[Trajectory, ...]:
        """The prompt's anchors, generating (and storing) them on first use or when stale."""
        entry = self.entries.get(group.prompt)
        stale = (
            entry is not None
            and self.refresh_every > 0
            and self.policy is not None
            and step - entry["step"] >= self.refresh_every
        )
        if entry is not None and not stale:
            self.hits += 1
            return entry["anchors"]
        if self.policy is None:
            raise ValueError(
                f"anchor pool has no anchors for prompt {group.prompt!r} ({len(self)} prompts stored) "
                "and no reference policy to generate them"
            )
        generation = 0 if entry is None else entry["generation"] + 1
        made = tuple(self.policy.generate(group, self.n_anchors, generation))
        if len(made) != self.n_anchors:
            raise RuntimeError(f"reference policy made {len(made)} anchors, asked for {self.n_anchors}")
        self.generated += len(made)
        self.entries[group.prompt] = {"generation": generation, "step": step, "anchors": made}
        if self.path is not None:
            self.save(self.path)
        return made

    # -- durability ----------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the pool as JSON, atomically (a crash leaves the old file or the new one)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "n_anchors": self.n_anchors,
            "prompts": {
                p: {
                    **{k: v for k, v in e.items() if k != "anchors"},
                    "anchors": [asdict(t) for t in e["anchors"]],
                }
                for p, e in self.entries.items()
            },
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load(self, path: str | os.PathLike) -> None:
        data = json.loads(Path(path).read_text())
        if data.get("n_anchors") != self.n_anchors:
            raise ValueError(
                f"anchor pool {path} holds {data.get('n_anchors')} anchors per prompt; this run asks "
                f"for {self.n_anchors}: use another pool_path or the same n_anchors"
            )
        self.entries = {
            p: {**e, "anchors": tuple(Trajectory(**t) for t in e["anchors"])}
            for p, e in data["prompts"].items()
        }
