"""The local trainer's run configuration: one typed tree, its defaults in one place.

``conf/train.yaml`` and ``conf/trainer/*.yaml`` list the same values so a hydra user sees them
(``tests/trainers/local/test_run_config.py`` keeps the files in step with these classes). The
trainer (:func:`arenabench.trainers.local.trainer.train`) still takes the resolved mapping hydra
produces (tests and benchmarks pass plain dicts) and converts it with
:meth:`RunConfig.from_mapping`, so a mistyped or moved key fails before any step runs instead of
being ignored.

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
from arenabench.registry import type_problem


def _at_least(default, lo, *, above: bool = False):
    """A field whose value must be >= ``lo`` (> ``lo`` with ``above``): checked by :func:`_build`
    before anything runs (``steps=-5`` is one error, not a FAILED run 20 s later)."""
    return field(default=default, metadata={"min": lo, "above": above})


def _between(default, lo, hi):
    return field(default=default, metadata={"min": lo, "max": hi})


def _one_of(default, choices):
    return field(default=default, metadata={"choices": tuple(choices)})


# keys that used to live elsewhere: the error for the old spelling names the new one
MOVED = {"trainer.judge_retries": "engine.max_retries"}


@dataclass(frozen=True)
class TrainerConfig:
    """Loss, optimizer, sampling temperature and tiny-model size (``conf/trainer``; defaults =
    ``grpo.yaml``)."""

    algo: str = "grpo"  # a name in arenabench.trainers.losses (checked by validate_run)
    lr: float = _at_least(1.0e-3, 0.0, above=True)
    temperature: float = _at_least(1.0, 0.0, above=True)
    clip_low: float = _at_least(0.2, 0.0)
    clip_high: float = _at_least(0.2, 0.0)
    kl_coef: float = _at_least(0.001, 0.0)
    epochs: int = _at_least(1, 1)  # policy-gradient passes over each step's rollouts
    grad_clip: float = _at_least(1.0, 0.0, above=True)
    d_model: int = _at_least(32, 1)
    n_layer: int = _at_least(2, 1)
    n_head: int = _at_least(4, 1)
    tie_head: bool = True  # output head = the token embedding (False: a separate linear head)
    threads: int = _at_least(1, 1)  # torch threads
    # judge health as a run outcome: a step in which MORE than this share of the judge requests
    # still failed after retries stops the run FAILED with the judge's last error (null: never by
    # share); a first step in which every request failed always does (trainer.py judge_health)
    max_judge_failure_share: float | None = _between(0.5, 0.0, 1.0)


@dataclass(frozen=True)
class EngineConfig:
    """What the engine does between constructor and judge (retries are its job, not the
    trainer's)."""

    max_retries: int = _at_least(2, 0)  # re-asks of a failed/NaN judge reply before it counts as a failure
    # a group with a larger share of failed judge requests trains with advantage 0 (null: never);
    # arenabench/advantages.py mask_unreliable states why 0.25
    max_failed_share: float | None = _between(DEFAULT_MAX_FAILED_SHARE, 0.0, 1.0)
    # lockstep | pipelined | auto (arenabench/engine.py): auto pipelines a served judge
    # (OpenAI-compatible) and keeps batch judges (simulated, vLLM offline) in lockstep
    schedule: str = _one_of("auto", ("auto", "lockstep", "pipelined"))
    # pipelined: requests in flight (null: the judge's max_concurrency)
    max_inflight: int | None = _at_least(None, 1)


@dataclass(frozen=True)
class TrackingConfig:
    """Where the hydra app logs the run (``conf/tracking``); the trainer itself ignores it."""

    enabled: bool = True
    uri: str | None = None  # null: $MLFLOW_TRACKING_URI, else sqlite:///results/mlflow.db
    experiment: str = "default"  # conf files set ${name}
    flush_every: int = _at_least(50, 1)
    # ... or this many seconds after the last flush, whichever comes first: an outage of a
    # tracking server costs at most one window (issue 43; docs/cluster.md)
    flush_seconds: float = _at_least(30.0, 0.0)
    # how long a tracking server that is away is retried (mid-run, and at the run's end) before
    # the job stops with one line (the run FAILED with the reason where the server can be reached)
    retry_s: float = _at_least(60.0, 0.0)
    skip_finished: bool = True  # skip a job whose identical run already FINISHED
    create: bool = False  # make a missing sqlite folder of ``uri`` (else: an error, a typo guard)


@dataclass(frozen=True)
class RunConfig:
    """One local training run: the resolved ``conf/train.yaml`` tree, typed."""

    name: str = "default"  # the MLflow experiment
    seed: int = 0
    steps: int = _at_least(100, 1)
    prompts_per_step: int = _at_least(8, 1)  # K
    group_size: int = _at_least(8, 2)  # N: GRPO's (r − μ)/σ and every tournament need two
    eval_every: int = _at_least(10, 0)  # 0: only the final eval
    probe_size: int = _at_least(8, 0)  # trajectories re-judged per step for σ_noise ...
    probe_repeats: int = _at_least(4, 2)  # ... this many times each (a std needs two)
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
            "tokenizer": "tiny-bpe",  # judge tokens counted (judges/tokens.py)
            "rubric": "open_writing",
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
    """``cls`` from ``values``: nested dataclasses recursively, scalar fields type- and
    range-checked (strictly: ``progress=flase`` is an error, not ``bool("flase")``; an int is
    accepted for a float), mappings copied; every problem appended to ``errors``."""
    if not isinstance(values, Mapping):
        errors.append(f"{prefix.rstrip('.') or 'config'} must be a mapping; got {type(values).__name__}")
        return cls()
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields)
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
            continue
        if problem := type_problem(v, t):
            errors.append(f"{prefix}{name} {problem}; got {v!r}")
            continue
        if problem := _range_problem(v, fields[name].metadata):
            errors.append(f"{prefix}{name} {problem}; got {v!r}")
            continue
        if t is float or (isinstance(v, int) and float in typing.get_args(t)):
            v = float(v)
        kwargs[name] = dict(v) if isinstance(v, Mapping) else v
    return cls(**kwargs)


def _range_problem(v: Any, meta: Mapping[str, Any]) -> str | None:
    if v is None or not meta:
        return None
    if "choices" in meta and v not in meta["choices"]:
        return f"must be one of {', '.join(meta['choices'])}"
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and not (v > lo if meta.get("above") else v >= lo):
        return f"must be {'>' if meta.get('above') else '>='} {lo}"
    if hi is not None and not v <= hi:
        return f"must be <= {hi}"
    return None


class ConfigError(ValueError):
    """A user's configuration is invalid: one line naming the valid choices (the CLI entry points
    print it and exit 2, before any run or sweep starts)."""


def validate_run(cfg: Mapping[str, Any] | RunConfig) -> RunConfig:
    """Everything a run's config names, checked before anything runs: the typed tree
    (:meth:`RunConfig.from_mapping`: keys, types, ranges), then the reward constructor (built:
    name, parameters, their types and ranges), the judge (:func:`arenabench.judges.factory.check`:
    kind, parameters; the simulator's preset and values), the task, the init and the policy loss.
    Builds nothing heavy (no model, no connection, no MLflow). Raises one :class:`ConfigError`."""
    from arenabench import rewards
    from arenabench.judges.factory import check as check_judge
    from arenabench.trainers.local.sft import InitConfig
    from arenabench.trainers.local.task import TASKS
    from arenabench.trainers.losses import POLICY_LOSSES

    try:
        rc = RunConfig.from_mapping(cfg)
        if rc.trainer.algo not in POLICY_LOSSES:
            raise ValueError(
                f"unknown trainer.algo {rc.trainer.algo!r}; choices: {', '.join(sorted(POLICY_LOSSES))}"
            )
        rewards.build(rc.reward)
        check_judge(rc.judge)
        task = dict(rc.task)
        TASKS.get(task.pop("name", "preference"), **task)
        InitConfig.of(rc.init)
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(str(exc)) from None
    return rc


def check_store(cfg: RunConfig) -> None:
    """The run's MLflow store can be used: its folder exists (or ``tracking.create``) and it opens
    (a corrupt file is one error naming it). Nothing when tracking is off."""
    if not cfg.tracking.enabled:
        return
    from arenabench.tracking import open_client

    try:
        open_client(cfg.tracking.uri, create=cfg.tracking.create)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def sweep_overrides(config) -> list[list[str]]:
    """The override list of every job a hydra multirun of ``config`` will launch: the sweeper's
    ``params`` plus the command line's task overrides (which win), expanded as hydra's
    ``BasicSweeper`` does."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    args = [f"{k}={v}" for k, v in params.items()]
    args += list(OmegaConf.to_container(config.hydra.overrides.task, resolve=False))
    parsed = OverridesParser.create().parse_overrides(args)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def fail(message: str) -> typing.NoReturn:
    """A user error: one line on stderr, exit status 2 (argparse's), no traceback."""
    import sys

    print(f"arenabench-train: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _resolved(config) -> dict[str, Any]:
    from omegaconf import OmegaConf

    c = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
    c.pop("hydra", None)
    return OmegaConf.to_container(c, resolve=True)


def _hydra_callback_base():
    from hydra.experimental.callback import Callback

    return Callback


class ValidateBeforeRun(_hydra_callback_base()):
    """Hydra callback (``conf/train.yaml``: ``hydra.callbacks``): :func:`validate_run` on the run's
    config — for a multirun on *every* job's config — and :func:`check_store`, before the first
    job starts. A bad value is one line naming the valid choices, exit 2: no traceback, no
    FAILED MLflow run, no half-launched sweep."""

    def on_run_start(self, config, **kwargs) -> None:
        try:
            check_store(validate_run(_resolved(config)))
        except ConfigError as exc:
            fail(str(exc))

    def on_multirun_start(self, config, config_name: str | None = None, **kwargs) -> None:
        from hydra import compose

        jobs = sweep_overrides(config)
        # composing costs ~0.1-1 s per job (hydra composes each one again to launch it): jobs that
        # differ only in their seed are checked once, their seeds as integers
        distinct: dict[tuple[str, ...], list[str]] = {}
        for job in jobs:
            for o in job:
                key, _, value = o.partition("=")
                if key.lstrip("+~") == "seed" and type_problem(_int_or_text(value), int):
                    fail(f"seed must be an integer; got {value!r} (job: {' '.join(job)})")
            distinct.setdefault(tuple(o for o in job if not o.startswith("seed=")), job)
        checked = []
        for job in distinct.values():
            try:
                checked.append(validate_run(_resolved(compose(config_name=config_name, overrides=job))))
            except ConfigError as exc:
                fail(f"{exc} (job: {' '.join(job)}; {len(jobs)} jobs, none started)")
            except Exception as exc:  # a hydra composition error (unknown group option, ...)
                fail(f"{str(exc).strip().splitlines()[0]} (job: {' '.join(job)})")
        stores = {(rc.tracking.enabled, rc.tracking.uri, rc.tracking.create): rc for rc in checked}
        for rc in stores.values():
            try:
                check_store(rc)
            except ConfigError as exc:
                fail(str(exc))


def _int_or_text(value: str):
    try:
        return int(value)
    except ValueError:
        return value
