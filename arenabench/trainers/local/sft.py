"""Warm start for the local trainer: a supervised (SFT) phase before RL, as the papers do.

ArenaRL, RRC and Reasoning Arena start RL from a cold-start-SFT model that already sits in the
collapsed regime (ArenaRL Fig. 1a: in-group std of pointwise scores σ_group ≈ 0.03 against a
re-judging noise σ_noise ≈ 0.02). Here the TinyLM is first fitted, by cross-entropy on response
tokens, to demonstrations from a *teacher* over the task's hidden per-prompt token values:

    π_teacher(v | p) ∝ exp(logit[p, v] / τ),  every response token drawn i.i.d. from it;
    perfect teacher:    logit = value[p, v]
    imperfect teacher:  logit = ρ·value[p, v] + noise·ε[p, v],  ε ~ N(0, 1) (seeded)

The imperfect teacher's mode is not always the best token, so RL has something to discover.
τ is calibrated from judge statistics alone (:mod:`arenabench.trainers.local.calibrate`).

The checkpoint is a function of its configuration (task, model dims, teacher, SFT
steps/lr/batch, seed) *and of the CPU's floating-point kernels*: the fit is 800 AdamW steps of
float math whose reductions and vectorized exp/log differ in the last bits between instruction
sets (x86 AVX2/AVX-512 vs ARM NEON, and ATen's scalar fallback), and training amplifies last-bit
differences (measured: docs/reproducibility.md). So the checkpoints the published tables start
from are **shipped** (``checkpoints/`` beside this module, ~100 KB each, listed with their sha256
in ``checkpoints/manifest.json``) and loaded in preference to a build; a shipped file whose
content hash differs from its manifest entry is an error. Other configurations are built on first
use and cached at ``$ARENABENCH_CACHE/sft/<key>.pt`` (default ``~/.cache/arenabench/sft/``),
written atomically so parallel sweep jobs never read a partial file; ``arenabench sft verify``
rebuilds the shipped ones on this CPU and says loudly if a rebuild differs.

A checkpoint's identity is :func:`state_sha256` — the sha256 of its parameter bytes (names,
dtypes, shapes, little-endian values), not of the ``.pt`` file, whose bytes also hold build
timings and torch's serialization details. Every run logs it as the MLflow tag ``init_sha256``.

The RL seed is not part of the key: every arm and RL seed of a sweep starts from the same SFT model
(unless the experiment sets ``init.seed: ${seed}``, as the imperfect-teacher ones do, so that the
teacher draw varies with the seed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from arenabench import numerics as nx
from arenabench.trainers.local.policy import TinyLM

PUBLISHED = Path(__file__).resolve().parent / "checkpoints"  # shipped checkpoints + manifest.json
SFT_VERSION = 1  # bump when the SFT algorithm changes: old checkpoints stop matching
KINDS = ("random", "sft")
TEACHERS = ("perfect", "imperfect")


@dataclasses.dataclass(frozen=True)
class InitConfig:
    """A ``conf/init`` entry. ``kind=random`` keeps the trainer's random init (other keys unused)."""

    kind: str = "random"
    tau: float = 1.0  # teacher temperature
    steps: int = 800  # SFT optimizer steps
    lr: float = 1.0e-2  # AdamW peak learning rate (cosine decay to 0)
    batch: int = 64  # demonstrations per step
    teacher: str = "perfect"
    rho: float = 1.0  # imperfect teacher: weight of the true value in its logits
    noise: float = 0.0  # imperfect teacher: std of its logit noise
    seed: int = 0  # model init, demonstrations and teacher noise

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"init kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.teacher not in TEACHERS:
            raise ValueError(f"init teacher must be one of {', '.join(TEACHERS)}; got {self.teacher!r}")
        if not (math.isfinite(self.tau) and self.tau > 0):
            raise ValueError(f"init tau must be a finite number > 0; got {self.tau!r}")
        if self.steps < 0 or self.batch < 1 or not self.lr > 0:
            raise ValueError(
                f"need init steps >= 0, batch >= 1, lr > 0; got {self.steps}, {self.batch}, {self.lr}"
            )
        if not (math.isfinite(self.rho) and math.isfinite(self.noise) and self.noise >= 0):
            raise ValueError(f"init rho must be finite and noise >= 0; got {self.rho!r}, {self.noise!r}")

    @classmethod
    def of(cls, cfg: Mapping[str, Any] | InitConfig | None) -> InitConfig:
        if cfg is None:
            return cls()
        if isinstance(cfg, InitConfig):
            return cfg
        valid = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(cfg) - valid)
        if bad:
            raise TypeError(f"unknown init key(s) {', '.join(bad)}; valid: {', '.join(sorted(valid))}")
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        conv = {"str": str, "float": float, "int": int}
        return cls(**{k: conv[types[k]](v) for k, v in cfg.items()})


# --- the teacher -------------------------------------------------------------------------------


def teacher_logits(task, icfg: InitConfig) -> np.ndarray:
    """[n_prompts, vocab] logits (before the temperature τ)."""
    if icfg.teacher == "perfect":
        return np.array(task.values, dtype=np.float64)
    eps = np.random.default_rng([icfg.seed, 17]).standard_normal(task.values.shape)
    return icfg.rho * task.values + icfg.noise * eps


def teacher_probs(task, icfg: InitConfig) -> np.ndarray:
    z = teacher_logits(task, icfg) / icfg.tau
    z = nx.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


# --- the cache key -----------------------------------------------------------------------------


def model_dims(model: TinyLM) -> dict[str, int]:
    """The architecture the checkpoint fits (``tie_head`` listed only when False: the keys of
    tied models, the historical layout, stay what they were)."""
    dims = {
        "vocab": int(model.vocab),
        "max_len": int(model.max_len),
        "d_model": int(model.tok.weight.shape[1]),
        "n_layer": len(model.blocks),
        "n_head": int(model.blocks[0].attn.num_heads) if len(model.blocks) else 0,
    }
    if model.head is not None:
        dims["tie_head"] = False
    return dims


def new_model(dims: Mapping[str, Any]) -> TinyLM:
    return TinyLM(
        dims["vocab"], dims["max_len"], dims["d_model"], dims["n_layer"], dims["n_head"],
        tie_head=bool(dims.get("tie_head", True)),
    )  # fmt: skip


def state_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 of a state dict's content: for each entry in name order, its name, dtype, shape and
    little-endian value bytes. Independent of how (and when) the file was written."""
    h = hashlib.sha256()
    for name in sorted(state):
        a = state[name].detach().cpu().contiguous().numpy()
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        h.update(f"{name}|{a.dtype.str}|{tuple(a.shape)}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def task_identity(task) -> dict[str, Any]:
    """The task's class, its configuration fields and a digest of its hidden values and prompts
    (so a change in how the task is generated also changes the key)."""
    fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.init}
    digest = hashlib.sha256(
        np.ascontiguousarray(task.values, dtype=np.float64).tobytes()
        + np.ascontiguousarray(task.prompts, dtype=np.int64).tobytes()
    ).hexdigest()[:16]
    return {"class": type(task).__name__, "fields": fields, "data": digest}


def sft_identity(task, dims: Mapping[str, int], icfg: InitConfig) -> dict[str, Any]:
    return {
        "version": SFT_VERSION,
        "task": task_identity(task),
        "model": dict(dims),
        "init": dataclasses.asdict(icfg),
    }


def sft_key(task, dims: Mapping[str, int], icfg: InitConfig) -> str:
    text = json.dumps(sft_identity(task, dims, icfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def cache_dir(root: str | os.PathLike | None = None) -> Path:
    """``<root>/sft`` with root = the argument, else ``$ARENABENCH_CACHE``, else ``~/.cache/arenabench``."""
    root = root or os.environ.get("ARENABENCH_CACHE") or Path.home() / ".cache" / "arenabench"
    return Path(root).expanduser() / "sft"


# --- SFT ---------------------------------------------------------------------------------------


def build_sft(task, dims: Mapping[str, int], icfg: InitConfig, log_every: int = 25) -> dict[str, Any]:
    """Fit a fresh TinyLM (init seeded by ``icfg.seed``) to the teacher's demonstrations.

    Returns the checkpoint payload: ``state_dict``, ``loss`` (mean demonstration cross-entropy
    per ``log_every`` steps), ``teacher_entropy`` (the loss floor), ``kl`` (teacher ‖ model on
    a fixed batch of fresh demonstrations, at the end), ``wall_s``, ``cpu_s``. Runs on one thread and leaves
    the global torch RNG and thread count as it found them."""
    t0, c0 = time.perf_counter(), time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(icfg.seed)
            model = new_model(dims)
        probs = torch.as_tensor(teacher_probs(task, icfg), dtype=torch.float32)
        prompts = torch.as_tensor(task.prompts)
        P, L, pl = task.n_prompts, task.response_len, task.prompt_len
        gen = torch.Generator().manual_seed(icfg.seed)

        def demos(n: int):
            pid = torch.randint(P, (n,), generator=gen)
            resp = torch.multinomial(probs[pid], L, replacement=True, generator=gen)
            return pid, resp, torch.cat([prompts[pid], resp], dim=1)

        def response_logits(seq):
            return model(seq[:, :-1])[:, pl - 1 :]

        opt = torch.optim.AdamW(model.parameters(), lr=icfg.lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1.0 + math.cos(math.pi * s / max(icfg.steps, 1)))
        )
        curve, acc = [], []
        model.train()
        for _ in range(icfg.steps):
            _, resp, seq = demos(icfg.batch)
            loss = F.cross_entropy(response_logits(seq).reshape(-1, task.vocab), resp.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            acc.append(float(loss.detach()))
            if len(acc) == log_every:
                curve.append(sum(acc) / len(acc))
                acc = []
        if acc:
            curve.append(sum(acc) / len(acc))
        model.eval()
        with torch.no_grad():
            pid, _, seq = demos(512)
            logq = F.log_softmax(response_logits(seq), dim=-1)  # [B, L, V]
            p = probs[pid][:, None, :]
            kl = float((p * (torch.log(p.clamp_min(1e-30)) - logq)).sum(-1).mean())
        ent = -(probs * torch.log(probs.clamp_min(1e-30))).sum(-1).mean()
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    finally:
        torch.set_num_threads(threads)
    return {
        "state_dict": state,
        "loss": curve,
        "teacher_entropy": float(ent),
        "kl": kl,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,  # one thread: the time it takes on one free core
    }


def _save_atomic(payload: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        torch.save(dict(payload), tmp)
        os.replace(tmp, path)  # atomic: a concurrent reader sees no file or the whole file
    finally:
        tmp.unlink(missing_ok=True)


def manifest(published: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """The shipped checkpoints: ``{key: entry}`` (entry: ``name``, ``file``, ``sha256``, the
    ``task``/``dims``/``init`` to rebuild it, and the torch version and CPU it was built with)."""
    path = Path(published or PUBLISHED) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}


def load_published(key: str, published: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The shipped checkpoint ``key`` (None if none is shipped, or its file is missing: then
    :func:`load_or_build` rebuilds it and checks the build against the manifest), its content hash
    checked against the manifest: a changed or damaged file is an error, never a silent different
    start."""
    entry = manifest(published).get(key)
    if entry is None:
        return None
    path = Path(published or PUBLISHED) / entry["file"]
    if not path.exists():
        logging.getLogger(__name__).warning("shipped SFT checkpoint %s is missing: rebuilding it", path)
        return None
    payload = torch.load(path, map_location="cpu", weights_only=True)
    got = state_sha256(payload["state_dict"])
    if got != entry["sha256"]:
        raise RuntimeError(
            f"shipped SFT checkpoint {path} has content sha256 {got}, its manifest says "
            f"{entry['sha256']}: the file was changed or damaged; restore it from git"
        )
    return payload


class RebuildMismatch(UserWarning):
    """A checkpoint rebuilt here differs from the shipped one of the same configuration."""


def load_or_build(
    task,
    dims: Mapping[str, int],
    icfg: InitConfig,
    root: str | os.PathLike | None = None,
    published: str | os.PathLike | None = None,
) -> tuple[dict[str, Any], Path, bool]:
    """The SFT checkpoint for this configuration: (payload, path, built_now). The payload holds
    ``sha256`` (:func:`state_sha256`) and ``source``: ``published`` (shipped with arenabench),
    ``cache`` or ``built``. A configuration in the manifest whose file is missing is rebuilt, and a
    rebuild that differs from the manifest's hash says so loudly (:class:`RebuildMismatch`)."""
    key = sft_key(task, dims, icfg)
    shipped = load_published(key, published)
    if shipped is not None:
        path = Path(published or PUBLISHED) / manifest(published)[key]["file"]
        return {**shipped, "sha256": state_sha256(shipped["state_dict"]), "source": "published"}, path, False
    path = cache_dir(root) / f"{key}.pt"
    if path.exists():
        payload = torch.load(path, map_location="cpu", weights_only=True)
        return {**payload, "sha256": state_sha256(payload["state_dict"]), "source": "cache"}, path, False
    payload = build_sft(task, dims, icfg)
    payload["key"] = key
    payload["identity"] = json.loads(json.dumps(sft_identity(task, dims, icfg), default=str))
    payload["sha256"] = state_sha256(payload["state_dict"])
    want = manifest(published).get(key, {}).get("sha256")
    if want is not None and want != payload["sha256"]:
        warn_mismatch(key, want, payload["sha256"])
    _save_atomic(payload, path)
    return {**payload, "source": "built"}, path, True


def warn_mismatch(key: str, published: str, rebuilt: str) -> None:
    import warnings

    msg = (
        f"SFT checkpoint {key}: the build on this CPU has sha256 {rebuilt[:16]}…, the published one "
        f"{published[:16]}…; runs from it will NOT reproduce the published tables "
        "(docs/reproducibility.md)"
    )
    logging.getLogger(__name__).error(msg)
    warnings.warn(msg, RebuildMismatch, stacklevel=3)


def load_init(
    policy: TinyLM, task, cfg: Mapping[str, Any] | InitConfig | None, root: str | os.PathLike | None = None
) -> dict[str, str]:
    """Load the start RL begins from into ``policy`` (nothing for ``kind=random``) and return its
    provenance: ``init_sha256`` (:func:`state_sha256` of the policy's state now — for a random init
    too) and ``init_source`` (random, published, cache or built)."""
    icfg = InitConfig.of(cfg)
    source = "random"
    if icfg.kind != "random":
        payload, _, _ = load_or_build(task, model_dims(policy), icfg, root)
        policy.load_state_dict(payload["state_dict"])
        source = payload["source"]
    return {"init_sha256": state_sha256(policy.state_dict()), "init_source": source}


def init_policy(
    policy: TinyLM, task, cfg: Mapping[str, Any] | InitConfig | None, root: str | os.PathLike | None = None
) -> TinyLM:
    """The policy RL starts from: ``policy`` untouched for ``kind=random`` (or no init config),
    else loaded with the SFT checkpoint for ``cfg`` (shipped, cached, or built on first use)."""
    load_init(policy, task, cfg, root)
    return policy


# --- shipping and checking the published checkpoints -------------------------------------------


def publish(
    task_cfg: Mapping[str, Any],
    dims: Mapping[str, Any],
    icfg: InitConfig,
    name: str,
    published: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Build the checkpoint of (task, dims, init) on this machine, ship it as
    ``checkpoints/<key>.pt`` and record it in the manifest (maintainers: after changing the SFT
    algorithm, bump :data:`SFT_VERSION` and republish). Returns the manifest entry."""
    from arenabench.trainers.local.task import TASKS

    conf = dict(task_cfg)
    task = TASKS.get(conf.pop("name"), **conf)
    key = sft_key(task, dims, icfg)
    payload = build_sft(task, dims, icfg)
    payload.pop("wall_s"), payload.pop("cpu_s")  # timings: not what is shipped
    payload["key"] = key
    payload["identity"] = json.loads(json.dumps(sft_identity(task, dims, icfg), default=str))
    root = Path(published or PUBLISHED)
    _save_atomic(payload, root / f"{key}.pt")
    entry = {
        "name": name,
        "file": f"{key}.pt",
        "sha256": state_sha256(payload["state_dict"]),
        "task": dict(task_cfg),
        "dims": dict(dims),
        "init": dataclasses.asdict(icfg),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    entries = {**manifest(published), key: entry}
    (root / "manifest.json").write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
    return entry


def verify_published(published: str | os.PathLike | None = None, keys=None) -> list[dict[str, Any]]:
    """Rebuild shipped checkpoints on this CPU (all, or ``keys``) and compare: one row per
    checkpoint with ``match`` and the largest absolute parameter difference. Mismatches also warn
    (:class:`RebuildMismatch`)."""
    from arenabench.trainers.local.task import TASKS

    rows = []
    for key, entry in manifest(published).items():
        if keys is not None and key not in keys:
            continue
        conf = dict(entry["task"])
        task = TASKS.get(conf.pop("name"), **conf)
        icfg = InitConfig.of(entry["init"])
        if sft_key(task, entry["dims"], icfg) != key:
            raise RuntimeError(f"manifest entry {key} ({entry['name']}) no longer has its key: republish")
        built = build_sft(task, entry["dims"], icfg)
        got = state_sha256(built["state_dict"])
        shipped = load_published(key, published)
        diff = (
            max(  # nan_to_num: the causal mask's -inf - -inf
                float((built["state_dict"][k] - v).abs().nan_to_num(0.0).max())
                for k, v in shipped["state_dict"].items()
            )
            if shipped is not None
            else math.nan  # the shipped file is missing: only the hashes compare
        )
        rows.append(
            {"key": key, "name": entry["name"], "published": entry["sha256"], "rebuilt": got,
             "match": got == entry["sha256"], "max_abs_diff": diff, "wall_s": built["wall_s"]}
        )  # fmt: skip
        if got != entry["sha256"]:
            warn_mismatch(key, entry["sha256"], got)
    return rows
