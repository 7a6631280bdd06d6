"""S tiny policies trained as one batch: :class:`StackedLM` holds S :class:`~.policy.TinyLM`\\ s'
weights stacked along a leading seed axis and computes every model's forward in one set of ops.

Why (issue 28): the table2 policy is so small (d = 32, 12 tokens, 64 rows) that a step's torch
time is mostly per-op overhead; S seeds of one arm in one batch pay it once. Each seed keeps its
own weights, optimizer state, random generator, engine and judge, so nothing one seed computes
reads another's numbers: a seed's run is the same whichever seeds share its batch
(``tests/trainers/local/test_stacked.py`` checks it bit for bit).

The function is TinyLM's exactly (the same weights give the same logits up to float rounding: a
batched matmul sums in another order than ``nn.Linear``), written out with batched matmuls. The
sampler draws each seed's tokens as ``torch.multinomial`` does for one sample (an Exp(1) draw per
vocabulary entry from the seed's own generator, ``argmax p / q``), so a seed's random stream does
not depend on the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from arenabench.trainers.local.policy import TinyLM

# per block: TinyLM's parameter names → the stacked names (one tensor [S, ...] each)
_BLOCK = {
    "ln1.weight": "ln1_w",
    "ln1.bias": "ln1_b",
    "attn.in_proj_weight": "qkv_w",
    "attn.in_proj_bias": "qkv_b",
    "attn.out_proj.weight": "out_w",
    "attn.out_proj.bias": "out_b",
    "ln2.weight": "ln2_w",
    "ln2.bias": "ln2_b",
    "mlp.0.weight": "fc1_w",
    "mlp.0.bias": "fc1_b",
    "mlp.2.weight": "fc2_w",
    "mlp.2.bias": "fc2_b",
}
_TOP = {
    "tok.weight": "tok",
    "pos.weight": "pos",
    "ln.weight": "ln_w",
    "ln.bias": "ln_b",
    "head.weight": "head",
}


def _names(n_layer: int, tied: bool) -> dict[str, str]:
    """TinyLM state-dict key → stacked parameter name."""
    out = {k: v for k, v in _TOP.items() if not (tied and k == "head.weight")}
    for i in range(n_layer):
        out |= {f"blocks.{i}.{k}": f"b{i}_{v}" for k, v in _BLOCK.items()}
    return out


class StackedLM(nn.Module):
    """S TinyLMs of the same dimensions (:meth:`from_models`); ``forward`` takes ``[S, B, T]``
    token ids and returns ``[S, B, T, vocab]`` logits."""

    def __init__(self, models: Sequence[TinyLM]):
        super().__init__()
        m0 = models[0]
        self.n_seeds, self.vocab, self.max_len = len(models), m0.vocab, m0.max_len
        self.n_layer, self.n_head = len(m0.blocks), m0.blocks[0].attn.num_heads
        self.d = m0.tok.weight.shape[1]
        self.tied = m0.head is None
        self.names = _names(self.n_layer, self.tied)
        states = [m.state_dict() for m in models]
        for key, name in self.names.items():
            self.register_parameter(
                name, nn.Parameter(torch.stack([s[key].detach() for s in states]).clone())
            )
        self.register_buffer("causal", m0.causal.clone())

    @classmethod
    def from_models(cls, models: Sequence[TinyLM]) -> StackedLM:
        dims = {(m.vocab, m.max_len, m.tok.weight.shape[1], len(m.blocks), m.head is None) for m in models}
        if len(dims) != 1:
            raise ValueError(f"StackedLM needs models of one shape; got {sorted(dims)}")
        return cls(models)

    def model(self, s: int) -> TinyLM:
        """A copy of seed ``s``'s weights as a TinyLM (to save or inspect one seed; the trainer
        itself never needs it)."""
        m = TinyLM(self.vocab, self.max_len, self.d, self.n_layer, self.n_head, self.tied)
        state = {key: getattr(self, name)[s].detach().clone() for key, name in self.names.items()}
        m.load_state_dict(state | {"causal": self.causal.clone()})
        return m

    def p(self, name: str, layer: int | None = None) -> torch.Tensor:
        return getattr(self, name if layer is None else f"b{layer}_{name}")

    # -- the ops, batched over seeds -------------------------------------------------------
    @staticmethod
    def _ln(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """LayerNorm over the last axis with each seed's affine (x: [S, ..., d]; w, b: [S, d])."""
        shape = (w.shape[0],) + (1,) * (x.dim() - 2) + (w.shape[1],)
        return torch.addcmul(b.view(shape), F.layer_norm(x, x.shape[-1:]), w.view(shape))

    @staticmethod
    def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """x @ wᵀ + b per seed (x: [S, ..., in]; w: [S, out, in]; b: [S, out])."""
        s, shape = x.shape[0], x.shape[1:-1]
        flat = x.reshape(s, -1, x.shape[-1])
        y = (
            torch.bmm(flat, w.transpose(1, 2))
            if b is None
            else torch.baddbmm(b[:, None], flat, w.transpose(1, 2))
        )
        return y.view(s, *shape, w.shape[1])

    def _embed(self, idx: torch.Tensor, start: int) -> torch.Tensor:
        s, _, t = idx.shape
        off = (torch.arange(s, device=idx.device) * self.vocab).view(s, 1, 1)
        x = F.embedding(idx + off, self.tok.view(-1, self.d))
        return x + self.pos[:, start : start + t].unsqueeze(1)

    def _block(self, i: int, x: torch.Tensor, start: int, cache: list | None) -> torch.Tensor:
        s, b, t, d = x.shape
        h = self._ln(x, self.p("ln1_w", i), self.p("ln1_b", i))
        qkv = self._linear(h, self.p("qkv_w", i), self.p("qkv_b", i))
        q, k, v = qkv.view(s * b, t, 3, self.n_head, -1).permute(2, 0, 3, 1, 4)  # 3 × [S·B, H, t, hd]
        n, hd, end = s * b * self.n_head, q.shape[-1], start + t
        if cache is None:
            k, v = k.reshape(n, t, hd), v.reshape(n, t, hd)
        else:  # written into preallocated [S·B·H, max_len, hd] buffers: no concatenation per token
            if len(cache) == i:
                cache.append(tuple(torch.empty(n, self.max_len, hd) for _ in range(2)))
            for buf, new in zip(cache[i], (k, v), strict=True):
                buf.view(s * b, self.n_head, self.max_len, hd)[:, :, start:end].copy_(new)
            k, v = cache[i][0][:, :end], cache[i][1][:, :end]
        o = self._attend(q, k, v, self.causal[start:end, :end])
        o = o.transpose(1, 2).reshape(s, b, t, d)
        x = x + self._linear(o, self.p("out_w", i), self.p("out_b", i))
        h = self._ln(x, self.p("ln2_w", i), self.p("ln2_b", i))
        h = F.gelu(self._linear(h, self.p("fc1_w", i), self.p("fc1_b", i)))
        return x + self._linear(h, self.p("fc2_w", i), self.p("fc2_b", i))

    @staticmethod
    def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """softmax(q kᵀ / √hd + mask) v (q: [n, H, t, hd]; k, v: [n·H, tk, hd]) with batched
        matmuls over every (row, head): at the table2 sizes ~35% less CPU than
        ``scaled_dot_product_attention``'s CPU flash kernel, forward and backward (an ad hoc
        measurement during issue 28, docs/performance.md round 3; not a committed benchmark)."""
        n, h, t, hd = q.shape
        tk = k.shape[1]
        a = torch.baddbmm(
            mask.expand(n * h, t, tk), q.reshape(n * h, t, hd), k.transpose(1, 2), alpha=1.0 / math.sqrt(hd)
        )
        return torch.bmm(torch.softmax(a, dim=-1), v).view(n, h, t, hd)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        x = self._ln(x, self.ln_w, self.ln_b)
        return self._linear(x, self.tok if self.tied else self.head, None)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self._embed(idx, 0)
        for i in range(self.n_layer):
            x = self._block(i, x, 0, None)
        return self._head(x)

    def forward_cached(self, idx: torch.Tensor, cache: list, start: int) -> torch.Tensor:
        """Logits of ``idx`` [S, B, t] at positions ``start``… after the ``start`` tokens whose keys
        and values ``cache`` holds (start with ``[]`` and 0)."""
        x = self._embed(idx, start)
        for i in range(self.n_layer):
            x = self._block(i, x, start, cache)
        return self._head(x)


def exp_draws(gens: Sequence[torch.Generator] | torch.Generator, shape: tuple[int, int]) -> torch.Tensor:
    """Exp(1) draws [S, B, V] (one generator per seed) or [B, V] (one generator for all seeds:
    the same draws for each, as S fresh generators seeded alike would give)."""
    if isinstance(gens, torch.Generator):
        return torch.empty(shape).exponential_(generator=gens)
    return torch.stack([torch.empty(shape).exponential_(generator=g) for g in gens])


@torch.no_grad()
def sample(
    model: StackedLM,
    prompts: torch.Tensor,
    n_tokens: int,
    temperature: torch.Tensor,
    gens: Sequence[torch.Generator] | torch.Generator,
) -> torch.Tensor:
    """KV-cached sampling of ``n_tokens`` per row for every seed: prompts [S, B, P] (or [B, P]
    for all seeds), ``temperature`` [B] (0: greedy, the anchor). Each seed's token is
    ``argmax p / q`` with q ~ Exp(1) from its generator: ``torch.multinomial``'s one-sample rule."""
    s = model.n_seeds
    if prompts.dim() == 2:
        prompts = prompts.expand(s, *prompts.shape)
    b = prompts.shape[1]
    greedy = temperature <= 0
    temp = torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    cache: list = []
    nxt, out = None, []
    for k in range(n_tokens):
        step = prompts if nxt is None else nxt[..., None]
        pos = 0 if nxt is None else prompts.shape[-1] + k - 1
        logits = model.forward_cached(step, cache, pos)[:, :, -1] / temp
        q = exp_draws(gens, (b, model.vocab))
        drawn = (F.softmax(logits, dim=-1) / q).argmax(-1)
        nxt = torch.where(greedy, logits.argmax(-1), drawn)
        out.append(nxt)
    return torch.stack(out, dim=-1)


def clip_grad_norm(model: StackedLM, max_norm: float) -> torch.Tensor:
    """Each seed's gradients clipped to ``max_norm`` by their own total L2 norm, with the very
    functions ``torch.nn.utils.clip_grad_norm_`` uses, on each seed's slices (a norm over all
    seeds' rows at once would round differently with S, and make a seed's run depend on its
    batch-mates); returns the S norms."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norms = []
    for s in range(model.n_seeds):
        mine = [g[s] for g in grads]  # views: clipped in place
        norm = torch.nn.utils.get_total_norm(mine)
        # clip_grads_with_norm_'s scaling (it takes parameters, these are gradient views)
        torch._foreach_mul_(mine, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        norms.append(norm)
    return torch.stack(norms)
