"""A tiny causal LM, its tokenizer and a toy dataset, built locally (no download).

For the GPU smoke test and the CPU tests: a byte-level BPE trained on a few strings, a 2-layer
Llama (head_dim 64, so vLLM's attention kernels accept it) with random weights, and verl-format
parquet files (``prompt`` chat messages, ``reward_model.ground_truth``, ``extra_info.split``).
Each prompt asks to copy a few colour words; the reference answer is those words, which is what
the simulated judge's ``overlap`` quality compares against.

    python -m arenabench.trainers.verl.tiny_model OUT_DIR   # OUT_DIR/model, OUT_DIR/data/*.parquet
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (
    "red",
    "green",
    "blue",
    "yellow",
    "black",
    "white",
    "orange",
    "purple",
    "pink",
    "brown",
    "grey",
    "gold",
)
SPECIAL = ("<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus(n: int = 200, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        lines.append(f"copy: {words}\n{words} Answer: {words}")
    return lines


def build_tokenizer(out_dir: str | Path, vocab_size: int = 512):
    """A byte-level BPE (any text encodes) wrapped as a ``PreTrainedTokenizerFast`` with a chat
    template, saved to ``out_dir``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=["<|user|>", "<|assistant|>", "<|system|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))
    return fast


def build_model(
    out_dir: str | Path, tokenizer, *, layers: int = 2, heads: int = 2, head_dim: int = 64, seed: int = 0
):
    """A randomly initialised ``LlamaForCausalLM`` sized to ``tokenizer``, saved to ``out_dir``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    hidden = heads * head_dim
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=head_dim,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(str(out_dir), safe_serialization=True)
    return model


def write_dataset(out_dir: str | Path, n_train: int = 16, n_val: int = 4, seed: int = 0) -> tuple[Path, Path]:
    """verl's RLHF parquet layout: ``data_source``, ``prompt`` (chat), ``ability``,
    ``reward_model`` {style, ground_truth}, ``extra_info`` {split, index}."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for split, n in (("train", n_train), ("test", n_val)):
        rows = []
        for i in range(n):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4)))
            rows.append(
                {
                    "data_source": "arenabench/tiny_copy",
                    "prompt": [{"role": "user", "content": f"copy: {words}"}],
                    "ability": "copy",
                    "reward_model": {"style": "rule", "ground_truth": words},
                    "extra_info": {"split": split, "index": i},
                }
            )
        path = out / f"{'train' if split == 'train' else 'val'}.parquet"
        pd.DataFrame(rows).to_parquet(path)
        paths.append(path)
    return paths[0], paths[1]


def build_all(out_dir: str | Path) -> Path:
    """``out_dir/model`` (tokenizer + weights) and ``out_dir/data/{train,val}.parquet``."""
    out = Path(out_dir)
    model_dir = out / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(model_dir)
    build_model(model_dir, tok)
    write_dataset(out / "data")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    args = p.parse_args(argv)
    out = build_all(args.out_dir)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
