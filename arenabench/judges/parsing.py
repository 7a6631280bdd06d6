"""Reading an LLM judge's reply back into a :class:`PairJudgment` or a :class:`JudgeFailure`.

Rules of :func:`parse_verdict` (a parser must never guess a side):

* The verdict is the JSON object that contains the *last* ``"score_a":`` / ``"score_b":`` /
  ``"winner":`` key in the reply. Objects earlier in the reasoning (a draft verdict, an
  example) are ignored. If that last key is not inside a well-formed object (the reply was
  truncated mid-verdict) the reply is a failure, even if an earlier complete object exists.
* Scores must be real numbers (not booleans or strings), finite and in [0, 10]; either both
  are given or neither.
* ``winner`` (case-insensitive ``A``/``B``/``tie``; ``null`` counts as absent) must agree
  with the scores when both are given: A needs ``score_a > score_b``, B needs
  ``score_b > score_a``, tie needs equal scores. A disagreement means the judge contradicted
  itself, so it is a ``JudgeFailure("inconsistent verdict: ...")`` to be retried rather than
  a coin flip between the two signals.
* A winner alone maps to scores on the 0–10 scale: A → (10, 0), B → (0, 10), tie → (5, 5).
* Anything else is ``JudgeFailure("malformed verdict: <short reason>")``.

``prob_a`` is left ``None``; a backend that reads label logprobs fills it from
:func:`label_probability`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

from arenabench.types import JudgeFailure, PairJudgment

PARSER_VERSION = 1  # part of the cache key (judges/llm.py): bump when a reply could parse differently
_KEY_RE = re.compile(r'"(score_a|score_b|winner)"\s*:')
_DECODER = json.JSONDecoder()
_WINNER_SCORES = {"A": (10.0, 0.0), "B": (0.0, 10.0), "tie": (5.0, 5.0)}
_MAX_CANDIDATES = 64  # '{' positions tried before giving up (bounded work on long replies)


def _malformed(why: str) -> JudgeFailure:
    return JudgeFailure(f"malformed verdict: {why}")


def _find_verdict(text: str) -> dict | JudgeFailure:
    keys = list(_KEY_RE.finditer(text))
    if not keys:
        return _malformed("no verdict JSON found")
    last = keys[-1].start()
    start = text.rfind("{", 0, last)
    tried = 0
    while start != -1 and tried < _MAX_CANDIDATES:
        tried += 1
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            obj, end = None, -1
        if isinstance(obj, dict) and end > last:
            return obj
        start = text.rfind("{", 0, start)
    return _malformed("truncated or invalid JSON around the final verdict")


def _score(obj: Mapping, key: str) -> float | JudgeFailure:
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        return _malformed(f"{key} is not a number ({v!r})")
    v = float(v)
    if not math.isfinite(v):
        return _malformed(f"{key} is not finite")
    if not 0.0 <= v <= 10.0:
        return _malformed(f"{key}={v:g} is outside [0, 10]")
    return v


def _winner(obj: Mapping) -> str | None | JudgeFailure:
    w = obj.get("winner")
    if w is None:
        return None
    if isinstance(w, str):
        norm = w.strip()
        if norm.upper() in ("A", "B"):
            return norm.upper()
        if norm.lower() == "tie":
            return "tie"
    return _malformed(f"winner must be A, B or tie ({w!r})")


def parse_verdict(text: str) -> PairJudgment | JudgeFailure:
    """Parse a judge reply ending in ``{"score_a": .., "score_b": .., "winner": ..}`` (module doc)."""
    if not isinstance(text, str) or not text.strip():
        return _malformed("empty reply")
    obj = _find_verdict(text)
    if isinstance(obj, JudgeFailure):
        return obj
    winner = _winner(obj)
    if isinstance(winner, JudgeFailure):
        return winner
    has_a, has_b = "score_a" in obj, "score_b" in obj
    if has_a != has_b:
        return _malformed("missing " + ("score_b" if has_a else "score_a"))
    if not has_a:
        if winner is None:
            return _malformed("no scores and no winner")
        return PairJudgment(*_WINNER_SCORES[winner])
    sa, sb = _score(obj, "score_a"), _score(obj, "score_b")
    for s in (sa, sb):
        if isinstance(s, JudgeFailure):
            return s
    if winner is not None:
        implied = "A" if sa > sb else "B" if sb > sa else "tie"
        if implied != winner:
            return JudgeFailure(f"inconsistent verdict: winner {winner} but scores {sa:g} vs {sb:g}")
    return PairJudgment(sa, sb)


_PREFIXES = ("\u2581", "\u0120")  # SentencePiece '▁' and byte-level BPE 'Ġ' word-start markers


def _label(token: str) -> str | None:
    t = token.strip()
    for p in _PREFIXES:
        if t.startswith(p):
            t = t[len(p) :].strip()
    if t.startswith('"'):  # a BPE may merge the JSON string's opening quote into the label
        t = t[1:]
    return t if t in ("A", "B") else None


def label_probability(logprobs: Mapping[str, float]) -> float | None:
    """P("A") renormalized over {"A", "B"} from a token → logprob mapping (e.g. top-k logprobs).

    Variants of a label (``"A"``, ``" A"``, ``"▁A"``, ``"ĠA"``) are pooled (log-sum-exp).
    Only upper-case labels count (a lower-case ``a`` is usually the article). NaN entries
    are ignored; if neither label has positive probability the answer is ``None``. A label
    missing from the mapping counts as probability 0, so only-A gives 1.0.
    """
    pooled: dict[str, list[float]] = {"A": [], "B": []}
    for token, lp in logprobs.items():
        label = _label(str(token))
        if label is None:
            continue
        lp = float(lp)
        if math.isnan(lp) or lp == -math.inf:
            continue
        pooled[label].append(lp)
    if not pooled["A"] and not pooled["B"]:
        return None
    top = max(pooled["A"] + pooled["B"])
    if math.isinf(top):  # +inf logprob: not a probability
        return None
    mass_a = sum(math.exp(x - top) for x in pooled["A"])
    mass_b = sum(math.exp(x - top) for x in pooled["B"])
    return mass_a / (mass_a + mass_b)


_WINNER_KEY_RE = re.compile(r'"winner"\s*:\s*"?')


def verdict_label_probability(
    tokens: Sequence[str], top_logprobs: Sequence[Mapping[str, float]]
) -> float | None:
    """P("A") at the generated token that carries the verdict's label (top-k logprobs per token).

    The label position is the value of the *last* ``"winner"`` key (same rule as
    :func:`parse_verdict`); a reply without one is a bare label (structured ``choice``), whose
    first non-space token is the label. ``None`` if no token there looks like a label.
    """
    text = "".join(tokens)
    keys = list(_WINNER_KEY_RE.finditer(text))
    pos = keys[-1].end() if keys else len(text) - len(text.lstrip())
    if pos >= len(text):
        return None
    start = 0
    for k, tok in enumerate(tokens):
        end = start + len(tok)
        if end > pos:
            return label_probability(top_logprobs[k]) if k < len(top_logprobs) else None
        start = end
    return None


__all__ = ["PARSER_VERSION", "label_probability", "parse_verdict", "verdict_label_probability"]
