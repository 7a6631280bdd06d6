"""Train with TRL's ``GRPOTrainer`` on a constructor's rewards: a tiny local model on the CPU by default.

    python -m arenabench.trainers.trl.example                      # tiny model, seeded_single_elim,
                                                                   # simulated judge, 40 steps, CPU
    python -m arenabench.trainers.trl.example --report-to mlflow   # + an MLflow run: $MLFLOW_TRACKING_URI,
                                                                   # $MLFLOW_EXPERIMENT_NAME (or trl)
    python -m arenabench.trainers.trl.example --model Qwen/Qwen3-0.6B --judge openai \\
        --judge-url http://127.0.0.1:8000 --judge-model Qwen/Qwen3-8B --api-key-env '' \\
        --device auto --steps 100 --max-completion-length 16       # a `vllm serve` judge

The default model is built locally (:func:`arenabench.tiny_model.build_tiny_model` on the
colour-word copy task's corpus, the verl adapter's too: a BPE tokenizer and a random 2-layer
Llama), then given a cold-start SFT (:func:`warm_start`: an imperfect copier); the prompts ask to
copy one colour word
(``--min-words``/``--max-words``), and the simulated judge's hidden quality is the ``overlap`` of a
completion with it (:func:`arenabench.trainers.scoring.overlap_quality`). The run prints the
policy's true quality before and after training (:func:`true_quality`); every default and why, and
what it learns against a control: docs/trl.md (:mod:`arenabench.trainers.trl.learning`). Needs the
``trl`` extra.

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

import numpy as np

from arenabench.tiny_model import COPY_CHAT_TEMPLATE, COPY_SPECIAL_TOKENS, WORDS, copy_corpus
from arenabench.trainers.scoring import QUALITIES, overlap_quality
from arenabench.trainers.trl.reward import OUTPUTS, RECOMMENDED_SCALE_REWARDS, ArenaReward

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")  # TRL 1.16's
# TRL's CISPO caps the IS weight at ``epsilon_high`` itself (``clamp(r, max=epsilon_high)``), not at
# 1 + epsilon_high, and epsilon_high defaults to epsilon = 0.2: a cap of 0.2 scales every on-policy
# token by 0.2. 1.2 is the local trainer's and verl's cap (clip_ratio_high = 0.2, no lower clip):
# the same objective as arenabench.trainers.losses.cispo_loss. ScaleRL (TRL's docs) uses 5.0.
CISPO_EPSILON_HIGH = 1.2


def build_model(path: str | Path) -> Path:
    """The tiny local causal LM (idempotent): the colour-word copy task's tokenizer + 2-layer Llama
    (``arenabench.tiny_model``, the verl adapter's too)."""
    from arenabench.tiny_model import build_tiny_model

    return build_tiny_model(
        path,
        vocab_size=512,
        max_len=512,
        corpus=copy_corpus(),
        special_tokens=COPY_SPECIAL_TOKENS,
        chat_template=COPY_CHAT_TEMPLATE,
    )


def copy_rows(n: int, seed: int, words: tuple[int, int] = (1, 1)) -> list[tuple[str, str]]:
    """``n`` copy prompts ("copy: red blue\\n") and their answers ("red blue"): each prompt holds
    ``words[0]``–``words[1]`` colour words drawn uniformly (seeded)."""
    lo, hi = words
    if not 1 <= lo <= hi:
        raise ValueError(f"words must satisfy 1 <= min <= max; got {words!r}")
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        answer = " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
        rows.append((f"copy: {answer}\n", answer))
    return rows


def warm_start(
    base: str | Path,
    path: str | Path,
    *,
    copy_rate: float = 0.5,
    words: tuple[int, int] = (1, 1),
    steps: int = 200,
    lr: float = 3e-3,
    batch: int = 32,
    seed: int = 0,
) -> Path:
    """Cold-start SFT of the tiny model ``base`` into ``path`` (idempotent), as ArenaRL's RL starts
    from an SFT model: next-token cross-entropy on the answers of a teacher that writes as many
    colour words as the prompt holds, each the prompt's word with probability ``copy_rate``, else a
    uniformly random colour word, then ``</s>``.

    Why: a random 2-layer model almost never writes a colour word (true quality at the floor, −2:
    every completion equally bad, so any constructor ranks noise and RL learns nothing — measured).
    After 200 steps at ``copy_rate=0.5`` on one-word prompts the policy writes one colour word and
    copies the prompt's 18% of the time (chance: 8%; the teacher: 54%), so groups differ and RL can
    raise the copy rate; ``copy_rate=0`` gives a start that knows only the format (docs/trl.md:
    RL did not learn from it).
    """
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
        for prompt, answer in copy_rows(batch, rng.randrange(2**31), words):
            said = [w if rng.random() < copy_rate else rng.choice(WORDS) for w in answer.split()]
            texts.append(f"{prompt}{' '.join(said)}{tok.eos_token}")
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


def copy_dataset(n: int = 16, seed: int = 0, words: tuple[int, int] = (1, 1)):
    """``prompt`` ("copy: red blue\\n") and ``ground_truth`` ("red blue") rows, a ``datasets.Dataset``."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": p, "ground_truth": a} for p, a in copy_rows(n, seed, words)])


def true_quality(
    model,
    tokenizer,
    rows: list[tuple[str, str]],
    *,
    samples: int = 16,
    max_new_tokens: int = 8,
    temperature: float = 1.0,
    seed: int = 0,
) -> float:
    """The mean true quality (:func:`overlap_quality`, what the simulated judge ranks by) of
    ``samples`` completions per prompt of ``rows``, sampled as TRL samples in training
    (``temperature``, no top-k/top-p): the policy's expected quality, measured apart from training
    batches. Seeded inside a forked RNG, so evaluating does not move training's random stream and
    two evaluations of the same weights with the same ``seed`` are equal."""
    import torch

    was_training = model.training
    model.eval()
    q = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for prompt, answer in rows:
            enc = tokenizer(prompt, return_tensors="pt").to(model.device)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=samples,
                pad_token_id=tokenizer.pad_token_id,
            )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            q += [overlap_quality(t, answer) for t in texts]
    model.train(was_training)
    return float(sum(q) / len(q))


def words_of(args: argparse.Namespace) -> tuple[int, int]:
    return (args.min_words, args.max_words)


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
        cfg = {"kind": "simulated", "preset": args.preset, "quality": args.quality}
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


#: The tiny model's learning rate. Adam moves each weight by about ``lr`` per step whatever the
#: gradient's scale; the tiny Llama's weights start with std 0.02 (``LlamaConfig.initializer_range``).
#: At 3e-4 the example's 40 steps can move a weight with a consistent gradient by ~0.012, about its
#: own scale, while a weight driven by judge noise alone random-walks ~lr·√40 ≈ 0.002, a tenth of it.
TINY_LR = 3e-4
TRL_LR = 1e-6  # GRPOConfig's default, meant for real LLMs (--model)


def learning_rate(args: argparse.Namespace) -> float:
    if args.lr is not None:
        return args.lr
    return TINY_LR if args.model is None else TRL_LR


def start_model(args: argparse.Namespace) -> str:
    """The policy's start: ``--model``, else the tiny local model under ``--out-dir`` (built once;
    ``--init sft``: its cold-start SFT, :func:`warm_start`, built once per setting)."""
    if args.model is not None:
        return args.model
    out = Path(args.out_dir)
    model = str(build_model(out / "tiny_model"))
    if args.init == "sft":
        rate, words = args.sft_copy_rate, words_of(args)
        name = f"tiny_model_sft{rate:g}_w{words[0]}-{words[1]}_s{args.sft_steps}"
        model = str(warm_start(model, out / name, copy_rate=rate, words=words, steps=args.sft_steps))
    return model


def make_trainer(
    args: argparse.Namespace, reward: ArenaReward | None = None, *, check: bool = True, **config_overrides
):
    """``(trainer, reward)``: a ``GRPOTrainer`` over the copy task with an :class:`ArenaReward`
    (``check``: :meth:`ArenaReward.check_config` on the ``GRPOConfig``)."""
    from trl import GRPOConfig, GRPOTrainer

    out = Path(args.out_dir)
    model = start_model(args)
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
        learning_rate=learning_rate(args),
        lr_scheduler_type=args.lr_schedule,
        loss_type=args.loss_type,
        scale_rewards=scale,
        beta=args.beta,
        logging_steps=1,
        save_strategy="no",
        report_to=[] if args.report_to == "none" else [args.report_to],
        run_name=args.run_name,
        seed=args.seed,
        bf16=False,
        temperature=args.temperature,
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
        train_dataset=copy_dataset(max(16, 2 * batch), seed=args.seed, words=words_of(args)),
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
    p.add_argument(
        "--sft-copy-rate",
        type=float,
        default=0.5,
        help="sft: the teacher's keep rate per word (the rest are random colour words)",
    )
    p.add_argument("--sft-steps", type=int, default=200, help="sft: optimizer steps (batch 32)")
    p.add_argument("--min-words", type=int, default=1, help="colour words per prompt, at least")
    p.add_argument("--max-words", type=int, default=1, help="colour words per prompt, at most")
    p.add_argument(
        "--quality",
        choices=QUALITIES,
        default="overlap",
        help="simulated judge's hidden quality: overlap (the task); constant (the judge ranks only its "
        "noise: the control that cannot learn the task); hash (plumbing)",
    )
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
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--prompts-per-step", type=int, default=8)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument(
        "--max-completion-length",
        type=int,
        default=1,
        help="completion tokens (1: one colour word, the answer's length, so no answer can hedge)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"Adam's learning rate (default: {TINY_LR:g} for the tiny model, TRL's {TRL_LR:g} with --model)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (TRL's)")
    p.add_argument(
        "--eval-samples",
        type=int,
        default=16,
        help="true quality before and after training: completions per evaluation prompt (0: skip)",
    )
    p.add_argument("--eval-prompts", type=int, default=24, help="evaluation prompts (a fixed draw)")
    p.add_argument(
        "--lr-schedule",
        choices=("constant", "linear", "cosine"),
        default="constant",
        help="TRL's lr_scheduler_type (transformers' default, linear, decays to 0 by the last step)",
    )
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


#: The evaluation's prompts and sampling seed: one fixed draw, shared by every run and seed, so
#: "before" is the same number for every run from one start and "after" differs by training only.
EVAL_SEED = 1_000_003


def _task_quality(groups) -> float:
    """Mean :func:`overlap_quality` of the groups' completions against each group's answer."""
    q = [overlap_quality(t.text, g.meta.get("answer")) for g in groups for t in g.trajectories]
    return float(np.mean(q))


def train_and_evaluate(args: argparse.Namespace) -> dict[str, Any]:
    """Train (:func:`make_trainer`) and measure the policy's true quality before and after
    (:func:`true_quality` on ``--eval-prompts`` fixed prompts × ``--eval-samples`` completions;
    NaN when ``--eval-samples 0``). Returns ``before``, ``after``, ``curve`` (per step, the mean true
    quality — the task's, :func:`overlap_quality`, whatever the judge ranks by — of that step's
    completions), ``trainer``, ``reward``."""
    trainer, reward = make_trainer(args)
    reward.keep_history = max(reward.keep_history, args.steps)  # every step's groups, for the curve
    rows = copy_rows(args.eval_prompts, EVAL_SEED, words_of(args))

    def evaluate() -> float:
        if args.eval_samples <= 0:
            return float("nan")
        return true_quality(
            trainer.model,
            trainer.processing_class,
            rows,
            samples=args.eval_samples,
            max_new_tokens=args.max_completion_length,
            temperature=args.temperature,
            seed=EVAL_SEED,
        )

    before = evaluate()
    try:
        trainer.train()
    finally:
        reward.close()
    after = evaluate()
    curve = [_task_quality(call.groups) for call in reward.history]
    return {"before": before, "after": after, "curve": curve, "trainer": trainer, "reward": reward}


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with mlflow_run(args) as run:
        if run is not None:
            print(f"MLflow run {run.run_id} in {run.uri}", flush=True)
        out = train_and_evaluate(args)
        if run is not None and args.eval_samples > 0:
            run.log_metrics({"eval/true_quality": out["before"]}, step=0)
            run.log_metrics({"eval/true_quality": out["after"]}, step=args.steps)
    for row in out["trainer"].state.log_history:
        if "arena/judge_calls" in row:
            print(
                f"step {row['step']}: true quality {row.get('arena/true_quality', float('nan')):.3f}  "
                f"judge_calls {row['arena/judge_calls']:.0f}  waves {row['arena/waves']:.0f}  "
                f"failures {row['arena/failures']:.0f}  masked {row['arena/masked_groups']:.0f}  "
                f"loss {row.get('loss', float('nan')):.4f}"
            )
    if args.eval_samples > 0:
        n = args.eval_prompts * args.eval_samples
        print(
            f"true quality of the policy ({n} sampled completions of {args.eval_prompts} fixed prompts): "
            f"before training {out['before']:.3f}, after {out['after']:.3f} "
            f"(change {out['after'] - out['before']:+.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
