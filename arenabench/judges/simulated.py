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

**Listwise** (``rank_lists``: a ``types.RankRequest`` of k items in one call; issue 41). A
Plackett–Luce ranking over the judge's perceived qualities of the shown items (:class:`ListwiseModel`).
Item m in slot m (0-based) gets ``v_m + b_k · (k − 1 − m)/(k − 1) + s_k · G_m`` and the items are
ranked by it, best first; ``G_m`` is a standard Gumbel draw, so the ranking is exactly a
Plackett–Luce draw with weights ``exp((v_m + slot bias) / s_k)`` (the Gumbel-max construction).
``v_m`` is the view a pair judgment takes of a side: true quality + the surface term + the length
term (no position term: the list's own slot bias replaces it; a gap-dependent position bias has no
pair gap here and is not applied). Per-call noise ``s_k = s_2 · (1 + listwise_noise_growth · (k − 2))``
and a primacy bias ``b_k = b_2 · (1 + listwise_position_growth · (k − 2))``, falling linearly from
slot 1 to nothing at slot k, both grow with k: a longer list is read less carefully, and the first
items anchor it. ``s_2`` (``listwise_noise``) defaults to the pair judge's own comparison noise —
``pair_noise · √3/π`` (Thurstone: the Gumbel difference then has the pair difference's standard
deviation) or ``pair_noise`` (Bradley-Terry: the same logistic difference) — and ``b_2``
(``listwise_position_bias``) to ``position_bias``, so a list of two is judged as a pair is; the
growth rates default to 0.1 (per item beyond two: at k = 8 the noise and the bias are 1.6× a pair's).
**No recorded listwise data calibrates any of this yet**: the shape (Plackett–Luce, linear growth,
a linear primacy ramp) and the defaults are this simulator's assumptions, and conclusions drawn from
listwise constructors on it scale with them. The reply is a ``RankJudgment`` whose scores are the
items ranked below each (k − 1 for the top; tied views, possible only without noise, share the mean
of their positions' points). Noise is keyed like a pair judgment's: on (seed, prompt, the listed
items' content keys in order, sample, slot). No tokens are counted for listwise requests (no
listwise prompt is counted yet).
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
from arenabench.types import (
    JudgeFailure,
    PairJudgment,
    PairRequest,
    PointRequest,
    RankJudgment,
    RankRequest,
    content_hash,
)

NOISE_MODELS = ("thurstone", "bradley_terry")
COT_SLOPE = 55.0  # see the ``cot`` preset
LENGTH_REF = 512.0
_LIST_SALT = 0x7157  # listwise noise keys (``rank_lists``)
# the listwise noise's and primacy bias's default relative growth per item beyond two (an
# assumption: module docstring, "Listwise")
LISTWISE_GROWTH = 0.1


@dataclass(frozen=True)
class ListwiseModel:
    """A simulated judge's listwise call (``rank_lists``): a Plackett–Luce ranking over the judge's
    views of the shown items with per-call Gumbel noise and a primacy bias that both grow with the
    list's length k (``simulated.py``'s module docstring, "Listwise"; the fitted judge uses the
    same model on its own views). ``noise``: the Gumbel scale at k = 2; ``position_bias``: what
    slot 1 gets at k = 2; the growths: relative increase per item beyond 2. Assumptions, not fits:
    no recorded listwise data calibrates them yet."""

    noise: float
    noise_growth: float
    position_bias: float
    position_growth: float

    def __post_init__(self) -> None:
        for name in ("noise", "noise_growth", "position_growth"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ValueError(f"listwise_{name} must be a finite number >= 0; got {v!r}")
        if not (isinstance(self.position_bias, int | float) and math.isfinite(self.position_bias)):
            raise ValueError(f"listwise_position_bias must be finite; got {self.position_bias!r}")

    def scale(self, k: int) -> float:
        """The Gumbel scale of one call over ``k`` items."""
        return self.noise * (1.0 + self.noise_growth * (k - 2))

    def slot_bias(self, k: int) -> np.ndarray:
        """Latent units added to each of ``k`` slots: the slot-1 bias falling linearly to 0."""
        top = self.position_bias * (1.0 + self.position_growth * (k - 2))
        return top * (k - 1 - np.arange(k)) / (k - 1)

    def scores(self, views: np.ndarray, gumbels: np.ndarray) -> np.ndarray:
        """``(n, k)`` views and standard Gumbel draws → each item's count of items ranked below it
        (ties share: ``RankJudgment``'s convention)."""
        k = views.shape[1]
        u = views + self.slot_bias(k)
        s = self.scale(k)
        if s > 0:
            u = u + s * gumbels
        return ranked_below(u)


def ranked_below(u: np.ndarray) -> np.ndarray:
    """Per row of ``u`` (higher = better), each entry's number of entries below it, an equal entry
    counting ½ (two tied at the top of 3: 1.5 each): ``types.RankJudgment.from_order``'s
    convention, vectorized over a batch of draws."""
    below = (u[:, None, :] < u[:, :, None]).sum(axis=2)
    equal = (u[:, None, :] == u[:, :, None]).sum(axis=2) - 1
    return below + 0.5 * equal


def list_keys(requests, k: int, traj_keys: np.ndarray) -> np.ndarray:
    """One uint64 per request: its listed items' content keys ``traj_keys`` (``(n, k)``), in order."""
    h = np.zeros(len(requests), dtype=np.uint64)
    for c in range(k):
        h = _mix(h ^ traj_keys[:, c])
    return h


def by_length(requests) -> dict[int, list[int]]:
    """The indices of listwise ``requests`` by their list's length (a batch may mix lengths)."""
    out: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        out.setdefault(len(r.trajs), []).append(i)
    return out


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
    # listwise (rank_lists; module docstring, "Listwise": assumptions, no listwise data calibrates
    # them). Gumbel scale of one call at k = 2; None: the pair judge's comparison noise
    listwise_noise: float | None = None
    listwise_noise_growth: float = LISTWISE_GROWTH  # relative growth of that scale per item beyond 2
    # latent units added to slot 1 at k = 2 (falling linearly to 0 at slot k); None: position_bias
    listwise_position_bias: float | None = None
    listwise_position_growth: float = LISTWISE_GROWTH  # relative growth of that bias per item beyond 2
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
        self.listwise()  # its checks

    def listwise(self) -> ListwiseModel:
        """The listwise model with its defaults resolved (module docstring, "Listwise")."""
        noise = self.listwise_noise
        if noise is None:
            noise = self.pair_noise * (math.sqrt(3.0) / math.pi if self.noise_model == "thurstone" else 1.0)
        bias = self.position_bias if self.listwise_position_bias is None else self.listwise_position_bias
        return ListwiseModel(noise, self.listwise_noise_growth, bias, self.listwise_position_growth)


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
    """A pairwise, pointwise and listwise judge over hidden qualities (see module docstring).

    ``stats`` counts like an LLM judge's (one ``call`` per non-empty batch), so a stack over a
    simulated judge reads the same counters. Tokens: with ``tokenizer`` set (default
    ``"tiny-bpe"``), each pairwise request adds the prompt tokens an LLM judge with ``rubric``
    would be sent, the share an ideal prefix cache would serve and an assumed verdict-only reply
    (:mod:`arenabench.judges.tokens`); ``tokenizer=None`` counts none. Pointwise and listwise
    requests count no tokens (the counter has no prompt of theirs yet). Neither argument changes a
    verdict."""

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
        self.listwise = self.config.listwise()
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
        out = self._answer(self._score_points, requests)
        if self.tokens is not None:
            self.tokens.charge_points(self.stats, requests, out)
        return out

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        out = self._answer(self._rank_lists, requests)
        if self.tokens is not None:
            self.tokens.charge_ranks(self.stats, requests, out)
        return out

    def _rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment]:
        """Plackett–Luce rankings (module docstring, "Listwise"), a batch of one length at a time."""
        cfg = self.config
        out: list = [None] * len(requests)
        for k, idx in by_length(requests).items():
            reqs = [requests[i] for i in idx]
            n = len(reqs)
            trajs = [t for r in reqs for t in r.trajs]
            side, q, lengths, tkeys = _trajectory_columns(trajs)
            views = q[side] + self._length_term(lengths[side])
            surf = self.surface_term(trajs)
            if surf is not None:  # the task's surface feature, as in a pair judgment
                views = views + surf
            keys = _combine(
                np.full(n * k, cfg.seed ^ _LIST_SALT, dtype=np.uint64),
                np.repeat(_prompt_keys(reqs), k),
                np.repeat(list_keys(reqs, k, tkeys[side].reshape(n, k)), k),
                np.repeat(np.array([r.sample for r in reqs], dtype=np.uint64), k),
                np.tile(np.arange(k, dtype=np.uint64), n),
            )
            gumbels = -nx.log(-nx.log(_uniforms(keys, 1)[:, 0]))
            scores = self.listwise.scores(views.reshape(n, k), gumbels.reshape(n, k))
            for i, row in zip(idx, scores.tolist(), strict=True):
                out[i] = RankJudgment(tuple(row))
        return out

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
