"""A simulated judge that can express a real one: ``kind: ordinal`` (fitted by ``arenabench calibrate``).

The existing simulated presets (``simulated.py``) are untouched; this is a second model whose
parameters are *measured* on recorded judgments (``arenabench.calibration``,
``docs/calibration.md``). Everything is on the judge's latent scale ``z``; a trajectory of
simulator quality ``q`` (``meta["quality"]``) sits at ``z = (q − quality_loc) / quality_scale``.

* **pointwise** (ordered probit): impression ``u = z + e``, ``e ~ N(0, point_noise²)``; the
  reported score is the grid level ``lo + #{cutpoints ≤ u}`` on the judge's integer grid
  ``lo..hi``, returned on 0–1 as ``(level − lo) / (hi − lo)``. The cutpoints are the judge's
  own monotone map from quality to its grid: where they crowd, scores pile up (a ceiling).
* **pairwise** (per shown order): ``d = z_A − z_B + b(Δ) + e``, ``e ~ N(0, pair_noise²)``;
  slot A wins if ``d > tie_margin``, B if ``d < −tie_margin``, else a tie (``tie_margin = 0``:
  forced choice). The winner's score is 1, the loser's 0 (a tie ½ each); ``prob_a = Φ(d /
  pair_noise)``. Position bias ``b(Δ) = position_bias`` or, with ``position_gap_scale = s``,
  ``position_bias · exp(−|Δ| / s)`` with ``Δ = z_A − z_B``.
* **re-judging**: a share ``rejudge_share`` of each noise variance is drawn afresh per
  ``sample``; the rest is fixed per (prompt, response[s], shown order), as a temperature-0
  judge answers the same question the same way (``rejudge_share = 0``: votes repeat).

* **persistent and surface error** (issue 39; both 0 by default, then the judge is the one
  above bit for bit): the judge's *view* of a response is
  ``v = z + persistent_sd · ε_r + surface_beta · s_r``, and both formats read ``v`` where the
  above reads ``z``. ``ε_r ~ N(0, 1)`` is drawn once per response, keyed on (seed, prompt,
  the trajectory's content key): the same in every comparison, in both shown orders and in
  both formats; it never averages away. ``s_r`` is the response's surface feature
  ``surface_feature`` (default ``"length"``) in standardized units, read from
  ``traj.meta["surface"]`` (a float, or a mapping from feature name to float; absent: 0). The
  fitted presets' ``s_r`` for length is ``(log(characters) − mean) / sd`` with the mean and SD
  of the recorded responses in ``provenance.surface``. *Persistent share* (as the fits report
  it) ``s = persistent_sd² / (persistent_sd² + pair_noise²)``: the persistent variance per
  response against ``pair_noise²``, which is the variance of a comparison's *difference*. A
  comparison's own error, ``e + persistent_sd · (ε_A − ε_B)``, has variance
  ``pair_noise² + 2 persistent_sd²``, of which the part that repeats is ``r = 2s / (1 + s)``
  (the share the phase diagram, ``experiments/persistence_study.py``, moves).

* **listwise** (``rank_lists``; issue 41): the simulated judge's Plackett–Luce model
  (:class:`arenabench.judges.simulated.ListwiseModel`, ``simulated.py``'s module docstring,
  "Listwise") on this judge's views ``v``: item m in slot m gets ``v_m + b_k·(k − 1 − m)/(k − 1)
  + s_k·G_m``, ranked by it. ``G_m`` is standard Gumbel through a Gaussian copula,
  ``G = −log(−log Φ(ε))`` with ``ε = √(1 − r)·ε_fixed + √r·ε_sample`` and ``r = rejudge_share``,
  so a re-asked list is re-judged in the share ``r`` as a pair is (each call is an exact
  Plackett–Luce draw). ``s_2`` (``listwise_noise``) defaults to ``pair_noise·√3/π`` (the Gumbel
  difference then has the pair difference's SD) and ``b_2`` (``listwise_position_bias``) to
  ``position_bias``; both grow by ``listwise_*_growth`` (default 0.1) per item beyond two. **Not
  fitted**: the recorded judgments the presets were fitted on are pairwise and pointwise; no
  listwise data calibrates any listwise parameter yet. No tokens are counted for listwise requests.

Noise is a pure function of (seed, prompt, texts, order, sample): a retry or a resumed run gets
the same answer. ``provenance`` carries where the numbers came from (source files, command, the
recorded pairs' latent-gap distribution, the fit) and does not change any answer.

Tokens: as the simulated judge, it counts the prompt an LLM judge with ``rubric`` would be sent
under ``tokenizer`` (default ``tiny-bpe``; ``None`` counts none), the ideal prefix cache's share,
and an assumed verdict-only reply (:mod:`arenabench.judges.tokens`, ``docs/tokens.md``) -- here
with the fitted verdict's scores (1 and 0; a tie ½ each, written 0 and 0). Never an answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import ndtr

from arenabench import numerics as nx
from arenabench.judges.accounting import JudgeAccounting
from arenabench.judges.simulated import (
    LISTWISE_GROWTH,
    ListwiseModel,
    _combine,
    _normals,
    _prompt_keys,
    by_length,
    list_keys,
    true_quality,
)
from arenabench.judges.tokens import prompt_tokens
from arenabench.types import PairJudgment, PairRequest, PointRequest, RankJudgment, RankRequest

_POINT_SALT = 0x0D1A
_PAIR_SALT = 0x9A1B
_SAMPLE_SALT = 0x5A3E
_PERSIST_SALT = 0x9E51
_LIST_SALT = 0x7157
_TOP = 1.0 - 2.0**-53  # the largest float below 1: Φ(ε) is clipped to it (a finite Gumbel draw)


def response_level_sd(gap_mean: float, gap_sd: float) -> float:
    """SD of the recorded responses' latent levels: a pair's level ~ N(0, 1) and its two responses
    sit at level ± gap/2 with the recorded gap ~ N(gap_mean, gap_sd²) (``calibrate``'s model)."""
    return math.sqrt(1.0 + (gap_sd**2 + gap_mean**2) / 4.0)


def recorded_level_sd(provenance: dict) -> float:
    """:func:`response_level_sd` of a fitted YAML's ``provenance.recorded_gap``."""
    gap = (provenance or {}).get("recorded_gap") or {}
    if "mean" not in gap or "sd" not in gap:
        raise ValueError(
            "this fitted judge's provenance has no recorded_gap {mean, sd}: re-run arenabench calibrate"
        )
    return response_level_sd(float(gap["mean"]), float(gap["sd"]))


class OrdinalJudge(JudgeAccounting):
    """Pairwise and pointwise judge fitted to a real judge, with an unfitted listwise model
    (module docstring)."""

    def __init__(
        self,
        grid: Sequence[int] = (0, 9),
        cutpoints: Sequence[float] | None = None,
        point_noise: float = 0.5,
        pair_noise: float = 0.5,
        position_bias: float = 0.0,
        position_gap_scale: float | None = None,
        tie_margin: float = 0.0,
        rejudge_share: float = 0.0,
        persistent_sd: float = 0.0,
        surface_beta: float = 0.0,
        surface_feature: str = "length",
        quality_loc: float = 0.0,
        quality_scale: float = 1.0,
        listwise_noise: float | None = None,
        listwise_noise_growth: float = LISTWISE_GROWTH,
        listwise_position_bias: float | None = None,
        listwise_position_growth: float = LISTWISE_GROWTH,
        seed: int = 0,
        provenance: dict | None = None,
        tokenizer: str | None = "tiny-bpe",
        rubric: str = "open_writing",
    ):
        lo, hi = (int(x) for x in grid)
        if hi <= lo:
            raise ValueError(f"grid must be [lo, hi] with hi > lo; got {list(grid)}")
        if cutpoints is None:  # evenly spread over ±2 latent units
            cutpoints = np.linspace(-2, 2, hi - lo).tolist()
        cuts = np.asarray(cutpoints, dtype=float)
        if cuts.shape != (hi - lo,) or not np.all(np.isfinite(cuts)) or np.any(np.diff(cuts) < 0):
            raise ValueError(
                f"cutpoints must be {hi - lo} finite non-decreasing numbers (one per step of the grid "
                f"{lo}..{hi}); got {list(cutpoints)}"
            )
        nonneg = (
            ("point_noise", point_noise),
            ("pair_noise", pair_noise),
            ("tie_margin", tie_margin),
            ("persistent_sd", persistent_sd),
        )
        for name, v in nonneg:
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
        if not (0.0 <= rejudge_share <= 1.0):
            raise ValueError(f"rejudge_share must be in [0, 1]; got {rejudge_share!r}")
        if not (math.isfinite(quality_scale) and quality_scale > 0 and math.isfinite(quality_loc)):
            raise ValueError("quality_scale must be a finite number > 0 and quality_loc finite")
        s = position_gap_scale
        if s is not None and not (math.isfinite(s) and s > 0):
            raise ValueError(f"position_gap_scale must be None (constant bias) or > 0; got {s!r}")
        if not math.isfinite(position_bias):
            raise ValueError(f"position_bias must be finite; got {position_bias!r}")
        if not math.isfinite(surface_beta):
            raise ValueError(f"surface_beta must be finite; got {surface_beta!r}")
        if not isinstance(surface_feature, str) or not surface_feature:
            raise ValueError(f"surface_feature must be a non-empty name; got {surface_feature!r}")
        self.grid = (lo, hi)
        self.cutpoints = cuts
        self.point_noise = float(point_noise)
        self.pair_noise = float(pair_noise)
        self.position_bias = float(position_bias)
        self.position_gap_scale = None if s is None else float(s)
        self.tie_margin = float(tie_margin)
        self.rejudge_share = float(rejudge_share)
        self.persistent_sd = float(persistent_sd)
        self.surface_beta = float(surface_beta)
        self.surface_feature = surface_feature
        self.quality_loc = float(quality_loc)
        self.quality_scale = float(quality_scale)
        self.seed = int(seed)
        options = (listwise_noise, listwise_noise_growth, listwise_position_bias, listwise_position_growth)
        self._listwise_set = options != (None, LISTWISE_GROWTH, None, LISTWISE_GROWTH)
        self.listwise = ListwiseModel(
            self.pair_noise * math.sqrt(3.0) / math.pi if listwise_noise is None else listwise_noise,
            listwise_noise_growth,
            self.position_bias if listwise_position_bias is None else listwise_position_bias,
            listwise_position_growth,
        )
        self.provenance = dict(provenance or {})
        self.tokens = prompt_tokens(tokenizer, rubric)
        self.reset_stats()

    def __repr__(self) -> str:
        return (
            f"OrdinalJudge(grid={list(self.grid)}, point_noise={self.point_noise:.3g}, "
            f"pair_noise={self.pair_noise:.3g}, position_bias={self.position_bias:.3g}, "
            f"tie_margin={self.tie_margin:.3g}, rejudge_share={self.rejudge_share:.3g}"
            + (
                f", persistent_sd={self.persistent_sd:.3g}, surface_beta={self.surface_beta:.3g}"
                if self.persistent_sd or self.surface_beta
                else ""
            )
            # the listwise options when set (the repr is this judge's cache identity: stack.py)
            + (f", listwise={self.listwise!r})" if self._listwise_set else ")")
        )

    # --- the model, on latent arrays (also what the fit simulates) -------------------------------

    def level(self, u: np.ndarray) -> np.ndarray:
        """Grid level of latent impressions ``u`` (``lo + #{cutpoints ≤ u}``)."""
        return self.grid[0] + np.searchsorted(self.cutpoints, u, side="right")

    def bias(self, gap: np.ndarray) -> np.ndarray:
        if self.position_gap_scale is None:
            return np.full(np.shape(gap), self.position_bias)
        return self.position_bias * nx.exp(-np.abs(gap) / self.position_gap_scale)

    def verdict(self, d: np.ndarray) -> np.ndarray:
        """+1 (slot A), −1 (slot B) or 0 (tie) of judged differences ``d``."""
        return np.where(d > self.tie_margin, 1.0, np.where(d < -self.tie_margin, -1.0, 0.0))

    def _z(self, q: np.ndarray) -> np.ndarray:
        return (q - self.quality_loc) / self.quality_scale

    def surface(self, traj) -> float:
        """``s_r``: the trajectory's standardized surface feature, ``meta["surface"]`` (a float, or
        a mapping read at :attr:`surface_feature`); 0.0 when absent."""
        s = traj.meta.get("surface")
        if s is None:
            return 0.0
        if isinstance(s, dict):
            s = s.get(self.surface_feature, 0.0)
        return float(s)

    def persistent(self, prompt_keys: np.ndarray, traj_keys: np.ndarray) -> np.ndarray:
        """``ε_r ~ N(0, 1)`` per response: a pure function of (seed, prompt key, content key)."""
        seed = np.full(len(traj_keys), self.seed ^ _PERSIST_SALT, dtype=np.uint64)
        return _normals(_combine(seed, prompt_keys, traj_keys.astype(np.uint64)), 1)[:, 0]

    def view(self, trajs, prompt_keys: np.ndarray) -> np.ndarray:
        """The judge's latent view of each trajectory: ``z`` (+ the persistent and surface terms
        when their parameters are not 0; with both 0 exactly ``z``, the judge without them)."""
        v = self._z(np.array([true_quality(t) for t in trajs]))
        if self.persistent_sd != 0:
            keys = np.array([t.key for t in trajs], dtype=np.uint64)
            v = v + self.persistent_sd * self.persistent(prompt_keys, keys)
        if self.surface_beta != 0:
            v = v + self.surface_beta * np.array([self.surface(t) for t in trajs])
        return v

    def _noise(self, sigma: float, base_cols: list[np.ndarray], samples: np.ndarray, salt: int) -> np.ndarray:
        """Fixed part keyed on ``base_cols``, per-sample part keyed on them and the sample."""
        n = len(samples)
        if sigma == 0 or n == 0:
            return np.zeros(n)
        seed = np.full(n, self.seed ^ salt, dtype=np.uint64)
        r = self.rejudge_share
        fixed = _normals(_combine(seed, *base_cols), 1)[:, 0]
        out = math.sqrt(1.0 - r) * fixed
        if r > 0:
            fresh = _normals(_combine(seed ^ np.uint64(_SAMPLE_SALT), *base_cols, samples), 1)[:, 0]
            out = out + math.sqrt(r) * fresh
        return sigma * out

    # --- the judge protocol ----------------------------------------------------------------------

    def _answer(self, fn, requests):
        if not requests:
            return []
        self.stats["requests"] += len(requests)
        return self._timed_call(fn, requests)

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment]:
        out = self._answer(self._judge_pairs, requests)
        if self.tokens is not None:
            self.tokens.charge(self.stats, requests, out)
        return out

    def _judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment]:
        pk = _prompt_keys(requests)
        za = self.view([r.a for r in requests], pk)
        zb = self.view([r.b for r in requests], pk)
        cols = [
            pk,
            np.array([r.a.key for r in requests], dtype=np.uint64),
            np.array([r.b.key for r in requests], dtype=np.uint64),
        ]
        samples = np.array([r.sample for r in requests], dtype=np.uint64)
        gap = za - zb
        d = gap + self.bias(gap) + self._noise(self.pair_noise, cols, samples, _PAIR_SALT)
        v = self.verdict(d)
        pa = ndtr(d / self.pair_noise) if self.pair_noise > 0 else (v + 1.0) / 2.0
        sa = (v + 1.0) / 2.0
        return [PairJudgment(float(a), float(1.0 - a), float(p)) for a, p in zip(sa, pa, strict=True)]

    def score_points(self, requests: Sequence[PointRequest]) -> list[float]:
        out = self._answer(self._score_points, requests)
        if self.tokens is not None:
            self.tokens.charge_points(self.stats, requests, out)
        return out

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment]:
        out = self._answer(self._rank_lists, requests)
        if self.tokens is not None:
            self.tokens.charge_ranks(self.stats, requests, out)
        return out

    def _rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment]:
        out: list = [None] * len(requests)
        for k, idx in by_length(requests).items():
            reqs = [requests[i] for i in idx]
            n = len(reqs)
            trajs = [t for r in reqs for t in r.trajs]
            pk = np.repeat(_prompt_keys(reqs), k)
            views = self.view(trajs, pk).reshape(n, k)
            tkeys = np.array([t.key for t in trajs], dtype=np.uint64).reshape(n, k)
            cols = [pk, np.repeat(list_keys(reqs, k, tkeys), k), np.tile(np.arange(k, dtype=np.uint64), n)]
            samples = np.repeat(np.array([r.sample for r in reqs], dtype=np.uint64), k)
            u = np.clip(ndtr(self._noise(1.0, cols, samples, _LIST_SALT)), 2.0**-1074, _TOP)
            gumbels = -nx.log(-nx.log(u))
            for i, row in zip(idx, self.listwise.scores(views, gumbels.reshape(n, k)).tolist(), strict=True):
                out[i] = RankJudgment(tuple(row))
        return out

    def _score_points(self, requests: Sequence[PointRequest]) -> list[float]:
        pk = _prompt_keys(requests)
        z = self.view([r.traj for r in requests], pk)
        cols = [pk, np.array([r.traj.key for r in requests], dtype=np.uint64)]
        samples = np.array([r.sample for r in requests], dtype=np.uint64)
        u = z + self._noise(self.point_noise, cols, samples, _POINT_SALT)
        lo, hi = self.grid
        return [float(x) for x in (self.level(u) - lo) / (hi - lo)]
