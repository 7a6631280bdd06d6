"""The sweep's shortcuts around hydra's composition (arenabench/sweep.py) give hydra's configs."""

from __future__ import annotations

import pytest
from helpers import CONF
from omegaconf import OmegaConf

from arenabench.sweep import bundles, seed_groups, seed_variant


@pytest.fixture(scope="module")
def compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield lambda overrides: hydra_compose("train", overrides=list(overrides), return_hydra_config=True)


@pytest.mark.parametrize(
    "common",
    [
        ["experiment=table2", "reward=anchor", "steps=7"],
        # the teacher draw is interpolated from the seed (init.seed: ${seed})
        ["experiment=table2_imperfect", "reward=round_robin"],
        ["judge=integer", "seed=3", "reward=swiss"],  # the seed override first of two jobs' lists
    ],
)
def test_seed_variant_is_hydras_composition(compose, common):
    if "seed=3" in common:
        a, b = common, [o if o != "seed=3" else "seed=12" for o in common]
    else:
        a, b = [*common, "seed=0"], [*common, "seed=5"]
    derived = seed_variant(compose(a), a, b)
    fresh = compose(b)
    assert derived is not None
    assert OmegaConf.to_yaml(derived) == OmegaConf.to_yaml(fresh)
    assert OmegaConf.is_struct(derived) and OmegaConf.is_struct(fresh)
    strip = {k: v for k, v in OmegaConf.to_container(derived, resolve=False).items() if k != "hydra"}
    want = {k: v for k, v in OmegaConf.to_container(fresh, resolve=False).items() if k != "hydra"}
    assert OmegaConf.to_container(OmegaConf.create(strip), resolve=True) == OmegaConf.to_container(
        OmegaConf.create(want), resolve=True
    )
    assert derived.hydra.job.override_dirname == fresh.hydra.job.override_dirname
    assert "seed=5" in derived.hydra.job.override_dirname or "seed=12" in derived.hydra.job.override_dirname


def test_seed_variant_declines_what_is_not_a_seed_change(compose):
    a = ["experiment=table2", "reward=anchor", "seed=0"]
    base = compose(a)
    for b in (
        ["experiment=table2", "reward=swiss", "seed=0"],  # another arm
        ["experiment=table2", "reward=anchor", "seed=1", "steps=3"],  # more overrides
        ["experiment=table2", "reward=anchor", "seed=01"],  # not hydra's spelling of an int
        ["experiment=table2", "reward=anchor", "seed=x"],
        ["experiment=table2", "reward=anchor", "+seed=1"],
    ):
        assert seed_variant(base, a, b) is None, b


def test_seed_groups_and_bundles():
    jobs = [
        ["reward=a", "seed=0"], ["reward=a", "seed=1"], ["reward=b", "seed=0"], ["reward=a", "seed=x"],
        ["reward=b", "seed=1"], ["reward=c"], ["reward=a", "seed=-2"],
    ]  # fmt: skip
    assert seed_groups(jobs) == [[0, 1, 6], [2, 4], [3], [5]]
    assert bundles(jobs, size=10, workers=2) == [[0, 1, 6], [2, 4], [3], [5]]  # ≤ ⌈7/2⌉ a batch
    assert bundles(jobs, size=10, workers=4) == [[0, 1], [2, 4], [3], [5], [6]]  # ≤ 2: split
    assert bundles(jobs, size=1, workers=2) == [[i] for i in range(7)]
