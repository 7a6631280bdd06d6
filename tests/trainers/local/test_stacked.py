"""Stacked seeds (trainers/local/stacked.py, trainer.train_seeds, the launcher's batches): S
TinyLMs as one batch compute what each computes alone, and a seed's run does not depend on which
seeds share its batch — bit for bit, the property that lets the launcher batch freely."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from arenabench.trainers.local import stacked
from arenabench.trainers.local.policy import TinyLM, response_logits, sample
from arenabench.trainers.local.stacked import StackedLM
from arenabench.trainers.local.task import TASKS
from arenabench.trainers.local.trainer import train, train_seeds

TIMING = ("wall_time", "judge_latency_p50", "judge_latency_p90")  # clocks, not numerics
DIMS = (16, 12, 32, 2, 4)  # the table2 policy: vocab, max_len, d_model, layers, heads


def models(n, tie_head=True):
    torch.manual_seed(0)
    return [TinyLM(*DIMS, tie_head=tie_head) for _ in range(n)]


@pytest.mark.parametrize("tie_head", [True, False])
def test_stacked_logits_are_each_models_own_up_to_rounding(tie_head):
    ms = models(3, tie_head)
    st = StackedLM.from_models(ms)
    idx = torch.randint(0, 16, (3, 5, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = st(idx)
        want = torch.stack([m(idx[s]) for s, m in enumerate(ms)])
        cache: list = []
        cached = torch.cat([st.forward_cached(idx[:, :, :4], cache, 0)] + [
            st.forward_cached(idx[:, :, t : t + 1], cache, t) for t in range(4, 11)
        ], dim=2)  # fmt: skip
    assert got.shape == (3, 5, 11, 16)
    # float32 rounding only: batched matmuls and the written-out attention sum in another order
    assert torch.allclose(got, want, atol=1e-5, rtol=0)
    assert torch.allclose(cached, want, atol=1e-5, rtol=0)
    assert not torch.equal(want[0], want[1])  # three different models


def test_model_round_trips_the_weights_exactly():
    ms = models(2, tie_head=False)
    st = StackedLM.from_models(ms)
    for s, m in enumerate(ms):
        back = st.model(s).state_dict()
        assert back.keys() == m.state_dict().keys()
        assert all(torch.equal(back[k], v) for k, v in m.state_dict().items())


def test_models_of_different_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        StackedLM.from_models([TinyLM(16, 12, 32), TinyLM(16, 12, 16)])


def test_the_sampler_draws_multinomials_tokens_from_each_seeds_generator():
    """stacked.sample's rule (Exp(1) draws q from the seed's generator, argmax p / q) is
    torch.multinomial's one-sample rule: same generator, same logits → same tokens and the
    generator left in the same state (only logits' rounding could split them: none here)."""
    ms = models(2)
    st = StackedLM.from_models(ms)
    task = TASKS.get("preference")
    prompts = torch.as_tensor(task.prompts[np.arange(32) % task.n_prompts])
    temp = torch.full((32,), 1.0)
    temp[::8] = 0.0  # greedy anchors
    gens = [torch.Generator().manual_seed(s) for s in (5, 6)]
    got = stacked.sample(st, prompts, 8, temp, gens)
    for s, m in enumerate(ms):
        own = torch.Generator().manual_seed(5 + s)
        want = sample(m, prompts, 8, temp, own, kv_cache=True)
        assert torch.equal(got[s], want)
        assert torch.equal(gens[s].get_state(), own.get_state())


def test_one_generator_gives_every_seed_the_same_draws():
    st = StackedLM.from_models(models(1) * 2)  # two copies of one model
    temp = torch.full((16,), 1.0)
    prompts = torch.zeros((16, 4), dtype=torch.long)
    out = stacked.sample(st, prompts, 8, temp, torch.Generator().manual_seed(3))
    assert torch.equal(out[0], out[1])


def test_each_seed_is_clipped_by_its_own_gradient_norm():
    ms = models(2)
    st = StackedLM.from_models(ms)
    idx = torch.randint(0, 16, (2, 4, 11), generator=torch.Generator().manual_seed(2))
    scale = torch.tensor([1.0, 1e-4]).view(2, 1, 1, 1)  # seed 1's gradient far below the clip
    (st(idx) * scale).square().sum().backward()
    norms = stacked.clip_grad_norm(st, 1.0)
    for s, m in enumerate(ms):
        (m(idx[s]) * scale[s]).square().sum().backward()
        want = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        assert float(norms[s]) == pytest.approx(float(want), rel=1e-5)
        for key, name in st.names.items():
            g_single = dict(m.named_parameters())[key].grad
            assert torch.allclose(getattr(st, name).grad[s], g_single, atol=1e-6, rtol=1e-4), key
    assert float(norms[0]) > 1.0 > float(norms[1])


def _cfg(seed, reward="seeded_single_elim", steps=4):
    return {
        "seed": seed,
        "steps": steps,
        "eval_every": 2,
        "reward": {"name": reward},
        "init": {"kind": "random"},
        "judge": {"kind": "simulated", "preset": "calibrated", "seed": 0, "tokenizer": None},
    }


class _Log:
    def __init__(self):
        self.rows = []

    def log_metrics(self, metrics, step):
        self.rows.append((step, {k: v for k, v in metrics.items() if k not in TIMING}))


@pytest.mark.parametrize("reward", ["seeded_single_elim", "pointwise"])
def test_a_seeds_run_is_the_same_alone_and_in_any_batch(reward):
    """Seed 3 alone, first of a batch of four and last of another: the same metrics at every
    step, bit for bit (float equality), evals included."""
    alone = _Log()
    train(_cfg(3, reward), tracker=alone, progress=False)
    logs = [_Log() for _ in range(4)]
    finals = train_seeds([_cfg(s, reward) for s in (3, 0, 1, 2)], logs, progress=False)
    other = [_Log() for _ in range(2)]
    train_seeds([_cfg(s, reward) for s in (7, 3)], other, progress=False)
    assert alone.rows == logs[0].rows == other[1].rows
    assert len(alone.rows) == 4 and "eval_sampled_quality" in alone.rows[-1][1]
    assert logs[1].rows != logs[0].rows  # other seeds: other prompts and draws
    assert finals[0]["quality_mean"] == alone.rows[-1][1]["quality_mean"]


def test_what_a_seed_interpolates_may_differ_within_a_batch():
    """A sweep's seeds can carry seed-dependent settings (table2_imperfect: ``init.seed: ${seed}``);
    each run builds its own init, judge and constructor, so only the loop's shape, the task and the
    model must be shared — and the run is still the one it is alone."""

    def cfg(seed):
        c = _cfg(seed)
        c["judge"] = dict(c["judge"], seed=100 + seed)
        return c

    alone = _Log()
    train(cfg(3), tracker=alone, progress=False)
    logs = [_Log(), _Log()]
    train_seeds([cfg(0), cfg(3)], logs, progress=False)
    assert logs[1].rows == alone.rows
    other = _cfg(1) | {"task": {"name": "preference", "n_prompts": 16}}
    with pytest.raises(ValueError, match="they differ in task"):
        train_seeds([_cfg(0), other], progress=False)


def test_a_batch_must_differ_only_in_seed():
    with pytest.raises(ValueError, match="must share steps, .*; they differ in steps"):
        train_seeds([_cfg(0), _cfg(1, steps=5)], progress=False)
    with pytest.raises(ValueError, match="distinct"):
        train_seeds([_cfg(0), _cfg(0)], progress=False)


def test_the_retired_kv_cache_option_is_an_unknown_key():
    """``trainer.kv_cache`` (the full re-forward sampler's switch, refused since issue 28) is gone:
    the local trainer samples with a KV cache only, and the key is refused like any unknown one."""
    cfg = _cfg(0) | {"trainer": {"kv_cache": True}}
    with pytest.raises(ValueError, match="kv_cache"):
        train(cfg, progress=False)


def test_the_response_logits_match_the_single_models():
    ms = models(2)
    st = StackedLM.from_models(ms)
    prompts = torch.randint(0, 16, (2, 6, 4), generator=torch.Generator().manual_seed(4))
    resp = torch.randint(0, 16, (2, 6, 8), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got = response_logits(st, prompts, resp, 0.7)  # the same function, leading seed axis
        want = torch.stack([response_logits(m, prompts[s], resp[s], 0.7) for s, m in enumerate(ms)])
    assert torch.allclose(got, want, atol=1e-5, rtol=0)
