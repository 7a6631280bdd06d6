"""A tiny causal LM, its tokenizer and a toy dataset, built locally (no download).

For the GPU smoke test and the CPU tests: the one tiny-model builder
(:func:`arenabench.tiny_model.build_tiny_model`: byte-level BPE + 2-layer random Llama) trained
on the colour-word copy task's lines (``tiny_model.copy_corpus``), and verl-format parquet files
(``prompt`` chat messages, ``reward_model.ground_truth``, ``extra_info.split``).
Each prompt asks to copy a few colour words; the reference answer is those words, which is what
the simulated judge's ``overlap`` quality compares against.

    python -m arenabench.trainers.verl.tiny_model OUT_DIR   # OUT_DIR/model, OUT_DIR/data/*.parquet
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from arenabench.tiny_model import (
    COPY_CHAT_TEMPLATE,
    COPY_SPECIAL_TOKENS,
    WORDS,
    build_tiny_model,
    copy_corpus,
)


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
    """``out_dir/model`` (tokenizer + weights, :func:`arenabench.tiny_model.build_tiny_model` on
    the colour-word corpus, 512 tokens of context) and ``out_dir/data/{train,val}.parquet``."""
    out = Path(out_dir)
    build_tiny_model(
        out / "model",
        vocab_size=512,
        max_len=512,
        corpus=copy_corpus(),
        special_tokens=COPY_SPECIAL_TOKENS,
        chat_template=COPY_CHAT_TEMPLATE,
    )
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
