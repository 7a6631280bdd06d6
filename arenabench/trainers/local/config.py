"""The local trainer's run configuration: one typed tree, its defaults in one place.

``conf/train.yaml`` and ``conf/trainer/*.yaml`` list the same values so a hydra user sees them
(``tests/test_run_config.py`` keeps the files in step with these classes). :func:`train` still
takes the resolved mapping hydra produces (tests and benchmarks pass plain dicts) and converts it
with :meth:`RunConfig.from_mapping`, so a mistyped or moved key fails before any step runs instead
of being ignored.

``reward``, ``judge``, ``task`` and ``init`` stay mappings: their builders (the reward and judge
registries, ``TASKS``, ``sft.InitConfig``) own and validate their parameters.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from arenabench.advantages import DEFAULT_MAX_FAILED_SHARE

# keys that used to live elsewhere: the error for the old spelling names the new one
MOVED = {"trainer.judge_retries": "engine.max_retries"}


@dataclass(frozen=True)
class TrainerConfig:
    """Loss, optimizer, sampling temperature and tiny-model size (``conf/trainer``; defaults =
    ``grpo.yaml``)."""

    algo: str = "grpo"  # a name in arenabench.trainers.losses
    lr: float = 1.0e-3
    temperature: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.001
    epochs: int = 1  # policy-gradient passes over each step's rollouts
    grad_clip: float = 1.0
    d_model: int = 32
    n_layer: int = 2
    n_head: int = 4
    tie_head: bool = True  # output head = the token embedding (False: a separate linear head)
    threads: int = 1  # torch threads
    # sampling with a KV cache (policy.py): ~2× faster steps; false = the full re-forward per
    # token, bit-identical to runs made before the cache existed (float rounding differs)
    kv_cache: bool = True


@dataclass(frozen=True)
class EngineConfig:
    """What the engine does between constructor and judge (retries are its job, not the
    trainer's)."""

    max_retries: int = 2  # re-asks of a failed/NaN judge reply before it counts as a failure
    # a group with a larger share of failed judge requests trains with advantage 0 (null: never);
    # arenabench/advantages.py mask_unreliable states why 0.25
    max_failed_share: float | None = DEFAULT_MAX_FAILED_SHARE
    # lockstep | pipelined | auto (arenabench/engine.py): auto pipelines a served judge
    # (OpenAI-compatible) and keeps batch judges (simulated, vLLM offline) in lockstep
    schedule: str = "auto"
    max_inflight: int | None = None  # pipelined: requests in flight (null: the judge's max_concurrency)


@dataclass(frozen=True)
class TrackingConfig:
    """Where the hydra app logs the run (``conf/tracking``); :func:`train` itself ignores it."""

    enabled: bool = True
    uri: str | None = None  # null: $MLFLOW_TRACKING_URI, else sqlite:///results/mlflow.db
    experiment: str = "default"  # conf files set ${name}
    flush_every: int = 50
    skip_finished: bool = True  # skip a job whose identical run already FINISHED


@dataclass(frozen=True)
class RunConfig:
    """One local training run: the resolved ``conf/train.yaml`` tree, typed."""

    name: str = "default"  # the MLflow experiment
    seed: int = 0
    steps: int = 100
    prompts_per_step: int = 8  # K
    group_size: int = 8  # N
    eval_every: int = 10  # 0: only the final eval
    probe_size: int = 8  # trajectories re-judged per step for σ_noise ...
    probe_repeats: int = 4  # ... this many times each
    progress: bool = True
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    reward: dict[str, Any] = field(default_factory=lambda: {"name": "seeded_single_elim"})
    judge: dict[str, Any] = field(
        default_factory=lambda: {
            "kind": "simulated",
            "preset": "calibrated",
            "seed": 0,
            "cache": None,
            "faults": None,
        }
    )
    task: dict[str, Any] = field(default_factory=lambda: {"name": "preference"})
    # conf/init: the policy RL starts from; validated by trainers/local/sft.py's InitConfig
    init: dict[str, Any] = field(default_factory=lambda: {"kind": "random"})

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | RunConfig) -> RunConfig:
        """The typed config of a resolved mapping (missing keys take the defaults above).

        Raises one ``ValueError`` naming every unknown key and the valid keys of its section."""
        if isinstance(cfg, RunConfig):
            return cfg
        errors: list[str] = []
        out = _build(cls, cfg, "", errors)
        if errors:
            raise ValueError("invalid run config: " + "; ".join(errors))
        return out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)


def _build(cls, values: Mapping[str, Any], prefix: str, errors: list[str]):
    """``cls`` from ``values``: nested dataclasses recursively, int/float/bool fields cast (as
    ``train`` always did), mappings copied; unknown keys appended to ``errors``."""
    if not isinstance(values, Mapping):
        errors.append(f"{prefix.rstrip('.') or 'config'} must be a mapping; got {type(values).__name__}")
        return cls()
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in values if k not in names]
    for k in unknown:
        key = f"{prefix}{k}"
        hint = f" (moved to {MOVED[key]})" if key in MOVED else ""
        errors.append(
            f"unknown key {key!r}{hint}; valid {prefix.rstrip('.') or 'top-level'} keys: {', '.join(names)}"
        )
    kwargs = {}
    for name in names:
        if name not in values:
            continue
        v, t = values[name], hints[name]
        if dataclasses.is_dataclass(t):
            kwargs[name] = _build(t, v, f"{prefix}{name}.", errors)
        elif t in (int, float, bool, str):
            kwargs[name] = t(v)
        elif isinstance(v, Mapping):
            kwargs[name] = dict(v)
        else:
            kwargs[name] = v
    return cls(**kwargs)
