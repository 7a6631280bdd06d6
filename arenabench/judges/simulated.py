"""Simulated judges over a hidden latent quality ``traj.meta["quality"]`` (logit scale).

Model (all noise is a deterministic function of the request's content and the judge seed,
so re-sending a request — a retry, a resumed sweep, a different batching — gives the same
answer, and a new ``sample`` index gives a fresh independent draw):

* **pairwise**: each side gets an effective quality ``q + e + biases`` and a score
  ``10·sigmoid(q_eff)`` on 0–10. With ``noise_model="thurstone"`` the per-side noise is
  Normal(0, σ/√2), so ``P(A beats B) = Φ(Δq/σ)``; with ``"bradley_terry"`` it is
  Gumbel(0, σ), whose difference is Logistic(0, σ), so ``P(A beats B) = sigmoid(Δq/σ)``.
  Position bias adds to the first slot; length bias adds ``length_bias·log(len/512)``.
  With ``position_gap_scale = s`` the position bias depends on the true quality gap:
  ``position_bias · exp(−|q_A − q_B| / s)`` (see "Gap-dependent position bias" below).
  The judge also reports ``P(A better) = sigmoid(prob_slope·(q_eff,A − q_eff,B))`` (its
  "probability of A" token); a large slope models chain-of-thought saturation.
  The comparison keeps its resolution at any quality level: a comparative judge has a
  reference point.
* **pointwise**: ``sigmoid(q + length term) + Normal(0, point_noise)`` clipped to [0, 1].
  The sigmoid saturates near the top, so as a policy improves, true differences shrink
  below the fixed noise: discriminative collapse.

With no noise and no bias every score is strictly increasing in the side's own quality
and independent of the opponent, so a perfect tournament recovers the exact order.

**Integer score grid** (``score_grid = G``, the ``integer`` preset: G = 10). Real rubric judges
answer on an integer scale — ArenaRL's judge gives each side 0–10 and the two orders are summed —
so many comparisons tie. With a grid, each side's pairwise score is rounded to the nearest of
the G + 1 levels ``0, 10/G, …, 10`` (G = 10: the integers 0–10), and the pointwise score to the
nearest of ``0, 1/G, …, 1`` (a 0–10 rubric score divided by 10), both *after* the noise: the
judge forms a noisy impression, then reports it on its rubric. The probability ``P(A better)``
is left continuous (a logprob read off the verdict token is not on the rubric's grid). Equal
grid scores are a tie (``MatchResult.winner`` is None); :func:`arenabench.diagnostics.tie_rate`
measures how often that happens. ``score_grid = None`` (every other preset) is the continuous
judge, bit-identical to the judge before grids existed.

**Gap-dependent position bias** (``position_gap_scale = s``, the ``position_gap`` preset). Real
judges are most position-biased when the two answers are close: position consistency rises with
the quality gap (Shi et al., arXiv 2406.07791) — and close answers are the regime of
discriminative collapse. The model: slot A gets ``b(Δ) = b0 · exp(−|Δ| / s)`` latent units, with
``Δ = q_A − q_B`` the *true* quality gap (before noise and length terms) and ``b0`` =
``position_bias``. At Δ = 0 slot A wins with probability Φ(b0/σ) (Thurstone, no length
difference); the bias halves every ``s·ln 2`` of gap. ``position_gap_scale = None`` (every other
preset) is the constant bias, bit-identical to before. The shape (exponential), the choice of the
true gap as its argument and the preset's numbers are this simulator's assumptions, motivated by
the cited direction of the effect, not fitted to any judge: conclusions drawn with it scale with
``b0`` and ``s`` (``results/order/`` reports a sweep over ``b0``).

**Surface feature** (``surface_beta = β``, issue 39; 0.0 in every preset). A task may write a
*surface feature* of each response into ``traj.meta["surface"]`` (a float in the task's stated
standardized units; absent = 0.0): something a policy can change that the judge rewards and the
true quality does not (``task=hackable``: the count of filler tokens, docs/training.md). The judge's
view of the response gains ``β · meta["surface"]`` latent units, exactly, in both formats: it is
added to the side's true quality ``q`` before the noise, the position and length terms and the
sigmoid, so the judge answers as it would for a response of quality ``q + β·surface`` with the same
text (the same noise draws) — except that a gap-dependent position bias still reads the *true*
gap. It differs from ``length_bias`` in what it reads and who defines it:
``length_bias`` is ``length_bias · log(traj.length / 512)`` on the trajectory's length — every preset
carries 0.05 of it, and on the toy tasks every response has the same length (``response_len``), so
it moves all of a group's views alike and no policy can exploit it — while ``surface_beta`` reads
whatever feature the task defines, on the task's scale, from the trajectory's ``meta`` (never from
its text), and is off unless asked for. ``surface_beta = 0`` skips the term: every preset's answers
are bit-identical to the judge before it existed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from arenabench import numerics as nx
from arenabench.judges.accounting import JudgeAccounting
from arenabench.judges.tokens import prompt_tokens
from arenabench.registry import check_types, unknown_message
from arenabench.types import JudgeFailure, PairJudgment, PairRequest, PointRequest, content_hash

NOISE_MODELS = ("thurstone", "bradley_terry")
COT_SLOPE = 55.0  # see the ``cot`` preset
LENGTH_REF = 512.0


@dataclass(frozen=True)
class SimulatedJudgeConfig:
    pair_noise: float = 0.15  # σ of the comparison (Thurstone std of Δ; BT logistic scale)
    noise_model: str = "thurstone"
    position_bias: float = 0.0  # latent units added to the first slot (b0 when gap-dependent)
    # None: a constant position bias. s > 0: position_bias · exp(−|q_A − q_B| / s) (module doc)
    position_gap_scale: float | None = None
    length_bias: float = 0.0  # latent units per unit of log(length / 512)
    point_noise: float = 0.02  # std of pointwise score noise on the 0–1 scale
    # P(A better) = sigmoid(prob_slope · judged latent difference). 1.7/σ ≈ 11 is what a
    # calibrated Thurstone judge would say; chain-of-thought judges commit and saturate.
    prob_slope: float = 11.0
    # None: continuous scores. An int G >= 1: pairwise scores rounded to the G + 1 levels
    # 0, 10/G, ..., 10 and pointwise scores to 0, 1/G, ..., 1 (see the module docstring).
    score_grid: int | None = None
    # latent units per unit of the task's surface feature meta["surface"] (module docstring)
    surface_beta: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.noise_model not in NOISE_MODELS:
            raise ValueError(
                f"noise_model must be one of {', '.join(NOISE_MODELS)}; got {self.noise_model!r}"
            )
        for name in ("pair_noise", "point_noise"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
        if not (math.isfinite(self.prob_slope) and self.prob_slope >= 0):
            raise ValueError(f"prob_slope must be a finite number >= 0; got {self.prob_slope!r}")
        for name in ("position_bias", "length_bias", "surface_beta"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite; got {getattr(self, name)!r}")
        s = self.position_gap_scale
        if s is not None and not (isinstance(s, int | float) and math.isfinite(s) and s > 0):
            raise ValueError(
                f"position_gap_scale must be None (constant bias) or a finite number > 0; got {s!r}"
            )
        g = self.score_grid
        if g is not None and (isinstance(g, bool) or not isinstance(g, int) or g < 1):
            raise ValueError(f"score_grid must be None (continuous) or an integer >= 1; got {g!r}")


# Named presets. ``calibrated`` is tuned so that, on the fidelity study's default groups
# (quality ~ 1.7 ± 0.2 on the logit scale, pointwise scores ≈ 0.85), the in-group std of
# pointwise scores is ≈ 0.03 and the re-judging noise std is 0.02 — the seed figures of
# ArenaRL Fig. 1(a). Pairwise noise and the biases are this simulator's assumptions.
PRESETS: dict[str, dict] = {
    "calibrated": dict(
        pair_noise=0.15, noise_model="thurstone", position_bias=0.05, length_bias=0.05, point_noise=0.02
    ),
    "noiseless": dict(
        pair_noise=0.0, noise_model="thurstone", position_bias=0.0, length_bias=0.0, point_noise=0.0
    ),
    "bradley_terry": dict(
        pair_noise=0.1, noise_model="bradley_terry", position_bias=0.05, length_bias=0.05, point_noise=0.02
    ),
    # ``calibrated`` with a chain-of-thought judge's saturated P(A): prob_slope is tuned so
    # that, candidates vs the greedy reference on the default groups, ≈ 88% of probabilities
    # fall in [0, 0.1] ∪ [0.9, 1] (RRC measured 88.3%); verdicts and scores are unchanged.
    "cot": dict(
        pair_noise=0.15,
        noise_model="thurstone",
        position_bias=0.05,
        length_bias=0.05,
        point_noise=0.02,
        prob_slope=COT_SLOPE,
    ),
    # ``calibrated`` reporting on a rubric's integer grid: 0–10 per side in a comparison, a
    # 0–10 score / 10 pointwise (ArenaRL's judges). Ties are common; see ``tie_rate``.
    "integer": dict(
        pair_noise=0.15,
        noise_model="thurstone",
        position_bias=0.05,
        length_bias=0.05,
        point_noise=0.02,
        score_grid=10,
    ),
    # ``calibrated`` with a position bias that grows as the quality gap narrows (module doc):
    # b0 = 0.1, s = 0.15. s = the comparison noise σ: the bias fades over the gaps at which the
    # judge starts to tell the pair apart (at |Δ| = σ one order picks the better side 84% of the
    # time). b0 = 0.1: at zero gap slot A wins 75% (Φ(0.1/0.15)), above the 63% first-shown pick
    # rate 27 judges averaged on near-identical story pairs (lechmazur/position_bias, 2026) and
    # below the GPT-4-like end: an overall position consistency of 0.61 on our groups, near GPT-4's
    # 65% on swapped MT-Bench pairs (Zheng et al., arXiv 2306.05685), takes b0 ≈ 0.3 — the
    # ends of the sweep in results/order/. Chosen before any order-policy result was run.
    "position_gap": dict(
        pair_noise=0.15,
        noise_model="thurstone",
        position_bias=0.1,
        position_gap_scale=0.15,
        length_bias=0.05,
        point_noise=0.02,
    ),
}


# One line per preset for ``arenabench list`` (what it is for; its values are printed beside).
PRESET_NOTES: dict[str, str] = {
    "calibrated": "the default: ArenaRL Fig. 1(a)'s score spread and re-judging noise (comment above)",
    "noiseless": "no noise, no bias: verdicts and scores follow true quality exactly (a control)",
    "bradley_terry": "calibrated with logistic (Bradley-Terry) comparison noise instead of Thurstone",
    "cot": "calibrated with a chain-of-thought judge's saturated P(A) (RRC: 88% in [0, 0.1] or [0.9, 1])",
    "integer": "calibrated on a rubric's integer grid (0-10 per side, 0-10/10 pointwise): frequent ties",
    "position_gap": "calibrated with a position bias that grows as the quality gap narrows",
}


def preset_config(preset: str = "calibrated", **overrides) -> SimulatedJudgeConfig:
    if preset not in PRESETS:
        raise ValueError(unknown_message("judge preset", preset, sorted(PRESETS)))
    valid = {f.name for f in fields(SimulatedJudgeConfig)}
    bad = sorted(set(overrides) - valid)
    if bad:
        raise TypeError(f"unknown judge parameter(s) {', '.join(bad)}; valid: {', '.join(sorted(valid))}")
    check_types(SimulatedJudgeConfig, overrides, f"judge preset {preset!r}")
    return replace(SimulatedJudgeConfig(**PRESETS[preset]), **overrides)


# --- keyed randomness: a counter-based generator (splitmix64) over request keys ------------

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x + _GOLD
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _uniforms(keys: np.ndarray, k: int) -> np.ndarray:
    """(len(keys), k) uniforms in (0, 1), a pure function of each key."""
    out = np.empty((len(keys), k))
    for c in range(k):
        bits = _mix(keys ^ _mix(np.full(1, c, dtype=keys.dtype)))  # the column's constant, mixed once
        out[:, c] = ((bits >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
    return out


def _combine(*cols: np.ndarray) -> np.ndarray:
    h = np.zeros(len(cols[0]), dtype=np.uint64)
    for c in cols:
        h = _mix(h ^ c.astype(np.uint64))
    return h


def _normals(keys: np.ndarray, k: int) -> np.ndarray:
    u = _uniforms(keys, 2 * k)
    r = np.sqrt(-2.0 * nx.log(u[:, :k]))
    return r * nx.cos(2.0 * np.pi * u[:, k:])


def _prompt_keys(requests) -> np.ndarray:
    """Content hash of each request's prompt, hashed once per distinct prompt in the batch."""
    memo = {p: content_hash(p) for p in {r.prompt for r in requests}}
    return np.array([memo[r.prompt] for r in requests], dtype=np.uint64)


def _on_grid(x: np.ndarray, grid: int, top: float) -> np.ndarray:
    """``x`` in [0, top] rounded to the nearest of the ``grid + 1`` levels 0, top/grid, …, top."""
    return np.rint(np.clip(x, 0.0, top) * (grid / top)) * (top / grid)


def _trajectory_columns(trajs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(index, quality, length, key)``: per distinct trajectory object (by identity, as each is
    alive in the batch) its true quality, length (float) and content key, and each of ``trajs``'s
    index into them."""
    where: dict[int, int] = {}
    distinct = []
    index = []
    for t in trajs:
        k = where.get(id(t))
        if k is None:
            k = where[id(t)] = len(distinct)
            distinct.append(t)
        index.append(k)
    q = np.array([true_quality(t) for t in distinct])
    lengths = np.array([t.length for t in distinct], dtype=float)
    keys = np.array([t.key for t in distinct], dtype=np.uint64)
    return np.array(index, dtype=np.intp), q, lengths, keys


def true_quality(traj) -> float:
    try:
        return float(traj.meta["quality"])
    except KeyError:
        raise KeyError(
            f"trajectory {traj.id!r} has no meta['quality']: simulated judges need the hidden quality"
        ) from None


def surface_feature(traj) -> float:
    """The trajectory's surface feature ``meta["surface"]`` (0.0 when the task sets none); a
    non-finite value is an error (it would turn every verdict it touches into NaN)."""
    v = traj.meta.get("surface", 0.0)
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        raise ValueError(f"trajectory {traj.id!r} has meta['surface'] = {v!r}: need a finite number")
    return x


class SimulatedJudge(JudgeAccounting):
    """Both a pairwise and a pointwise judge over hidden qualities (see module docstring).

    ``stats`` counts like an LLM judge's (one ``call`` per non-empty batch), so a stack over a
    simulated judge reads the same counters. Tokens: with ``tokenizer`` set (default
    ``"tiny-bpe"``), each pairwise request adds the prompt tokens an LLM judge with ``rubric``
    would be sent, the share an ideal prefix cache would serve and an assumed verdict-only reply
    (:mod:`arenabench.judges.tokens`); ``tokenizer=None`` counts none. Pointwise requests count
    no tokens: the LLM backends have no pointwise prompt. Neither argument changes a verdict."""

    rejudge_share = 1.0  # a new ``sample`` index is a fresh independent draw (module docstring)

    def __init__(
        self,
        preset: str = "calibrated",
        tokenizer: str | None = "tiny-bpe",
        rubric: str = "open_writing",
        **overrides,
    ):
        self.preset = preset
        self.config = preset_config(preset, **overrides)
        self.tokens = prompt_tokens(tokenizer, rubric)
        self.reset_stats()

    def __repr__(self) -> str:
        return f"SimulatedJudge(preset={self.preset!r}, {asdict(self.config)})"

    def _length_term(self, lengths: np.ndarray) -> np.ndarray:
        if self.config.length_bias == 0:
            return np.zeros(len(lengths))
        return self.config.length_bias * nx.log(np.maximum(lengths, 1) / LENGTH_REF)

    def surface_term(self, trajs) -> np.ndarray | None:
        """``surface_beta · meta["surface"]`` per trajectory (latent units), or None when
        ``surface_beta == 0`` (the term is skipped, so the answers stay bit-identical)."""
        beta = self.config.surface_beta
        if beta == 0:
            return None
        return beta * np.array([surface_feature(t) for t in trajs], dtype=float)

    @property
    def surface_weight(self) -> float:
        """What one unit of ``meta["surface"]`` adds to this judge's view, in true-quality units
        (the simulator's latent scale is the quality scale): ``surface_beta``."""
        return float(self.config.surface_beta)

    def _answer(self, fn, requests):
        """One counted, timed "call" per non-empty batch, as an LLM backend counts a generate."""
        if not requests:
            return []
        self.stats["requests"] += len(requests)
        return self._timed_call(fn, requests)

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        out = self._answer(self._judge_pairs, requests)
        if self.tokens is not None:
            self.tokens.charge(self.stats, requests, out)
        return out

    def _judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment]:
        cfg = self.config
        n = len(requests)
        # a wave asks about few trajectories many times: read each one's columns once
        side, q, lengths, tkeys = _trajectory_columns([r.a for r in requests] + [r.b for r in requests])
        qa, qb = q[side[:n]], q[side[n:]]
        la, lb = lengths[side[:n]], lengths[side[n:]]
        ea = np.zeros(n)
        eb = np.zeros(n)
        if cfg.pair_noise > 0:
            keys = _combine(
                np.full(n, cfg.seed, dtype=np.uint64),
                _prompt_keys(requests),
                tkeys[side[:n]],
                tkeys[side[n:]],
                np.array([r.sample for r in requests], dtype=np.uint64),
            )
            if cfg.noise_model == "thurstone":
                z = _normals(keys, 2) * (cfg.pair_noise / math.sqrt(2.0))
            else:  # Gumbel per side ⇒ logistic difference ⇒ Bradley-Terry outcomes
                z = -nx.log(-nx.log(_uniforms(keys, 2))) * cfg.pair_noise
            ea, eb = z[:, 0], z[:, 1]
        if cfg.position_gap_scale is None:
            bias = cfg.position_bias
        else:  # larger the closer the true qualities (module doc)
            bias = cfg.position_bias * nx.exp(-np.abs(qa - qb) / cfg.position_gap_scale)
        va, vb = qa, qb  # the judge's view before noise and biases: true quality ...
        surf = self.surface_term([r.a for r in requests] + [r.b for r in requests])
        if surf is not None:  # ... plus the task's surface feature (module docstring)
            va, vb = qa + surf[:n], qb + surf[n:]
        sa = va + ea + bias + self._length_term(la)
        sb = vb + eb + self._length_term(lb)
        pa = 1.0 / (1.0 + nx.exp(-cfg.prob_slope * (sa - sb)))
        sa, sb = 10.0 / (1.0 + nx.exp(-sa)), 10.0 / (1.0 + nx.exp(-sb))
        if cfg.score_grid is not None:
            sa, sb = _on_grid(sa, cfg.score_grid, 10.0), _on_grid(sb, cfg.score_grid, 10.0)
        return [PairJudgment(a, b, p) for a, b, p in zip(sa.tolist(), sb.tolist(), pa.tolist(), strict=True)]

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        return self._answer(self._score_points, requests)

    def _score_points(self, requests: Sequence[PointRequest]) -> list[float]:
        cfg = self.config
        q = np.array([true_quality(r.traj) for r in requests])
        lens = np.array([r.traj.length for r in requests], dtype=float)
        surf = self.surface_term([r.traj for r in requests])
        if surf is not None:  # the task's surface feature (module docstring)
            q = q + surf
        s = 1.0 / (1.0 + nx.exp(-(q + self._length_term(lens))))
        if cfg.point_noise > 0:
            keys = _combine(
                np.full(len(requests), cfg.seed ^ 0x5EED, dtype=np.uint64),
                _prompt_keys(requests),
                np.array([r.traj.key for r in requests], dtype=np.uint64),
                np.array([r.sample for r in requests], dtype=np.uint64),
            )
            s = np.clip(s + cfg.point_noise * _normals(keys, 1)[:, 0], 0.0, 1.0)
        if cfg.score_grid is not None:
            s = _on_grid(s, cfg.score_grid, 1.0)
        return [float(x) for x in s]
