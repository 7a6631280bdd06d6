"""Train with TRL's ``GRPOTrainer`` on a constructor's rewards: a tiny local model on the CPU by default.

    python -m arenabench.trainers.trl.example                      # tiny model, seeded_single_elim,
                                                                   # simulated judge, 3 steps, CPU
    python -m arenabench.trainers.trl.example --report-to mlflow   # + an MLflow run: $MLFLOW_TRACKING_URI,
                                                                   # $MLFLOW_EXPERIMENT_NAME (or trl)
    python -m arenabench.trainers.trl.example --model Qwen/Qwen3-0.6B --judge openai \\
        --judge-url http://127.0.0.1:8000 --judge-model Qwen/Qwen3-8B --api-key-env '' \\
        --device auto --steps 100                                  # a `vllm serve` judge

The default model is built locally (:func:`arenabench.tiny_model.build_tiny_model` on the verl
adapter's colour-word corpus: a BPE tokenizer and a random 2-layer Llama); the prompts ask to copy a
few colour words, and the simulated judge's hidden quality is the ``overlap`` of a completion with
those words (:func:`arenabench.trainers.verl.scoring.overlap_quality`). Needs the ``trl`` extra.

With ``--report-to mlflow`` the run is opened by :func:`mlflow_run` (an
:class:`arenabench.tracking.Tracker` that TRL's own MLflow callback logs into): it ends KILLED
on SIGTERM/SIGINT and FAILED on an error (TRL's callback alone would leave it RUNNING, or end it
FINISHED at exit), and a relaunch of the same job (output directory and run name) closes as
FAILED a run whose process died.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from arenabench.trainers.trl.reward import OUTPUTS, RECOMMENDED_SCALE_REWARDS, ArenaReward
from arenabench.trainers.verl.tiny_model import CHAT_TEMPLATE, SPECIAL, WORDS, corpus

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")  # TRL 1.16's
# TRL's CISPO caps the IS weight at ``epsilon_high`` itself (``clamp(r, max=epsilon_high)``), not at
# 1 + epsilon_high, and epsilon_high defaults to epsilon = 0.2: a cap of 0.2 scales every on-policy
# token by 0.2. 1.2 is the local trainer's and verl's cap (clip_ratio_high = 0.2, no lower clip):
# the same objective as arenabench.trainers.losses.cispo_loss. ScaleRL (TRL's docs) uses 5.0.
CISPO_EPSILON_HIGH = 1.2


def build_model(path: str | Path) -> Path:
    """The tiny local causal LM (idempotent): the verl adapter's colour-word tokenizer + 2-layer Llama."""
    from arenabench.tiny_model import build_tiny_model

    return build_tiny_model(
        path,
        vocab_size=512,
        max_len=512,
        corpus=corpus(),
        special_tokens=SPECIAL,
        chat_template=CHAT_TEMPLATE,
    )


def warm_start(
    base: str | Path,
    path: str | Path,
    *,
    copy_rate: float = 0.5,
    steps: int = 200,
    lr: float = 3e-3,
    batch: int = 32,
    seed: int = 0,
) -> Path:
    """Cold-start SFT of the tiny model ``base`` into ``path`` (idempotent), as ArenaRL's RL starts
    from an SFT model: next-token cross-entropy on answers of an *imperfect copier* — each word of
    the prompt kept with probability ``copy_rate``, else a random colour word, then ``</s>``.

    Why: a random 2-layer model almost never writes a prompt word in 8 tokens (true quality at the
    floor, −2: every completion equally bad, so any constructor ranks noise and RL learns nothing —
    measured). After this start the policy writes colour words and copies some, so groups differ
    and RL can raise the copy rate (true quality) — what the example is meant to show."""
    path = Path(path)
    if (path / "config.json").exists() and any(path.glob("*.safetensors")):
        return path
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        texts = []
        for _ in range(batch):
            words = [rng.choice(WORDS) for _ in range(rng.randint(2, 4))]
            answer = [w if rng.random() < copy_rate else rng.choice(WORDS) for w in words]
            texts.append(f"copy: {' '.join(words)}\n{' '.join(answer)}{tok.eos_token}")
        enc = tok(texts, return_tensors="pt", padding=True)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def copy_dataset(n: int = 16, seed: int = 0):
    """``prompt`` ("copy: red blue") and ``ground_truth`` ("red blue") rows, a ``datasets.Dataset``."""
    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4)))
        rows.append({"prompt": f"copy: {words}\n", "ground_truth": words})
    return Dataset.from_list(rows)


def judge_config(args: argparse.Namespace) -> dict[str, Any]:
    if args.judge == "openai":
        if not args.judge_model:
            raise SystemExit("--judge openai needs --judge-model (the served model's name)")
        cfg: dict[str, Any] = {
            "kind": "openai",
            "base_urls": [u.strip() for u in args.judge_url.split(",") if u.strip()],
            "model": args.judge_model,
            "rubric": args.rubric,
            "api_key_env": args.api_key_env or None,
            "max_tokens": args.judge_max_tokens,
        }
        if args.structured == "regex":  # vLLM's structured outputs: only consistent verdicts parse
            from arenabench.judges.prompts import consistent_verdict_regex

            cfg["extra_body"] = {"structured_outputs": {"regex": consistent_verdict_regex()}}
    else:
        cfg = {"kind": "simulated", "preset": args.preset, "quality": "overlap"}
    if args.judge_cache:
        cfg["cache"] = args.judge_cache
    if args.faults:
        cfg["faults"] = {"rate": args.faults, "seed": args.seed}
    return cfg


def mlflow_defaults(experiment: str = "trl") -> None:
    """Where TRL's MLflow callback (transformers' ``MLflowCallback``, which reads the environment)
    logs: ``$MLFLOW_TRACKING_URI`` if set, else arenabench's store (``results/mlflow.db``, as the
    local trainer's runs) — not MLflow's own default, a ``mlflow.db`` in the current directory
    (the repository root, untracked). The store's folder must exist (as everywhere in
    arenabench); experiment ``$MLFLOW_EXPERIMENT_NAME``, else ``trl``."""
    import os

    from arenabench.tracking import check_store_folder

    os.environ["MLFLOW_TRACKING_URI"] = check_store_folder(os.environ.get("MLFLOW_TRACKING_URI"))
    os.environ.setdefault("MLFLOW_EXPERIMENT_NAME", experiment)


def make_trainer(
    args: argparse.Namespace, reward: ArenaReward | None = None, *, check: bool = True, **config_overrides
):
    """``(trainer, reward)``: a ``GRPOTrainer`` over the copy task with an :class:`ArenaReward`
    (``check``: :meth:`ArenaReward.check_config` on the ``GRPOConfig``)."""
    from trl import GRPOConfig, GRPOTrainer

    out = Path(args.out_dir)
    model = args.model
    if model is None:
        model = str(build_model(out / "tiny_model"))
        if args.init == "sft":
            rate = args.sft_copy_rate
            model = str(warm_start(model, out / f"tiny_model_sft{rate:g}", copy_rate=rate))
    if reward is None:
        reward = ArenaReward(
            args.reward,
            judge_config(args),
            num_generations=args.num_generations,
            output=args.output,
            seed=args.seed,
        )
    if args.report_to == "mlflow":
        mlflow_defaults()
    scale = args.scale_rewards or RECOMMENDED_SCALE_REWARDS[reward.output]
    batch = args.prompts_per_step * args.num_generations
    cfg = dict(
        output_dir=str(out / "trl"),
        use_cpu=args.device == "cpu",
        max_steps=args.steps,
        per_device_train_batch_size=batch,  # one generation batch (K prompts × N) per optimizer step
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.lr,
        loss_type=args.loss_type,
        scale_rewards=scale,
        beta=args.beta,
        logging_steps=1,
        save_strategy="no",
        report_to=[] if args.report_to == "none" else [args.report_to],
        run_name=args.run_name,
        seed=args.seed,
        bf16=False,
        temperature=1.0,
        dataloader_num_workers=0,
        disable_tqdm=not args.progress,
    )
    epsilon_high = args.epsilon_high
    if epsilon_high is None and args.loss_type == "cispo":
        epsilon_high = CISPO_EPSILON_HIGH
    if epsilon_high is not None:
        cfg["epsilon_high"] = epsilon_high
    cfg.update(config_overrides)
    config = GRPOConfig(**cfg)
    if check:
        reward.check_config(config)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=copy_dataset(max(16, 2 * batch), seed=args.seed),
    )
    return trainer, reward


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="a model path or hub id (default: the tiny local model)")
    p.add_argument(
        "--init",
        choices=("sft", "random"),
        default="sft",
        help="the tiny model's start: sft (cold-start SFT on an imperfect copier, warm_start) or random",
    )
    p.add_argument("--sft-copy-rate", type=float, default=0.5, help="sft: the copier's keep rate per word")
    p.add_argument("--reward", default="seeded_single_elim", help="a registered constructor")
    p.add_argument("--judge", choices=("simulated", "openai"), default="simulated")
    p.add_argument("--preset", default="calibrated", help="simulated judge preset")
    p.add_argument(
        "--judge-url", default="http://127.0.0.1:8000", help="openai: base URL(s), comma-separated"
    )
    p.add_argument("--judge-model", default=None, help="openai: the served model name")
    p.add_argument("--rubric", default="open_writing", help="openai: the judge rubric")
    p.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="openai: env var with the key ('' for none)"
    )
    p.add_argument("--judge-max-tokens", type=int, default=512, help="openai: max tokens per verdict")
    p.add_argument(
        "--structured",
        choices=("regex", "none"),
        default="regex",
        help="openai: hold verdicts to the consistent-verdict regex (vLLM servers); none: free text",
    )
    p.add_argument("--judge-cache", default=None, help="sqlite judgment cache path")
    p.add_argument("--faults", type=float, default=0.0, help="injected judge fault rate (rehearsal)")
    p.add_argument("--output", choices=OUTPUTS, default="advantage")
    p.add_argument(
        "--scale-rewards",
        choices=("none", "group", "batch"),
        default=None,
        help="TRL's; default: the one recommended for --output (advantage: none)",
    )
    p.add_argument("--loss-type", choices=LOSS_TYPES, default="grpo")
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference model)")
    p.add_argument(
        "--epsilon-high",
        type=float,
        default=None,
        help=f"TRL's epsilon_high (default: TRL's; cispo: {CISPO_EPSILON_HIGH}, the IS-weight cap itself)",
    )
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts-per-step", type=int, default=2)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "auto"), default="cpu")
    p.add_argument("--report-to", choices=("none", "mlflow"), default="none")
    p.add_argument("--run-name", default="trl-arena")
    p.add_argument(
        "--out-dir",
        default=str(Path(tempfile.gettempdir()) / "arenabench-trl-example"),
        help="the tiny model and TRL's output_dir go here",
    )
    p.add_argument("--progress", action="store_true")
    return p


@contextlib.contextmanager
def mlflow_run(args: argparse.Namespace) -> Iterator[Any]:
    """The MLflow run of one training (``--report-to mlflow``; else nothing): a
    :class:`~arenabench.tracking.Tracker` in ``$MLFLOW_TRACKING_URI`` (the project's store by
    default), experiment ``$MLFLOW_EXPERIMENT_NAME`` or ``trl``, whose env TRL's callback adopts.
    Its ``job_key`` is the output directory and run name: what a relaunch of the same job
    shares (TRL resumes from ``output_dir``)."""
    if args.report_to != "mlflow":
        yield None
        return
    from arenabench.tracking import Tracker

    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "trl"
    job = f"{experiment}|{Path(args.out_dir).resolve()}|{args.run_name}"
    tags = {"trainer": "trl", "constructor": args.reward, "seed": args.seed, "loss": args.loss_type}
    with Tracker(
        experiment,
        run_name=args.run_name,
        tags=tags,
        identity=hashlib.sha256(job.encode("utf-8")).hexdigest()[:24],
    ) as run:
        for old in run.stale_failed:
            print(f"closed as FAILED the run {old} of a dead process")
        saved = {k: os.environ.get(k) for k in run.env()}
        os.environ.update(run.env())
        try:
            yield run
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with mlflow_run(args) as run:
        if run is not None:
            print(f"MLflow run {run.run_id} in {run.uri}", flush=True)
        trainer, reward = make_trainer(args)
        try:
            trainer.train()
        finally:
            reward.close()
    for row in trainer.state.log_history:
        if "arena/judge_calls" in row:
            print(
                f"step {row['step']}: true quality {row.get('arena/true_quality', float('nan')):.3f}  "
                f"judge_calls {row['arena/judge_calls']:.0f}  waves {row['arena/waves']:.0f}  "
                f"failures {row['arena/failures']:.0f}  masked {row['arena/masked_groups']:.0f}  "
                f"loss {row.get('loss', float('nan')):.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
