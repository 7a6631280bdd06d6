"""The tokenizer of the tiny local judge model, and its chat template: the simulated judge counts
the tokens a real judge would be sent with them (:mod:`arenabench.judges.tokens`), and the tiny
model of :mod:`arenabench.tiny_model` is built on them, so the two counts agree under vLLM.

A byte-level BPE trained on a few strings (the judge prompts themselves, so prompts stay short in
tokens). ``tokenizers`` is a core dependency, imported inside the builder only.
"""

from __future__ import annotations

from collections.abc import Sequence

#: A minimal chat template: vLLM's ``LLM.chat`` and ``vllm serve`` render messages with it.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]


def render_chat(messages: Sequence[dict[str, str]]) -> str:
    """:data:`CHAT_TEMPLATE` applied with ``add_generation_prompt=True``, without jinja (the core
    install counts the simulated judge's tokens with it; a vLLM test checks it against the
    tokenizer's own ``apply_chat_template``)."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


def _corpus() -> list[str]:
    """Strings the BPE is trained on: judge prompts for every rubric plus verdict JSON."""
    from arenabench.judges.prompts import load_rubric, pair_prompt, rubrics
    from arenabench.types import Trajectory

    a = Trajectory("a", "I reason step by step. Answer: 42", meta={"final_answer": "42"})
    b = Trajectory("b", "Let me think about the plan, then call a tool. Answer: 7")
    out = ['{"score_a": 7, "score_b": 3, "winner": "A"}', '{"score_a": 2, "score_b": 9, "winner": "B"}']
    for name in rubrics():
        rubric = load_rubric(name)
        ref = "42" if rubric.uses_reference else None
        for m in pair_prompt(rubric, "Plan a three-day trip to Kyoto.", a, b, reference=ref):
            out.append(m["content"])
    return out * 4


def build_tiny_tokenizer(
    *,
    vocab_size: int = 1024,
    corpus: Sequence[str] | None = None,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
):
    """The byte-level BPE (a ``tokenizers.Tokenizer``) of the tiny model
    (:func:`arenabench.tiny_model.build_tiny_model`), trained on ``corpus`` (default: the judge
    prompts). Deterministic for given arguments: the simulated judge's token counts
    (:mod:`arenabench.judges.tokens`) use the default one, so they equal the tiny model's own
    counts under vLLM."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    special_tokens = list(special_tokens)
    tok = Tokenizer(models.BPE(unk_token="<unk>" if "<unk>" in special_tokens else None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus() if corpus is None else list(corpus), trainer=trainer)
    return tok


__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_tokenizer", "render_chat"]
