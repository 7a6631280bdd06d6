"""The KV-cached sampler against the full re-forward, and the one-forward update step.

Facts the docs state (trainers/local/policy.py, docs/performance.md): the cached logits equal the
full forward's up to float rounding (exactly on the prompt), greedy decoding is unchanged, sampled
tokens agree except where a draw falls within rounding of a category boundary; and the trainer's
single forward gives exactly the old_logp and entropy the separate no-grad passes gave."""

import torch

from arenabench.trainers.local.policy import TinyLM, response_logits, response_logprobs, sample
from arenabench.trainers.local.step_metrics import logits_entropy, token_entropy


def model(seed=0, vocab=16, L=12):
    torch.manual_seed(seed)
    m = TinyLM(vocab, L, 32, 2, 4)
    for p in m.parameters():  # larger weights than the init: logits far from uniform
        p.data.normal_(0, 0.3)
    return m


@torch.no_grad()
def test_cached_logits_equal_the_full_forward_up_to_rounding():
    m = model()
    seq = torch.randint(0, 16, (64, 4), generator=torch.Generator().manual_seed(1))
    cache = []
    got = m.forward_cached(seq, cache)
    assert torch.equal(got, m(seq))  # the prompt: the same operations on the same shapes
    for _ in range(8):
        nxt = torch.randint(0, 16, (64, 1), generator=torch.Generator().manual_seed(seq.shape[1]))
        seq = torch.cat([seq, nxt], 1)
        got = m.forward_cached(nxt, cache)[:, -1]
        want = m(seq)[:, -1]
        assert torch.allclose(got, want, rtol=0, atol=1e-5), (got - want).abs().max()
    assert cache[0][0].shape == (64, 4, 12, 8)


def test_cached_sampler_draws_the_same_tokens_but_for_rounding():
    m = model(2)
    prompts = torch.randint(0, 16, (512, 4), generator=torch.Generator().manual_seed(3))
    temp = torch.ones(512)
    temp[::8] = 0.0  # greedy rows, as the trainer's anchors
    full = sample(m, prompts, 8, temp, torch.Generator().manual_seed(4))
    cached = sample(m, prompts, 8, temp, torch.Generator().manual_seed(4), kv_cache=True)
    assert full.shape == cached.shape == (512, 8)
    assert torch.equal(full[::8], cached[::8])  # greedy: argmax is robust to 1e-7
    same_rows = (full == cached).all(1).float().mean().item()
    assert same_rows >= 0.99, same_rows  # a flip needs a draw within ~1e-7 of a boundary


def test_one_forward_gives_the_old_no_grad_numbers_exactly():
    m = model(5)
    prompts = torch.randint(0, 16, (64, 4), generator=torch.Generator().manual_seed(6))
    responses = torch.randint(0, 16, (64, 8), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        old_logp = response_logprobs(m, prompts, responses, 1.0)
        old_entropy = token_entropy(m, prompts, responses, 1.0)
    logits = response_logits(m, prompts, responses, 1.0)  # with grad, as the update pass
    logp = torch.gather(logits, 2, responses.unsqueeze(-1)).squeeze(-1)
    assert logp.requires_grad
    assert torch.equal(logp.detach(), old_logp)
    assert logits_entropy(logits.detach()) == old_entropy
