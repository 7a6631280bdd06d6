"""``arenabench-verl``: the launcher around ``verl.trainer.main_ppo`` — it composes the config,
owns the run's MLflow record, resume state and signal handling, and leaves verl's training loop
as it is.

It composes one of ``conf/verl/*.yaml`` — verl's own ``ppo_trainer`` config, our wiring
(``conf/verl/base.yaml``), a constructor from ``conf/reward``, a judge from ``conf/judge`` (or
``conf/verl/judge``: ``openai``, a served judge) and a loss from ``conf/verl/loss`` — applies
the command-line overrides, and hands the config to verl's ``main`` unchanged otherwise::

    arenabench-verl --config-name arenarl_n16 reward=round_robin judge=calibrated \\
        actor_rollout_ref.model.path=Qwen/Qwen3-4B data.train_files=... data.val_files=...
    arenabench-verl --config-name reasoning_arena_cispo --dry-run     # print the config, exit 0

``reward=X`` / ``judge=Y`` are shorthands for ``reward@arenabench.reward=X`` /
``judge@arenabench.judge=Y``: verl's config has a group called ``reward`` too, and a bare
``reward=X`` would silently replace verl's reward section. Everything else is a normal hydra
override of verl's keys (``+key=value`` to add one).

``trainer.device=cpu`` runs the same config on the host CPU (verl on a laptop): the launcher adds
the overrides and env of :mod:`arenabench.trainers.verl.cpu` (a CPU platform, FSDP2, the ``hf``
rollout backend), verl 0.9.1 only. ``actor_rollout_ref.rollout.name=hf`` on a GPU machine uses
the ``hf`` backend on the GPU instead of vLLM (:mod:`arenabench.trainers.verl.hf`).

Preemption: a launch closes its MLflow run KILLED on SIGTERM/SIGINT (also once Ray is up:
:class:`SigtermGuard`), FAILED on an error; the next
launch of the same job (:func:`job_identity`) closes as FAILED a run whose process died (SIGKILL);
a launch that resumes from a verl checkpoint continues its job's previous run in a new, linked run
(:func:`start_mlflow_run`), and the reward worker restores its counters (``arenabench.state_dir``).

Before starting verl it (1) puts ``arenabench.trainers.verl.advantage`` into
``VERL_USE_EXTERNAL_MODULES`` so every Ray worker registers the ``arenabench`` advantage
estimator, and (2) when ``trainer.logger`` holds ``mlflow``, opens the MLflow run itself — in the
local trainer's store (``$MLFLOW_TRACKING_URI`` or ``sqlite:///results/mlflow.db``, artifacts
next to it) with the local trainer's tags — and passes ``MLFLOW_TRACKING_URI`` and
``MLFLOW_RUN_ID`` to the Ray workers, so verl's own MLflow logger writes into that run and
``arenabench compare`` reads it beside the local runs. One launch = one run (no ``-m`` sweeps:
clusters schedule jobs themselves).

An existing Ray cluster (docs/cluster.md): with ``+ray_kwargs.ray_init.address=HOST:PORT`` (or
``auto``), else ``$RAY_ADDRESS``, the launch joins that cluster instead of starting one — it is
checked before anything starts (unreachable: one line, exit 2; :func:`check_ray_address`) — and
leaves it running at the end (``ray.shutdown`` only disconnects a driver that joined), whatever
the run's status.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from arenabench.tracking import status_for
from arenabench.trainers.verl import reward_workers

CONF = Path(__file__).resolve().parents[3] / "conf"
VERL_CONF = CONF / "verl"
ADV_MODULE = "arenabench.trainers.verl.advantage"
MANAGER_MODULE = "pkg://arenabench.trainers.verl.reward_manager"
SHORTHANDS = {"reward": "reward@arenabench.reward", "judge": "judge@arenabench.judge"}
# overrides that do not change what a run computes: not part of its ``setting`` tag
NOT_SETTING = (
    "arenabench.seed=",
    "arenabench.sweep=",
    "arenabench.tracking_uri=",
    "arenabench.log_metrics=",
    "seed=",
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.default_local_dir",
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
    "ray_kwargs.",
    "hydra.",
    "data.train_files",
    "data.val_files",
    "actor_rollout_ref.model.path",
)

log = logging.getLogger(__name__)


def examples() -> list[str]:
    """The launchable configs in ``conf/verl`` (every top-level file but ``base``)."""
    return sorted(p.stem for p in VERL_CONF.glob("*.yaml") if p.stem != "base")


def translate(overrides: Sequence[str]) -> list[str]:
    """Expand the ``reward=`` / ``judge=`` shorthands (see the module docstring)."""
    out = []
    for o in overrides:
        key, sep, value = o.partition("=")
        bare = key.lstrip("~+")
        if sep and bare in SHORTHANDS:
            o = key[: len(key) - len(bare)] + SHORTHANDS[bare] + "=" + value
        out.append(o)
    return out


def compose(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """The full verl config for ``conf/verl/<config_name>.yaml`` plus ``overrides``; with
    ``trainer.device=cpu`` the CPU mode's overrides go first, with ``rollout.name=hf`` (a GPU run
    without vLLM) the hf backend's (the user's win)."""
    guess = _mode_overrides(
        _given(overrides, "trainer.device"), _given(overrides, "actor_rollout_ref.rollout.name")
    )
    cfg = _compose(config_name, [*guess, *overrides])  # composing verl's config takes seconds: once
    wanted = _mode_overrides(str(cfg.trainer.get("device", "cuda")), str(cfg.actor_rollout_ref.rollout.name))
    if wanted != guess:  # the device or the backend came from a config file
        cfg = _compose(config_name, [*wanted, *overrides])
    return cfg


def _given(overrides: Sequence[str], key: str) -> str | None:
    values = [o.partition("=")[2] for o in overrides if o.lstrip("+").partition("=")[0] == key]
    return values[-1] if values else None


def _mode_overrides(device: str | None, rollout: str | None) -> tuple[str, ...]:
    from arenabench.trainers.verl import cpu, hf

    if device == "cpu":
        return cpu.OVERRIDES
    return hf.OVERRIDES if rollout == hf.NAME else ()


def is_cpu(cfg: DictConfig) -> bool:
    return str(cfg.trainer.get("device", "cuda")) == "cpu"


def uses_hf(cfg: DictConfig) -> bool:
    """The ``hf`` rollout backend (the CPU mode's, or a GPU run's by ``rollout.name=hf``)."""
    from arenabench.trainers.verl import hf

    return hf.wanted(cfg)


def _compose(config_name: str, overrides: Sequence[str]) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if config_name not in examples():
        from arenabench.registry import unknown_message

        raise ValueError(unknown_message("verl config", config_name, examples()))
    search = f"hydra.searchpath=[file://{CONF},pkg://verl.trainer.config]"
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(VERL_CONF), version_base=None):
        return hydra_compose(config_name, overrides=[*translate(overrides), search])


def check_wiring(cfg: DictConfig, verl_version: str | None = None) -> list[str]:
    """Problems that would make verl ignore or mis-normalize our rewards, or stall the barrier
    (empty = fine). ``verl_version``: the installed one unless given."""
    problems = []
    rm = cfg.reward.reward_manager
    by_path = (
        rm.source == "importlib" and rm.name == "ArenaRewardManager" and rm.module.path == MANAGER_MODULE
    )
    by_name = rm.source == "register" and rm.name == "arenabench"
    if not (by_path or by_name):
        problems.append(
            f"reward.reward_manager is {rm.source}:{rm.name} — set source=importlib, "
            f"name=ArenaRewardManager, module.path={MANAGER_MODULE}"
        )
    if int(cfg.reward.num_workers) != 1:
        problems.append(
            f"reward.num_workers={cfg.reward.num_workers}: the group barrier needs every sibling "
            "in one reward worker (1); verl's agent loop sends each sample to a random one"
        )
    try:
        per_step = reward_workers.samples_per_step(cfg)
    except ValueError as exc:
        problems.append(str(exc))
    else:
        version = verl_version or importlib.metadata.version("verl")
        if per_step > reward_workers.RAY_DEFAULT_SLOTS and not reward_workers.sized(version):
            problems.append(
                f"{per_step} samples per step (batch size x n) > {reward_workers.RAY_DEFAULT_SLOTS}, the "
                f"reward worker's Ray concurrency on verl=={version}: parked siblings would block the "
                f"rest until the barrier times out. Install verl=={reward_workers.VERL_VERSION} (the "
                "worker is sized to the step there) or lower data.train_batch_size / val_batch_size"
            )
    est = cfg.algorithm.adv_estimator
    if est == "grpo" and cfg.algorithm.get("norm_adv_by_std_in_grpo", True):
        problems.append(
            "algorithm.adv_estimator=grpo with norm_adv_by_std_in_grpo=true standardizes the constructor's "
            "advantages a second time: use algorithm.adv_estimator=arenabench"
        )
    elif est not in ("arenabench", "grpo"):
        problems.append(
            f"algorithm.adv_estimator={est}: constructor advantages need arenabench (pass-through)"
        )
    if cfg.algorithm.get("use_kl_in_reward", False):
        problems.append(
            "algorithm.use_kl_in_reward=true adds a KL term to the advantages; use actor.use_kl_loss"
        )
    return problems


def job_tags(cfg: DictConfig, config_name: str, overrides: Sequence[str]) -> dict[str, str]:
    """The local trainer's run tags (``arenabench/train.py``), so ``arenabench compare`` groups
    verl runs the same way: ``setting`` is the config name plus the overrides that change what is
    computed; ``sweep`` is ``arenabench.sweep`` (default: one sweep per MLflow experiment)."""
    from arenabench.tracking import build_job_tags, git_commit

    overrides = translate(overrides)
    arena, project = cfg.arenabench, cfg.trainer.project_name
    return build_job_tags(
        overrides,
        not_setting=NOT_SETTING,
        setting_head=[config_name],
        strip="+~",
        constructor=arena.reward.name,
        reward=_choice(overrides, "reward@arenabench.reward", str(arena.reward.name)),
        seed=arena.seed,
        sweep=arena.get("sweep") or f"verl/{project}",
        experiment=project,
        commit=git_commit(CONF.parent) or "unknown",
        extra={
            "judge": _choice(
                overrides, "judge@arenabench.judge", str(arena.judge.get("preset", arena.judge.kind))
            ),
            "loss": cfg.actor_rollout_ref.actor.policy_loss.loss_mode,
            "trainer": "verl",
            "config_name": config_name,
        },
    )


def _choice(overrides: Sequence[str], key: str, default: str) -> str:
    for o in reversed(overrides):
        k, _, v = o.partition("=")
        if k.lstrip("+") == key:
            return v
    return default


def job_identity(cfg: DictConfig) -> str:
    """What makes two launches the same verl job: its MLflow experiment and its checkpoint
    directory (``trainer.default_local_dir``, absolute) — what ``resume_mode=auto`` resumes from,
    so a relaunch that changes an override (more steps) is still the same job. The ``job_key`` tag:
    a launch closes as FAILED the RUNNING runs of its job whose process died
    (:func:`arenabench.tracking.fail_dead_runs`), and a resumed launch continues the latest run
    of its job (:func:`arenabench.tracking.continue_run`)."""
    import hashlib

    text = f"{cfg.trainer.project_name}|{Path(str(cfg.trainer.default_local_dir)).resolve()}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def resume_step(cfg: DictConfig) -> int | None:
    """The checkpoint step verl's trainer will resume from (None: it starts from scratch), found
    the way verl finds it (``find_latest_ckpt_path`` for ``resume_mode=auto``)."""
    mode = str(cfg.trainer.get("resume_mode", "auto"))
    if mode == "disable":
        return None
    if mode == "resume_path":
        path = str(cfg.trainer.get("resume_from_path") or "")
        return int(path.rstrip("/").split("global_step_")[-1]) if "global_step_" in path else None
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    found = find_latest_ckpt_path(str(cfg.trainer.default_local_dir))
    return None if found is None else int(str(found).rstrip("/").split("global_step_")[-1])


def arena_state(cfg: DictConfig) -> int | None:
    """Fix where a run's state lives before verl starts, and say whether it resumes: makes
    ``trainer.default_local_dir`` absolute (the launcher's cwd, not a Ray worker's), sets
    ``arenabench.state_dir`` (default ``<default_local_dir>/arenabench``: the reward worker's
    per-step counters and the AGR anchor pool, beside verl's checkpoints) and
    ``arenabench.resume_step`` (:func:`resume_step`, which the reward worker restores from)."""
    with open_dict(cfg):
        cfg.trainer.default_local_dir = str(Path(str(cfg.trainer.default_local_dir)).resolve())
        arena = cfg.arenabench
        if not arena.get("state_dir"):
            arena.state_dir = str(Path(cfg.trainer.default_local_dir) / "arenabench")
        arena.resume_step = step = resume_step(cfg)
    return step


def start_mlflow_run(cfg: DictConfig, tags: dict[str, str]):
    """Open the run verl will log into (RUNNING): a :class:`~arenabench.tracking.Tracker` owned
    by this process (owner tags, ``job_key`` = :func:`job_identity`; SIGTERM raises ``Killed``)
    that first closes as FAILED the runs of this job whose process died. A launch that resumes
    from a checkpoint continues its job's previous run (points up to the checkpoint's step,
    linked both ways: :func:`arenabench.tracking.continue_run`)."""
    from arenabench.tracking import Tracker, continue_run, tracking_uri

    identity = job_identity(cfg)
    tracker = Tracker(
        str(cfg.trainer.project_name),
        run_name=f"{tags['setting']} seed={tags['seed']}",
        tags=tags,
        uri=tracking_uri(cfg.arenabench.get("tracking_uri")),
        identity=identity,
    )
    try:
        for run_id in tracker.stale_failed:
            print(f"arenabench-verl: closed as FAILED the run {run_id} of a dead process", file=sys.stderr)
        step = cfg.arenabench.get("resume_step")
        if step is not None:
            old = continue_run(tracker, identity, int(step))
            if old is not None:
                print(f"arenabench-verl: resuming from step {step}: continues run {old}", file=sys.stderr)
    except BaseException as exc:
        tracker.finish(status_for(exc))
        raise
    return tracker


def worker_env(cfg: DictConfig, extra: dict[str, str]) -> dict[str, str]:
    """Env vars every Ray worker needs: our advantage module, the plugin module of the ``hf``
    backend (and, with ``trainer.device=cpu``, the CPU platform: ``VERL_PLATFORM=cpu``), plus
    ``extra`` (MLflow)."""
    mods = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if ADV_MODULE not in mods:
        mods.append(ADV_MODULE)
    env = {"VERL_USE_EXTERNAL_MODULES": ",".join(mods)}
    if is_cpu(cfg):
        from arenabench.trainers.verl import cpu

        env.update(cpu.env(env["VERL_USE_EXTERNAL_MODULES"]))
    elif uses_hf(cfg):
        from arenabench.trainers.verl import hf

        env["VERL_USE_EXTERNAL_MODULES"] = hf.with_plugin(env["VERL_USE_EXTERNAL_MODULES"])
    env.update(extra)
    with open_dict(cfg):
        runtime = cfg.ray_kwargs.ray_init.runtime_env
        if runtime.get("env_vars") is None:
            runtime.env_vars = {}
        runtime.env_vars.update(env)
    return env


def verl_validate(cfg: DictConfig) -> str | None:
    """verl's own ``validate_config`` (what ``main_ppo`` runs first); the error text, or None."""
    import io

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _use_cpu_platform() -> None:
    """Register the CPU plugin in this (driver) process and make it verl's platform here, even if
    verl resolved another one earlier in the process (e.g. an earlier import under pytest)."""
    import arenabench.trainers.verl.plugin  # noqa: F401  (the hf backend)
    from arenabench.trainers.verl.cpu import platform

    platform.install()  # idempotent; the plugin may have been imported before VERL_PLATFORM was set
    from verl.plugin.platform import platform_manager

    if platform_manager.get_platform().device_name != "cpu":
        platform_manager.set_platform(platform.PlatformCPU())


# ray_kwargs.ray_init keys that ``ray.init`` accepts only when it starts a cluster (Ray 2.60's
# ``worker.init`` raises "When connecting to an existing cluster, ... must not be provided")
JOIN_DROPS = ("num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "_system_config",
              "_enable_object_reconstruction")  # fmt: skip


def env_refs(cfg: DictConfig) -> dict[str, str]:
    """The environment variables the config reads (``${oc.env:NAME}``) that are set here: a joined
    cluster's workers do not inherit this process's environment, so they travel in the runtime
    env (a local cluster's workers inherit them). Never a secret-looking name (``*KEY*``,
    ``*TOKEN*``, ``*SECRET*``, ``*PASS*``, ``*CREDENTIAL*``): the runtime env is printed and
    recorded; set those in the cluster's own environment."""
    import re

    text = OmegaConf.to_yaml(cfg, resolve=False)
    names = set(re.findall(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)", text))
    secret = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL", re.IGNORECASE)
    return {n: os.environ[n] for n in sorted(names) if n in os.environ and not secret.search(n)}


def ray_address(cfg: DictConfig) -> str | None:
    """The Ray cluster this launch joins: ``ray_kwargs.ray_init.address``, else ``$RAY_ADDRESS``
    (what ``ray.init`` itself reads); None (or ``local``): verl starts a local cluster."""
    addr = OmegaConf.select(cfg, "ray_kwargs.ray_init.address", default=None) or os.environ.get("RAY_ADDRESS")
    addr = str(addr).strip() if addr else ""
    return None if addr in ("", "local") else addr


def check_ray_address(address: str, timeout_s: float = 5.0) -> str | None:
    """None if the Ray cluster at ``address`` (``host:port``, ``ray://host:port`` or ``auto``)
    answers a TCP connect within ``timeout_s``; else the problem, one line (``ray.init`` itself
    would retry for a minute and end in a traceback, after the MLflow run opened)."""
    import socket

    hostport: str | None = address
    if address.startswith("ray://"):
        hostport = address[len("ray://") :]
    else:
        try:
            from ray._private.services import canonicalize_bootstrap_address

            hostport = canonicalize_bootstrap_address(address)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return f"Ray address {address!r}: {first[:200]}"
    if not hostport:
        return f"Ray address {address!r}: no running Ray cluster found (start one: ray start --head)"
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return (
            f"Ray cluster at {address} unreachable ({hostport}: {why}); start it (ray start --head) or "
            "unset RAY_ADDRESS / ray_kwargs.ray_init.address to start a local one"
        )


def _children() -> list:
    """This process's descendants (the local Ray cluster verl started, and its workers)."""
    import psutil

    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _wait_for(procs: list, timeout_s: float) -> None:
    """Wait (bounded) until ``procs`` are gone: Ray's workers exit once ``ray.shutdown`` took the
    raylet down, and one of them may still end the MLflow run on its way out."""
    import psutil

    with contextlib.suppress(psutil.Error):
        psutil.wait_procs(procs, timeout=timeout_s)


class SigtermGuard:
    """While verl runs, SIGTERM raises :class:`~arenabench.tracking.Killed` and is remembered —
    also once Ray is up, which on its own makes a SIGTERMed launch abort with its run RUNNING.

    Why (Ray 2.60, measured): ``ray.init`` (inside verl's ``run_ppo``) makes this process a Ray
    core worker, which installs absl's failure-signal handler for SIGTERM over Python's. That
    handler prints ``*** SIGTERM received``, hands the signal to the Python handler ``ray.init``
    set (``sys.exit(15)``) and arms a 3 s alarm that aborts the process (exit -6): the cleanup —
    ``ray.shutdown``, waiting for verl's workers, closing the run — rarely gets 3 s. And an
    exception raised in a signal handler during ``ray.get`` reaches the caller as
    ``SystemExit(1)`` (Ray's signal check), so the exception cannot say what happened.

    The guard (1) installs its handler again right after ``ray.init`` returns, replacing absl's
    for SIGTERM only (crashes keep Ray's stack traces; a SIGTERM in the few milliseconds between
    the two still meets absl's), and (2) records the signal (:attr:`signum`), which decides the
    status whatever exception reaches the launcher. :meth:`disarm` (the launcher's cleanup):
    a later SIGTERM is only recorded, so the cleanup completes. Main thread only (else inert)."""

    def __init__(self):
        self.signum: int | None = None
        self.armed = False
        self._prev = None
        self._ray_init = None

    def _on_sigterm(self, signum, frame):
        self.signum = int(signum)
        if self.armed:
            from arenabench.tracking import Killed

            self.armed = False  # one Killed: a second SIGTERM must not cut the cleanup short
            raise Killed(signum)

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        prev = signal.signal(signal.SIGTERM, self._on_sigterm)
        if self._prev is None:
            self._prev = prev

    def __enter__(self) -> SigtermGuard:
        import functools

        import ray

        self.armed = True
        self.install()
        original = self._ray_init = ray.init

        @functools.wraps(original)
        def init(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                self.install()  # over absl's handler (see the class docstring)

        ray.init = init
        return self

    def disarm(self) -> None:
        self.armed = False

    def __exit__(self, *exc) -> bool:
        import signal
        import threading

        import ray

        self.armed = False
        if self._ray_init is not None:
            ray.init = self._ray_init
        main = threading.current_thread() is threading.main_thread()
        if main and self._prev is not None and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._prev)
        return False

    def error(self, exc: BaseException | None) -> BaseException | None:
        """What ended verl: :class:`~arenabench.tracking.Killed` once a SIGTERM arrived (whatever
        ``exc`` Ray turned it into), else ``exc``."""
        from arenabench.tracking import Killed

        if self.signum is not None and not isinstance(exc, Killed):
            return Killed(self.signum)
        return exc


class RayStartError(RuntimeError):
    """``ray.init`` failed; the processes it had started are stopped (:func:`ray_start_cleanup`)."""


@contextlib.contextmanager
def ray_start_cleanup(grace_s: float = 5.0):
    """While verl runs: when ``ray.init`` raises, stop the Ray processes it had started and raise
    :class:`RayStartError` naming Ray's own error and the raylet's or GCS's last fatal log line.

    Why (Ray 2.60, reproduced with an occupied metrics-export port and seen on a loaded host: the
    raylet dies while starting — its dashboard agent failed, or did not write its port file in
    time — and ``Node()`` gives up 30 s later with "The current node timed out during startup"):
    ``ray.init`` has by then started the GCS, the dashboard, the monitors and a reaper, but raises
    before it records the node, so ``ray.shutdown()`` (also at exit) has nothing to stop. The
    launcher then waited 60 s for those processes to go (they never do) with ``gcs_server``
    running; only Ray's reaper stopped them, once the launcher's exit closed its pipe (minutes
    later at nice 19 on a busy host) — and nothing does if the launcher is SIGKILLed meanwhile."""
    import ray

    original = ray.init

    @functools.wraps(original)
    def init(*args, **kwargs):
        before = {p.pid for p in _children()}
        t0 = time.time()
        try:
            return original(*args, **kwargs)
        except BaseException as exc:  # a SIGTERM (Killed) meanwhile: the same cleanup, re-raised
            with contextlib.suppress(Exception):
                ray.shutdown()  # whatever ray.init did record (e.g. a node that failed to connect)
            started = [p for p in _children() if p.pid not in before]
            _stop(started, grace_s)
            if not isinstance(exc, Exception):
                raise
            why = _ray_fatal_line(kwargs.get("_temp_dir"), t0)
            raise RayStartError(
                f"Ray did not start ({type(exc).__name__}: {exc})"
                + (f"; Ray's log: {why}" if why else "")
                + f"; stopped the {len(started)} processes it had started"
            ) from exc

    ray.init = init
    try:
        yield
    finally:
        ray.init = original


def _stop(procs: list, grace_s: float) -> None:
    """SIGTERM ``procs``, then SIGKILL what is left after ``grace_s`` (and reap our children)."""
    import psutil

    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def _ray_fatal_line(temp_dir: str | None, since: float) -> str | None:
    """The last fatal/error line (Ray's `` C `` / `` E `` severity) of the raylet's or the GCS's
    log in the session ``ray.init`` created (``session_latest``, if it is newer than ``since``)."""
    if temp_dir is None:
        try:
            import ray._common.utils

            temp_dir = ray._common.utils.get_default_ray_temp_dir()
        except Exception:
            return None
    logs = Path(temp_dir) / "session_latest" / "logs"
    try:
        if logs.stat().st_mtime < since - 1.0:
            return None
    except OSError:
        return None
    for name in ("raylet.err", "raylet.out", "gcs_server.err", "gcs_server.out"):
        with contextlib.suppress(OSError):
            text = (logs / name).read_text(errors="replace")
            lines = [x for x in text.splitlines() if " C " in x or " E " in x]
            if lines:
                line = lines[-1].strip()
                if "Check failed: " in line:  # drop Ray's "you have likely discovered a bug" text
                    line = line[: line.find("]") + 1] + " " + line[line.find("Check failed: ") :]
                return f"{logs / name}: {line[:400]}"
    return None


def _print_config(cfg: DictConfig, out) -> None:
    try:
        text = OmegaConf.to_yaml(cfg, resolve=True)
    except Exception as exc:  # e.g. an interpolation to a mandatory ??? value
        text = f"# (unresolved: {type(exc).__name__}: {exc})\n" + OmegaConf.to_yaml(cfg)
    out.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="arenabench-verl",
        description="verl's main_ppo with arenabench's group reward manager (hydra overrides follow).",
    )
    parser.add_argument(
        "--config-name", "-cn", default="arenarl_n16", help=f"one of: {', '.join(examples())}"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the composed config and exit")
    parser.add_argument("--list", action="store_true", help="list the configs in conf/verl and exit")
    args, overrides = parser.parse_known_args(argv)
    if args.list:
        print("\n".join(examples()))
        return 0
    bad = [o for o in overrides if o.startswith("-")]
    if bad:
        parser.error(
            f"unknown option(s) {' '.join(bad)} (hydra -m sweeps are not supported: one launch = one run)"
        )
    try:
        cfg = compose(args.config_name, overrides)
    except Exception as exc:
        print(f"arenabench-verl: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    problems = check_wiring(cfg)
    if args.dry_run:
        worker_env(cfg, {})
        _print_config(cfg, sys.stdout)
        for p in problems:
            print(f"# warning: {p}")
        invalid = verl_validate(cfg)
        if invalid:
            print(f"arenabench-verl: verl rejects this config: {invalid}", file=sys.stderr)
            return 2
        return 0
    if problems:
        print("arenabench-verl: " + "\n  ".join(["config problems:", *problems]), file=sys.stderr)
        return 2
    address = ray_address(cfg)
    if address is not None:
        problem = check_ray_address(address)
        if problem:
            print(f"arenabench-verl: {problem}", file=sys.stderr)
            return 2
        with open_dict(cfg):  # ray.init(address=...) joins it; verl passes ray_init's keys through
            cfg.ray_kwargs.ray_init.address = address
            # what only a new cluster takes (ray.init refuses them when joining): the cluster's own
            dropped = [k for k in JOIN_DROPS if cfg.ray_kwargs.ray_init.get(k) not in (None, {}, False)]
            for k in JOIN_DROPS:
                cfg.ray_kwargs.ray_init.pop(k, None)
        if dropped:
            print(
                f"arenabench-verl: the cluster's resources apply, not ray_init's {', '.join(dropped)}",
                file=sys.stderr,
            )
        print(f"arenabench-verl: joining the Ray cluster at {address} (left running)", file=sys.stderr)

    if is_cpu(cfg) or uses_hf(cfg):
        os.environ.update(worker_env(cfg, {}))  # before verl is imported here: its external modules
    if is_cpu(cfg):
        _use_cpu_platform()
    import arenabench.trainers.verl.advantage  # noqa: F401  (registers the estimator in this process)

    loggers = cfg.trainer.logger
    loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
    arena_state(cfg)
    tracker = None
    extra: dict[str, str] = {}
    if "mlflow" in loggers:
        tracker = start_mlflow_run(cfg, job_tags(cfg, args.config_name, overrides))
        extra = {"MLFLOW_TRACKING_URI": tracker.uri, "MLFLOW_RUN_ID": tracker.run_id}
        print(f"arenabench-verl: MLflow run {tracker.run_id} in {tracker.uri}", file=sys.stderr)
    if address is not None:  # a joined cluster's workers get only what the runtime env carries
        extra = {**env_refs(cfg), **extra}
    os.environ.update(worker_env(cfg, extra))  # a local Ray cluster inherits this process's env

    from verl.trainer.main_ppo import main as verl_main

    error: BaseException | None = None
    t0 = time.time()
    try:
        with SigtermGuard() as guard, ray_start_cleanup():
            try:
                verl_main(cfg)  # hydra.main passes a given config straight to verl's task function
            except BaseException as exc:
                guard.disarm()
                error = guard.error(exc)
                if error is not exc:
                    raise error from exc
                raise
            finally:
                guard.disarm()
                error = guard.error(error)
                _close(tracker, status_for(error), t0, error)
    except RayStartError as exc:  # one clear line: Ray's traceback says nothing more
        print(f"arenabench-verl: {exc}", file=sys.stderr)
        return 1
    return 0


def _close(tracker, status: str, t0: float, error: BaseException | None = None) -> None:
    """Stop verl's local Ray cluster and end the run with ``status``. A run stopped early is
    marked at once (a scheduler's SIGKILL may follow its SIGTERM within seconds) and again once
    verl's workers are gone: verl's MLflow logger ends the run FINISHED whatever happened (in its
    Ray worker, also at that worker's exit). A run whose Ray never started has no workers to
    wait for; its ``failed_reason`` tag is Ray's error (:class:`RayStartError`)."""
    import ray

    cluster = _children()  # before the shutdown orphans the workers
    if tracker is not None and status != "FINISHED":
        try:
            if isinstance(error, RayStartError):  # set_tags truncates to MLflow's limit
                tracker.set_tags({"failed_reason": str(error)})
            tracker.mark(status)
        except Exception as exc:  # the final finish() below tries again; the cleanup goes on
            print(f"arenabench-verl: could not mark the run {status} yet: {exc!r}", file=sys.stderr)
    started = ray.is_initialized()
    if started:  # verl's run_ppo starts a local cluster and leaves it running; a joined one: disconnect
        ray.shutdown()
    if tracker is not None:
        if status != "FINISHED" and started:
            _wait_for(cluster, 60.0)
        tracker.finish(status)
    print(f"arenabench-verl: {status} after {time.time() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
