"""The sweep launcher behind ``hydra/launcher=arenabench`` (the experiment files select it).

Why not joblib's launcher: on the CPU testbed a 200-step job trains in seconds, so what a
sweep pays around each job matters, and 50-100 jobs must tell their user how far along they are.

- **Warm workers.** ``n_jobs`` worker processes (loky, so hydra's task function pickles as with
  joblib) live for the whole sweep; each imports torch, the trainer, MLflow's store and
  matplotlib once, when it starts (:func:`warm`), not inside a job.
- **Quiet console, everything in files.** Each job's stdout/stderr — hydra's job log, the config
  dump the trainer logs, tqdm, warnings — goes to ``<job dir>/console.log`` beside hydra's own
  ``.hydra/`` config files and ``<job>.log``. The console gets one line per finished job: job k of
  n, elapsed, ETA, its overrides and a summary (primary metric, judge calls, time), and on a
  terminal a live progress bar. ``<sweep dir>/jobs.tsv`` records every job's times.
- **Seeds stacked.** Jobs that differ only in their ``seed=`` override train together in one
  worker as one stacked batch (``trainers/local/trainer.py train_seeds``: the torch work of S
  seeds costs ~0.55× of S separate runs), up to ``batch_seeds`` per batch (``hydra.launcher.
  batch_seeds``; 1 = off) and no more than keeps every worker busy. Each job still is its own
  hydra job (``.hydra/`` dumps, job dir, console.log) and its own MLflow run, with the numbers it
  gets alone: a seed's run does not depend on its batch-mates (tested bit for bit), so a resumed
  sweep that batches the unfinished seeds differently reproduces them exactly.
- **Hydra's semantics unchanged.** The sweeper still expands the overrides; each job is
  ``hydra.core.utils.run_job`` exactly as joblib's launcher calls it (the same ``.hydra`` dumps,
  job numbers and output dirs), so every job is still one MLflow run with the same params,
  tags and metrics, and a failed job fails the sweep the same way.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

# what the per-job line shows, when the job reported it
SUMMARY = (("eval_sampled_quality", "{:.3f}"), ("eval_quality", "{:.3f}"), ("snr", "{:.2f}"))


def warm() -> None:
    """Worker initializer: pay the imports a job would otherwise pay inside its first job."""
    import atexit
    import gc

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure  # noqa: F401
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import torch
    import torch.optim  # noqa: F401

    import arenabench.train  # noqa: F401
    import arenabench.trainers.local.trainer  # noqa: F401

    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo (~1 s)
    # what the imports made (~0.5 M objects) lives as long as the worker: out of the collector's
    # way (gc.freeze), so a full collection during training does not walk it again (GC time of a
    # 10-seed batch 0.76 -> 0.33 of 18 CPU-s); unfrozen at exit, for extensions that check for leaks
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)


LAUNCHER = "hydra_plugins.arenabench_launcher.launcher.PoolLauncher"
_POOL: dict[str, Any] = {}  # the executor start_workers started, until launch takes it


def _executor(workers: int):
    from joblib.externals.loky import get_reusable_executor

    return get_reusable_executor(max_workers=workers, initializer=warm, reuse=False)


def start_workers(workers: int) -> None:
    """Start the sweep's worker processes now (their imports, :func:`warm`, take ~5 CPU-s each):
    called when the multirun starts, so that they warm up while the main process still checks
    every job's config; :func:`launch` then takes them."""
    executor = _executor(workers)
    executor.submit(int)  # loky spawns every worker on the first submit; no waiting for it
    _POOL["executor"] = executor


class StartWorkers(Callback):
    """Hydra callback (``conf/train.yaml``, listed first): a multirun on this launcher starts
    its workers before the other callbacks check the jobs' configs, so that the workers' imports
    overlap the main process's ~10-20 s of checks instead of following them with a core idle
    (issue 28). Any other launcher: nothing."""

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from arenabench.trainers.local.config import sweep_overrides

        if OmegaConf.select(config, "hydra.launcher._target_") != LAUNCHER:
            return
        jobs = len(sweep_overrides(config))
        start_workers(max(1, min(int(config.hydra.launcher.n_jobs), jobs)))


def seed_variant(composed, composed_overrides: Sequence[str], overrides: Sequence[str]):
    """The sweep config of the job ``overrides`` made from ``composed`` (the config hydra
    composed for ``composed_overrides``) when the two differ only in an integer ``seed=``: a
    copy with that seed, hydra's record of the task overrides and ``override_dirname`` — the
    three places a seed's value shows in a composed config (``tests/test_sweep_configs.py`` compares it
    with hydra's own composition). None otherwise: then compose. Why: composing costs ~0.13
    CPU-s a job (hydra rebuilds its defaults list and merges every file), ~10% of what a stacked
    job costs in a worker outside its steps."""
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra.core.override_parser.overrides_parser import OverridesParser

    diff = [k for k, (a, b) in enumerate(zip(composed_overrides, overrides, strict=False)) if a != b]
    if len(composed_overrides) != len(overrides) or len(diff) != 1:
        return None
    old, new = composed_overrides[diff[0]], overrides[diff[0]]
    value = new.partition("=")[2]
    if old.partition("=")[0] != "seed" or new.partition("=")[0] != "seed" or value != str(_int(value)):
        return None
    task = list(composed.hydra.overrides.task)
    if task.count(old) != 1:
        return None
    cfg = copy.deepcopy(composed)  # flags (struct, read-only) and the resolver cache come along
    cfg.seed = int(value)
    task[task.index(old)] = new
    cfg.hydra.overrides.task = task
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=OverridesParser.create().parse_overrides(task),
        kv_sep=dirname.kv_sep,
        item_sep=dirname.item_sep,
        exclude_keys=dirname.exclude_keys,
    )
    return cfg


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _run_hydra_job(idx, overrides, hydra_context, config, task_function, sweep_config=None):
    """Job ``idx`` as joblib's launcher runs it — its sweep config (``sweep_config``, else
    composed; hydra's job id and number set) made current, its job dir created, hydra's
    ``run_job`` with ``task_function`` — its output sent to ``<job dir>/console.log``. Returns
    (JobReturn, sweep config, job dir)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import run_job
    from omegaconf import OmegaConf, open_dict

    if sweep_config is None:
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    job_dir = Path(str(OmegaConf.select(sweep_config, "hydra.sweep.dir"))) / str(
        OmegaConf.select(sweep_config, "hydra.sweep.subdir")
    )
    job_dir.mkdir(parents=True, exist_ok=True)
    with (
        open(job_dir / "console.log", "a", encoding="utf-8") as out,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(out),
    ):
        ret = run_job(
            hydra_context=hydra_context,
            config=sweep_config,
            task_function=task_function,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    return ret, sweep_config, job_dir


def execute_job(idx, overrides, hydra_context, config, task_function, singleton_state) -> tuple[Any, dict]:
    """One job in a worker: the same steps as joblib's launcher, its output sent to files."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import setup_globals

    from arenabench.train import LAST_JOB

    started, t0, c0 = time.time(), time.perf_counter(), time.process_time()
    setup_globals()
    Singleton.set_state(singleton_state)
    LAST_JOB.clear()
    ret, _, job_dir = _run_hydra_job(idx, overrides, hydra_context, config, task_function)
    info = {
        "started": started,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "pid": os.getpid(),
        "dir": str(job_dir),
        **LAST_JOB,
    }
    return ret, info


class _Tee:
    """A text stream writing to several files (a stacked batch's output goes to each job's log)."""

    def __init__(self, files):
        self.files = files

    def write(self, text: str) -> int:
        for f in self.files:
            f.write(text)
        return len(text)

    def flush(self) -> None:
        for f in self.files:
            f.flush()


def _seed_free(overrides: Sequence[str]) -> tuple[str, ...] | None:
    """A job's overrides without its seed (the batch key); None when it sets no seed."""
    rest = tuple(o for o in overrides if o.partition("=")[0].lstrip("+~") != "seed")
    return rest if len(rest) < len(overrides) else None


def seed_groups(job_overrides: Sequence[Sequence[str]]) -> list[list[int]]:
    """Job indices grouped by their overrides less an integer ``seed=`` (a job with no seed, or
    whose seed is not an integer literal, is a group alone), in first-appearance order: jobs of
    one group compose alike but for the seed's value."""
    groups: dict[object, list[int]] = {}
    for i, ov in enumerate(job_overrides):
        key = _seed_free(ov)
        seeds = [o.partition("=")[2] for o in ov if o.partition("=")[0].lstrip("+~") == "seed"]
        if key is None or not all(v.lstrip("-").isdigit() for v in seeds):
            key = ("alone", i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def bundles(job_overrides: Sequence[Sequence[str]], size: int, workers: int) -> list[list[int]]:
    """Job indices in stacked batches: jobs equal but for ``seed=``, at most ``size`` per batch
    and at most ⌈jobs / workers⌉ so no worker idles, split into near-equal contiguous parts."""
    n = len(job_overrides)
    cap = max(1, min(size, math.ceil(n / max(workers, 1)))) if n else 1
    out = []
    for idx in seed_groups(job_overrides) if cap > 1 else [[i] for i in range(n)]:
        parts = math.ceil(len(idx) / cap)
        q, r = divmod(len(idx), parts)
        start = 0
        for k in range(parts):
            end = start + q + (k < r)
            out.append(idx[start:end])
            start = end
    return sorted(out)


def execute_bundle(idxs, overrides, hydra_context, config, singleton_state) -> list[tuple[Any, dict]]:
    """Jobs that differ only in seed, in a worker as one stacked batch: each is prepared as its
    own hydra job (``run_job`` with :func:`arenabench.train.prepare_job`: job dir, ``.hydra``
    dumps, validation, skip check), then the prepared ones train together
    (:func:`arenabench.train.run_jobs`). Returns a (``JobReturn``, info) per job, as
    :func:`execute_job` does."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, configure_log, setup_globals

    from arenabench.train import job_value, prepare_job, run_jobs

    started, t0, c0 = time.time(), time.perf_counter(), time.process_time()
    setup_globals()
    Singleton.set_state(singleton_state)
    rets, dirs, first = [], [], None
    for idx, ov in zip(idxs, overrides, strict=True):
        # the first job's config is composed, the others' derived from it (seed_variant), before
        # run_job marks it read-only
        cfg = None if first is None else seed_variant(first[1], first[0], ov)
        if cfg is None:
            cfg = hydra_context.config_loader.load_sweep_config(config, list(ov))
            first = first or (list(ov), copy.deepcopy(cfg))
        ret, sweep_config, job_dir = _run_hydra_job(idx, ov, hydra_context, config, prepare_job, cfg)
        rets.append(ret)
        dirs.append(job_dir)
    ready = [k for k, r in enumerate(rets) if r.status == JobStatus.COMPLETED]
    jobs = [rets[k]._return_value for k in ready]
    finals: list = [None] * len(jobs)  # stays so if the batch fails
    error: Exception | None = None
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(open(dirs[k] / "console.log", "a", encoding="utf-8")) for k in ready]
        tee = _Tee(logs)
        with contextlib.redirect_stdout(tee), contextlib.redirect_stderr(tee):
            # hydra's job logging wrote to the last prepared job's (now closed) console.log
            configure_log(sweep_config.hydra.job_logging, sweep_config.hydra.verbose)
            try:
                finals = run_jobs(jobs)
            except Exception as exc:  # every run of the batch is FAILED (run_jobs closed them so)
                import traceback

                traceback.print_exc()
                error = exc
    extra: list[dict] = [{} for _ in rets]  # each trained job's final metrics for its console line
    for k, job, final in zip(ready, jobs, finals, strict=True):
        if error is not None:
            rets[k].status, rets[k].return_value = JobStatus.FAILED, error
            continue
        rets[k].return_value = job_value(final)
        extra[k] = {"final": {**final, "steps": job.run.steps}, "skipped": job.skipped is not None}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = []
    for r, d, more in zip(rets, dirs, extra, strict=True):
        info = {"started": started, "wall_s": wall, "cpu_s": cpu / len(rets), "pid": os.getpid()}
        out.append((r, info | {"dir": str(d), "batch": len(rets), **more}))
    return out


def _clock(s: float) -> str:
    if not math.isfinite(s):
        return "--:--"
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def job_line(
    k: int, n: int, elapsed: float, overrides: Sequence[str], ret, info: dict, running: float | None = None
) -> str:
    """``[k/n] elapsed, ETA | overrides | summary``: the one line a finished job prints
    (``overrides``: those that vary between the sweep's jobs). ``running``: seconds since the
    first job started (the ETA's clock: workers' start-up is not a job's cost); default elapsed."""
    from hydra.core.utils import JobStatus

    eta = (elapsed if running is None else running) / k * (n - k)
    head = f"[{k:>{len(str(n))}}/{n}] {_clock(elapsed)} elapsed, ETA {_clock(eta)} | "
    what = " ".join(overrides)
    if ret.status != JobStatus.COMPLETED:
        err = ret._return_value
        msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        return f"{head}{what} | FAILED {msg} (log: {info['dir']}/console.log)"
    final = info.get("final") or {}
    parts = [f"{name} {fmt.format(final[name])}" for name, fmt in SUMMARY if name in final]
    if "judge_calls" in final and final.get("steps"):
        parts.append(f"{final['judge_calls'] / final['steps']:.0f} judge calls/step")
    if "judge_failures" in final:  # cumulative requests that failed after retries: a sick judge shows
        parts.append(f"{final['judge_failures']:.0f} judge failures")
    if info.get("skipped"):
        parts.insert(0, "skipped: identical run already FINISHED")
    batch = info.get("batch", 1)
    parts.append(f"{info['wall_s']:.1f} s" + (f" (stacked batch of {batch} seeds)" if batch > 1 else ""))
    return f"{head}{what} | " + ", ".join(parts)


def _stackable(task_function) -> bool:
    """Only arenabench's own task (``arenabench.train.main``) knows how to train jobs as a batch."""
    import inspect

    try:
        src = inspect.getsourcefile(task_function) or ""
    except TypeError:
        return False
    named_main = getattr(task_function, "__name__", "") == "main"
    return named_main and Path(src).parts[-2:] == ("arenabench", "train.py")


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """Run every job on warm workers; print one line per finished job; return hydra's
    ``JobReturn``s in submission order."""
    from concurrent.futures import as_completed

    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, filter_overrides, setup_globals

    setup_globals()
    cfg = launcher.config
    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    sweep_dir = Path(str(cfg.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    n = len(job_overrides)
    workers = max(1, min(launcher.n_jobs, n))
    mode = launcher.progress
    live = mode == "auto" and sys.stderr.isatty()
    say = print if mode != "off" else (lambda *a, **k: None)
    common = set.intersection(*(set(o) for o in job_overrides)) if n else set()
    shown = " ".join(o for o in filter_overrides(sorted(common)) if not o.startswith("tracking."))
    say(f"sweep: {n} jobs ({shown}) on {workers} worker processes")
    say(f"  job logs and config dumps: {sweep_dir}/<job number>/ (console.log, .hydra/)")
    sys.stdout.flush()
    state = Singleton.get_state()
    t0 = time.perf_counter()
    # the workers StartWorkers started (for as many jobs as the whole sweep: never fewer)
    executor = _POOL.pop("executor", None) or _executor(workers)
    size = launcher.batch_seeds if _stackable(launcher.task_function) else 1
    futures = {}
    for part in bundles(job_overrides, size, workers):
        if len(part) == 1:
            i = part[0]
            fut = executor.submit(
                execute_job, initial_job_idx + i, job_overrides[i], launcher.hydra_context, cfg,
                launcher.task_function, state,
            )  # fmt: skip
        else:
            fut = executor.submit(
                execute_bundle, [initial_job_idx + i for i in part], [job_overrides[i] for i in part],
                launcher.hydra_context, cfg, state,
            )  # fmt: skip
        futures[fut] = part
    bar = None
    if live:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, unit="job", desc="sweep", dynamic_ncols=True)
    results: list[Any] = [None] * n
    rows = []
    first = math.inf  # when the first job started (wall clock): the ETA ignores worker start-up
    k = 0
    for fut in as_completed(futures):
        done = fut.result()
        for i, (ret, info) in zip(futures[fut], done if isinstance(done, list) else [done], strict=True):
            k += 1
            results[i] = ret
            varying = [o for o in job_overrides[i] if o not in common]
            first = min(first, info["started"])
            running = time.time() - first
            line = job_line(k, n, time.perf_counter() - t0, varying, ret, info, running)
            if bar is not None:
                bar.write(line)
                bar.update(1)
            else:
                say(line, flush=True)
            final = info.get("final") or {}
            steps, sps = final.get("steps"), final.get("steps_per_s")
            loop_s = steps / sps if steps and sps else math.nan
            rows.append(
                [str(initial_job_idx + i), " ".join(filter_overrides(job_overrides[i])), ret.status.name]
                + [f"{info['wall_s']:.3f}", f"{info['cpu_s']:.3f}", f"{loop_s:.3f}", str(info["pid"])]
                + [str(info.get("batch", 1))]
            )
    if bar is not None:
        bar.close()
    total = time.perf_counter() - t0
    # a stacked batch's jobs share its wall time and split its CPU evenly (batch: its size)
    head = "job\toverrides\tstatus\twall_s\tcpu_s\ttrain_loop_s\tworker_pid\tbatch"
    rows.sort(key=lambda r: int(r[0]))
    (sweep_dir / "jobs.tsv").write_text(head + "\n" + "\n".join("\t".join(r) for r in rows) + "\n")
    say(
        f"sweep done: {n} jobs in {_clock(total)} ({total:.0f} s wall); per-job times in {sweep_dir}/jobs.tsv"
    )
    return results
