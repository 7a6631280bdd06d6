import numpy as np
import pytest

from arenabench import Engine, Group, Trajectory, judges


def make_group(quality, anchor=0, prompt="p", lengths=None, texts=None) -> Group:
    quality = np.asarray(quality, dtype=float)
    n = len(quality)
    lengths = [500] * n if lengths is None else lengths
    texts = [f"{prompt} rollout {i}" for i in range(n)] if texts is None else texts
    trajs = tuple(
        Trajectory(f"{prompt}-{i}", texts[i], int(lengths[i]), {"quality": float(quality[i])})
        for i in range(n)
    )
    # meta as sim.simulate_groups sets it: the simulated reference policy (rrc_agr) centres
    # its anchors on prompt_quality; no text states "Answer: 42", so exact_match gives all 0
    meta = {"prompt_quality": float(quality.mean()), "answer": "42"}
    return Group(prompt, trajs, anchor=anchor, meta=meta)


def random_groups(n, k=1, seed=0, spread=0.2, anchor="random") -> list[Group]:
    """k groups of distinct random qualities; the greedy anchor at a random index."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(k):
        q = 1.7 + spread * rng.standard_normal(n)
        a = int(rng.integers(n)) if anchor == "random" else 0
        out.append(make_group(q, anchor=a, prompt=f"s{seed}g{g}"))
    return out


def true_rank(group: Group) -> np.ndarray:
    q = np.array([t.meta["quality"] for t in group.trajectories])
    return np.argsort(np.argsort(-q)).astype(float)


@pytest.fixture
def noiseless():
    return Engine(judges.get("noiseless"))


@pytest.fixture
def calibrated():
    return Engine(judges.get("calibrated"))
