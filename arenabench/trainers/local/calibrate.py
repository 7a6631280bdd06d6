"""Pick the SFT teacher temperature τ from judge statistics alone.

``python -m arenabench.trainers.local.calibrate --task preference --init sft --judge calibrated``

For each τ of a grid: build (or load) the SFT checkpoint, sample ``batches`` rollout batches as
the trainer does at step 0 (K prompts × N samples at the RL temperature, sample 0 of each group
greedy), and measure σ_group, σ_noise and SNR with :func:`arenabench.diagnostics.pointwise_snr`
(the definition the trainer logs every step), averaged over the batches. The chosen τ is the one
whose σ_group is closest to ``--target`` (default 0.03: ArenaRL Fig. 1a, σ_group ≈ 0.03 against
σ_noise ≈ 0.02 at the start of RL). No RL run is looked at. Configs are read from ``conf/``
(K, N, probe sizes from ``train.yaml``); ``--set key=value`` overrides an init key.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from arenabench.diagnostics import pointwise_snr
from arenabench.trainers.local.policy import TinyLM, sample
from arenabench.trainers.local.sft import InitConfig, load_or_build, model_dims, teacher_probs
from arenabench.trainers.local.task import TASKS

CONF = Path(__file__).resolve().parents[3] / "conf"
TARGET_SIGMA_GROUP = 0.03  # ArenaRL Fig. 1a (seed figures of the calibrated judge preset)
DEFAULT_TAUS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


def _yaml(group: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text()) or {}


def build_task(task_cfg: Mapping[str, Any]):
    cfg = dict(task_cfg)
    return TASKS.get(cfg.pop("name"), **cfg)


def build_model(task, trainer_cfg: Mapping[str, Any]) -> TinyLM:
    tc = trainer_cfg
    return TinyLM(task.vocab, task.prompt_len + task.response_len, tc["d_model"], tc["n_layer"], tc["n_head"])


def measure(
    model: TinyLM,
    task,
    judge,
    temperature: float,
    K: int = 8,
    N: int = 8,
    batches: int = 16,
    probe_size: int = 8,
    probe_repeats: int = 4,
    seed: int = 0,
) -> dict[str, float]:
    """Mean σ_group, σ_noise, SNR (per-batch SNR averaged, as the trainer's step metric) and true
    quality over ``batches`` step-0-style rollout batches; ``greedy_quality``: the greedy answers'
    mean quality over all prompts."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(batches):
        pid = rng.choice(task.n_prompts, size=K, replace=task.n_prompts < K)
        prompts = torch.as_tensor(task.prompts[np.repeat(pid, N)])
        temp = torch.full((K * N,), float(temperature))
        temp[::N] = 0.0
        resp = sample(model, prompts, task.response_len, temp, gen).numpy().reshape(K, N, -1)
        groups = [task.group(int(p), resp[k]) for k, p in enumerate(pid)]
        probe = pointwise_snr(judge, groups, rng, probe_size, probe_repeats)
        q = np.array([t.meta["quality"] for g in groups for t in g.trajectories])
        rows.append((probe["sigma_group"], probe["sigma_noise"], probe["snr"], q.mean()))
    sg, sn, snr, q = np.nanmean(np.array(rows), axis=0)
    ids = np.arange(task.n_prompts)
    greedy = sample(
        model, torch.as_tensor(task.prompts), task.response_len, torch.zeros(task.n_prompts), gen
    ).numpy()
    return {
        "sigma_group": float(sg),
        "sigma_noise": float(sn),
        "snr": float(snr),
        "quality_mean": float(q),
        "greedy_quality": float(task.quality(ids, greedy).mean()),
    }


def calibrate(
    task_cfg: Mapping[str, Any],
    init_cfg: Mapping[str, Any],
    trainer_cfg: Mapping[str, Any],
    judge_cfg: Mapping[str, Any],
    taus: Sequence[float] = DEFAULT_TAUS,
    target: float = TARGET_SIGMA_GROUP,
    batches: int = 16,
    K: int = 8,
    N: int = 8,
    probe_size: int = 8,
    probe_repeats: int = 4,
    seed: int = 0,
    root=None,
    with_random: bool = True,
) -> dict[str, Any]:
    """One row per τ (plus the random init if ``with_random``) and the chosen τ."""
    from arenabench import judges

    task = build_task(task_cfg)
    judge = judges.build(judge_cfg)
    torch.set_num_threads(int(trainer_cfg.get("threads", 1)))
    T = float(trainer_cfg["temperature"])
    kw = dict(K=K, N=N, batches=batches, probe_size=probe_size, probe_repeats=probe_repeats, seed=seed)
    base = InitConfig.of({**dict(init_cfg), "kind": "sft"})
    rows = []
    if with_random:
        torch.manual_seed(seed)  # the trainer's init for RL seed `seed`
        rows.append(
            {
                "tau": math.inf,
                "init": "random",
                **measure(build_model(task, trainer_cfg), task, judge, T, **kw),
            }
        )
    for tau in taus:
        icfg = dataclasses.replace(base, tau=float(tau))
        model = build_model(task, trainer_cfg)
        payload, path, built = load_or_build(task, model_dims(model), icfg, root)
        model.load_state_dict(payload["state_dict"])
        model.eval()
        probs = teacher_probs(task, icfg)
        mode_is_best = float(np.mean(probs.argmax(1) == task.values.argmax(1)))
        rows.append(
            {
                "tau": float(tau),
                "init": "sft",
                **measure(model, task, judge, T, **kw),
                "teacher_quality": float(task.base + task.scale * (probs * task.values).sum(1).mean()),
                "teacher_mode_is_best": mode_is_best,
                "sft_loss_end": float(payload["loss"][-1]),
                "teacher_entropy": float(payload["teacher_entropy"]),
                "sft_kl": float(payload["kl"]),
                "sft_wall_s": float(payload["wall_s"]),
                "sft_cpu_s": float(payload.get("cpu_s", math.nan)),
                "built": built,
                "key": path.stem,
            }
        )
    sft_rows = [r for r in rows if r["init"] == "sft"]
    chosen = min(sft_rows, key=lambda r: abs(r["sigma_group"] - target)) if sft_rows else None
    return {"rows": rows, "chosen": chosen, "target": target, "init": dataclasses.asdict(base)}


def format_table(result: Mapping[str, Any]) -> str:
    head = (
        "| τ | σ_group | σ_noise | SNR | quality (T) | greedy quality | teacher quality "
        "| teacher mode = best | SFT loss end / floor | KL(teacher‖SFT) | SFT CPU s |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in result["rows"]:
        mark = " **←**" if result["chosen"] is r else ""
        if r["init"] == "random":
            lines.append(
                f"| random init | {r['sigma_group']:.4f} | {r['sigma_noise']:.4f} | {r['snr']:.2f} "
                f"| {r['quality_mean']:.3f} | {r['greedy_quality']:.3f} | | | | | |"
            )
            continue
        built = "" if r["built"] else " (cached)"
        lines.append(
            f"| {r['tau']:g}{mark} | {r['sigma_group']:.4f} | {r['sigma_noise']:.4f} | {r['snr']:.2f} "
            f"| {r['quality_mean']:.3f} | {r['greedy_quality']:.3f} | {r['teacher_quality']:.3f} "
            f"| {r['teacher_mode_is_best']:.2f} | {r['sft_loss_end']:.3f} / {r['teacher_entropy']:.3f} "
            f"| {r['sft_kl']:.4f} | {r['sft_cpu_s']:.1f}{built} |"
        )
    c = result["chosen"]
    if c is not None:
        lines.append("")
        lines.append(
            f"chosen τ = {c['tau']:g}: σ_group {c['sigma_group']:.4f} (target {result['target']:g}), "
            f"σ_noise {c['sigma_noise']:.4f}, SNR {c['snr']:.2f}"
        )
    return "\n".join(lines)


def convergence(
    task_cfg: Mapping[str, Any], init_cfg: Mapping[str, Any], trainer_cfg: Mapping[str, Any], steps, root=None
) -> str:
    """SFT loss curve end, its floor (teacher entropy) and KL(teacher‖SFT) per SFT ``steps``
    (the init file's τ, lr, batch): how ``steps`` is chosen, by the SFT loss alone."""
    task = build_task(task_cfg)
    base = InitConfig.of({**dict(init_cfg), "kind": "sft"})
    lines = [
        "| SFT steps | loss (last 4 × 25-step means) | floor | KL(teacher‖SFT) nats/token | CPU s |",
        "|---|---|---|---|---|",
    ]
    for n in steps:
        icfg = dataclasses.replace(base, steps=int(n))
        payload, _, built = load_or_build(task, model_dims(build_model(task, trainer_cfg)), icfg, root)
        tail = ", ".join(f"{x:.3f}" for x in payload["loss"][-4:])
        lines.append(
            f"| {n} | {tail} | {payload['teacher_entropy']:.3f} | {payload['kl']:.4f} "
            f"| {payload.get('cpu_s', math.nan):.1f}{'' if built else ' (cached)'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m arenabench.trainers.local.calibrate", description=__doc__)
    p.add_argument("--task", default="preference", help="conf/task file")
    p.add_argument("--init", default="sft", help="conf/init file (its tau is replaced by the grid)")
    p.add_argument("--judge", default="calibrated", help="conf/judge file")
    p.add_argument("--trainer", default="grpo", help="conf/trainer file (temperature, model dims)")
    p.add_argument("--taus", default=",".join(f"{t:g}" for t in DEFAULT_TAUS), help="comma-separated τ grid")
    p.add_argument("--target", type=float, default=TARGET_SIGMA_GROUP, help="target σ_group at step 0")
    p.add_argument("--batches", type=int, default=16, help="rollout batches averaged per τ")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override an init key")
    p.add_argument("--task-set", action="append", default=[], metavar="KEY=VALUE", help="override a task key")
    p.add_argument(
        "--convergence", metavar="STEPS", help="instead: SFT loss/KL per comma-separated SFT steps (init's τ)"
    )
    args = p.parse_args(argv)
    train_cfg = yaml.safe_load((CONF / "train.yaml").read_text())
    init_cfg = _yaml("init", args.init)
    for kv in args.set:
        k, _, v = kv.partition("=")
        init_cfg[k] = yaml.safe_load(v)
    task_cfg = _yaml("task", args.task)
    for kv in args.task_set:
        k, _, v = kv.partition("=")
        task_cfg[k] = yaml.safe_load(v)
    if args.convergence:
        steps = [int(x) for x in args.convergence.split(",") if x.strip()]
        print(f"task={args.task} init={args.init}: {InitConfig.of({**init_cfg, 'kind': 'sft'})}")
        print(convergence(task_cfg, init_cfg, _yaml("trainer", args.trainer), steps))
        return 0
    result = calibrate(
        task_cfg,
        init_cfg,
        _yaml("trainer", args.trainer),
        _yaml("judge", args.judge),
        taus=[float(t) for t in args.taus.split(",") if t.strip()],
        target=args.target,
        batches=args.batches,
        K=int(train_cfg["prompts_per_step"]),
        N=int(train_cfg["group_size"]),
        probe_size=int(train_cfg["probe_size"]),
        probe_repeats=int(train_cfg["probe_repeats"]),
        seed=args.seed,
    )
    print(
        f"task={args.task} init={args.init} judge={args.judge} trainer={args.trainer} "
        f"(T={_yaml('trainer', args.trainer)['temperature']}) batches={args.batches} seed={args.seed}"
    )
    print(f"init config: {result['init']}")
    print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
