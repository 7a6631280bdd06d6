"""A tiny causal LM (nanoGPT-style, random init, no downloads) and its samplers.

Two samplers draw from the same distribution: :func:`sample` re-runs the whole sequence for every
new token (the original path), ``sample(..., kv_cache=True)`` keeps each layer's keys and values and
feeds only the new token (a KV cache: ~5× less compute for 4 + 8 tokens; the trainer's only
sampler, ``trainers/local/stacked.py``). Their logits differ by float rounding only (≲ 1e-6: a
matmul or softmax over fewer rows sums in another order), so a sampled token can differ where two
tokens' cumulative probabilities straddle the uniform draw; after the first such token a run's
trajectory diverges (same distribution, other draws). ``tests/trainers/local/test_sampler.py``
measures both facts.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Token + position embeddings, ``n_layer`` pre-LN blocks, an output head tied to the token
    embedding (``tie_head=False``: a separate linear head, so raising a token's output logit
    does not also move its input embedding — see docs/reproducibility.md, Reasoning Arena)."""

    def __init__(
        self,
        vocab: int,
        max_len: int,
        d_model: int = 64,
        n_layer: int = 2,
        n_head: int = 4,
        tie_head: bool = True,
    ):
        super().__init__()
        self.vocab, self.max_len = vocab, max_len
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln = nn.LayerNorm(d_model)
        self.register_buffer("causal", torch.triu(torch.full((max_len, max_len), -math.inf), 1))
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.head = None if tie_head else nn.Linear(d_model, vocab, bias=False)
        if self.head is not None:  # created last: a tied model draws exactly the numbers it always did
            nn.init.normal_(self.head.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x, self.causal[:t, :t])
        head = self.tok.weight if self.head is None else self.head.weight
        return self.ln(x) @ head.T

    def forward_cached(self, idx: torch.Tensor, cache: list) -> torch.Tensor:
        """Logits of ``idx`` (the tokens after those already in ``cache``), appending their keys
        and values to ``cache`` (one ``(k, v)`` per layer; start with ``[]``). The same weights
        and operations as :meth:`forward`, written out so attention can reuse past keys."""
        start = cache[0][0].shape[2] if cache else 0
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(start, start + t, device=idx.device))
        for i, b in enumerate(self.blocks):
            a = b.attn
            h = b.ln1(x)
            q, k, v = (
                F.linear(h, a.in_proj_weight, a.in_proj_bias)
                .unflatten(-1, (3, a.num_heads, -1))
                .permute(2, 0, 3, 1, 4)
            )  # 3 × [B, heads, t, head_dim]
            if len(cache) > i:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                cache[i] = (k, v)
            else:
                cache.append((k, v))
            end = start + t
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal[start:end, :end])
            x = x + a.out_proj(o.transpose(1, 2).reshape(x.shape))
            x = x + b.mlp(b.ln2(x))
        return self.ln(x) @ self.tok.weight.T


def response_logits(model, prompts: torch.Tensor, responses: torch.Tensor, temperature: float):
    """log π(· | prompt, y_<t) at every response position at the sampling temperature,
    shape [B, L, vocab] (one forward pass: the trainer reads log-probs and entropy off it).
    Leading axes pass through: a ``StackedLM`` with [S, B, ·] tokens gives [S, B, L, vocab]."""
    seq = torch.cat([prompts, responses], dim=-1)
    logits = model(seq[..., :-1])[..., prompts.shape[-1] - 1 :, :] / temperature
    return F.log_softmax(logits, dim=-1)


def response_logprobs(model: TinyLM, prompts: torch.Tensor, responses: torch.Tensor, temperature: float):
    """log π(y_t | prompt, y_<t) of each response token at the sampling temperature (as verl
    scores rollouts), shape [B, L]."""
    return token_logprobs(response_logits(model, prompts, responses, temperature), responses)


def token_logprobs(logp: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """The [B, L] log-probs of ``responses`` out of :func:`response_logits`'s [B, L, vocab] (and
    [S, B, L] out of [S, B, L, vocab])."""
    return torch.gather(logp, -1, responses.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def sample(
    model: TinyLM,
    prompts: torch.Tensor,
    n_tokens: int,
    temperature: torch.Tensor,
    gen: torch.Generator,
    kv_cache: bool = False,
):
    """Autoregressive sampling; rows with temperature 0 decode greedily (the anchor).
    ``kv_cache``: feed only the new token each step (:meth:`TinyLM.forward_cached`; module doc)."""
    seq = prompts
    greedy = temperature <= 0
    temp = torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    cache: list = []
    nxt = None
    for _ in range(n_tokens):
        if kv_cache:
            logits = model.forward_cached(seq if nxt is None else nxt[:, None], cache)[:, -1] / temp
        else:
            logits = model(seq)[:, -1] / temp
        drawn = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=gen).squeeze(-1)
        nxt = torch.where(greedy, logits.argmax(-1), drawn)
        seq = torch.cat([seq, nxt[:, None]], dim=1)
    return seq[:, prompts.shape[1] :]
