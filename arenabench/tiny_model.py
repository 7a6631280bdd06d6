"""A tiny random Llama checkpoint built locally, for exercising real vLLM / verl code paths.

No weights can be downloaded here, and a test only needs the *code path* to be real (tokenizer,
chat template, engine, sampling, structured decoding, logprobs), not sensible verdicts. So we
take the byte-level BPE the simulated judge counts tokens with
(:func:`arenabench.judges.tokenizer.build_tiny_tokenizer`, trained on the judge prompts), build a
2-layer ``LlamaConfig`` with random weights and ``save_pretrained`` both. The verl tests and GPU
smoke test build theirs here too, on their own corpus (:mod:`arenabench.trainers.verl.tiny_model`).

Head size is 64 (2 heads x 64 = hidden 128): the CPU attention backend of vLLM rejects smaller
head sizes. ``transformers`` (the ``vllm``/``verl`` extras) is imported inside the builder only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from arenabench.judges.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, build_tiny_tokenizer


def build_tiny_model(
    path: str | Path,
    *,
    vocab_size: int = 1024,
    seed: int = 0,
    max_len: int = 8192,
    corpus: Sequence[str] | None = None,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    chat_template: str = CHAT_TEMPLATE,
) -> Path:
    """Write a random 2-layer Llama (hidden 128, head size 64) and its tokenizer to ``path``.

    The BPE is trained on ``corpus`` (default: the judge prompts). ``<unk>``, ``<s>``, ``</s>``
    and ``<pad>`` in ``special_tokens`` become the tokenizer's unk/bos/eos/pad; any other entry
    (e.g. chat role markers) is an additional special token. Deterministic for given arguments.
    Returns ``path``. Idempotent: an existing complete checkpoint (``config.json`` +
    ``tokenizer.json`` + weights) is reused as is.
    """
    path = Path(path)
    if (
        (path / "config.json").exists()
        and (path / "tokenizer.json").exists()
        and any(path.glob("*.safetensors"))
    ):
        return path
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special_tokens = list(special_tokens)
    named = {"<unk>": "unk_token", "<s>": "bos_token", "</s>": "eos_token", "<pad>": "pad_token"}
    roles = {named[t]: t for t in special_tokens if t in named}
    extra = [t for t in special_tokens if t not in named]

    path.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(vocab_size=vocab_size, corpus=corpus, special_tokens=special_tokens)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, **roles, **({"additional_special_tokens": extra} if extra else {})
    )
    fast.chat_template = chat_template
    fast.model_max_length = max_len
    fast.save_pretrained(path)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=max_len,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id
    )
    model.save_pretrained(path, safe_serialization=True)
    (path / "arenabench_tiny.json").write_text(json.dumps({"seed": seed, "vocab_size": len(fast)}))
    return path


# --- the colour-word copy task: the verl and TRL examples' tiny model and data -------------------

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
# the chat role markers are special tokens (one id each, dropped by decode)
COPY_SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>")
COPY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def copy_corpus(n: int = 200, seed: int = 0) -> list[str]:
    """The BPE corpus of the copy task's tiny model: ``n`` lines ``copy: <words>`` + the words."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        lines.append(f"copy: {words}\n{words} Answer: {words}")
    return lines


__all__ = ["COPY_CHAT_TEMPLATE", "COPY_SPECIAL_TOKENS", "WORDS", "build_tiny_model", "copy_corpus"]
