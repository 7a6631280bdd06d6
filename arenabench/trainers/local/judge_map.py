"""Where a fitted judge (``kind: ordinal``) sees the trainer's responses: its latent scale mapped
onto the RL start.

A fitted judge lives on its own latent scale ``z``; a response of true quality ``q`` sits at
``z = (q − quality_loc) / quality_scale``. ``arenabench calibrate`` writes the map for the
fidelity study's simulated groups (``arenabench.sim``). The trainer's responses have another
quality distribution, so with ``judge.quality_map: start`` (the default for fitted judges) the
trainer maps **the responses of its RL start onto the responses the real judge was recorded on**:
the step-0 samples (K = N = 8, sample 0 greedy, at the trainer's temperature, a fixed probe seed)
pooled over prompts get the recorded responses' latent mean (0) and spread
(:func:`arenabench.judges.ordinal.response_level_sd` of the YAML's ``provenance.recorded_gap``).
This is the convention ``calibrate`` uses
for the simulated groups, chosen from the judge's statistics and the papers' setting alone (RL
starts from an SFT model whose answers the judge already rates near its ceiling) — not from any
RL result. The probe does not depend on the run's seed, group size or reward, so every arm and
seed of a sweep faces the same judge. ``quality_map: fixed`` keeps the YAML's numbers.

Still assumed (docs/calibration.md): the pooled spread (prompts and samples) is matched, not
the within-group spread; the policy's later improvement moves it up the judge's scale into its
ceiling at the rate the task's quality scale implies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from arenabench.judges.ordinal import recorded_level_sd
from arenabench.trainers.local.policy import sample

QUALITY_MAPS = ("start", "fixed")
PROBE_K = PROBE_N = 8
PROBE_BATCHES = 16
PROBE_SEED = 0


def probe_batches(policy, task, temperature: float, kv_cache: bool = False):
    """The fixed probe's step-0-style batches: (prompt ids, responses) of ``PROBE_K`` prompts ×
    ``PROBE_N`` samples each (sample 0 of a group greedy), ``PROBE_BATCHES`` times, on their own
    seeded generators (the global RNG is left alone)."""
    rng = np.random.default_rng(PROBE_SEED)
    gen = torch.Generator().manual_seed(PROBE_SEED)
    for _ in range(PROBE_BATCHES):
        pid = rng.choice(task.n_prompts, size=PROBE_K, replace=task.n_prompts < PROBE_K)
        ids = np.repeat(pid, PROBE_N)
        temp = torch.full((len(ids),), float(temperature))
        temp[::PROBE_N] = 0.0
        with torch.no_grad():
            resp = sample(policy, torch.as_tensor(task.prompts[ids]), task.response_len, temp, gen, kv_cache)
        yield ids, resp.numpy()


def start_quality(policy, task, temperature: float, kv_cache: bool = False) -> tuple[float, float]:
    """Mean and SD (population) of the true quality of step-0-style samples of ``policy``."""
    q = np.concatenate(
        [task.quality(ids, r) for ids, r in probe_batches(policy, task, temperature, kv_cache)]
    )
    return float(q.mean()), float(q.std())


def map_judge_to_start(
    jcfg: Mapping[str, Any], policy, task, temperature: float, kv_cache: bool = False
) -> dict:
    """``jcfg`` with ``quality_loc``/``quality_scale`` set from the RL start (module doc), and
    ``quality_map`` removed; other judges' configs are returned unchanged (minus the key)."""
    out = dict(jcfg)
    how = out.pop("quality_map", None)
    if out.get("kind") != "ordinal":
        if how not in (None, "start"):
            raise ValueError(f"judge.quality_map applies to fitted judges (kind ordinal) only; got {how!r}")
        return out
    how = how or "start"
    if how not in QUALITY_MAPS:
        raise ValueError(f"judge.quality_map must be one of {list(QUALITY_MAPS)}; got {how!r}")
    if how == "fixed":
        return out
    mean, sd = start_quality(policy, task, temperature, kv_cache)
    if not sd > 0:
        raise ValueError(
            "judge.quality_map=start: the start's samples all have one quality; use quality_map=fixed"
        )
    out["quality_loc"] = round(mean, 6)
    out["quality_scale"] = round(sd / recorded_level_sd(out.get("provenance") or {}), 6)
    return out
