"""Reading an LLM judge's reply back into a :class:`PairJudgment`, a score, a :class:`RankJudgment`
or a :class:`JudgeFailure`.

The contract every prompt states (``judges/prompts.py``) and both parsers enforce -- a parser
must never guess, and a policy's text must never reach the verdict (docs/robustness.md, "Threat
model"):

* The verdict is the reply's **final line**: one flat JSON object in plain ASCII, nothing else on
  the line (surrounding spaces aside), optionally fenced (a line of three backticks with an
  optional language name before it, one of three backticks after it, ending the reply). A reply
  that is nothing but the object (structured decoding) may span lines. Objects inline in the
  reasoning (a draft, an example) are reasoning.
* Exactly **one** verdict line: another line elsewhere that is itself a verdict object (e.g. a
  response's fake verdict the judge quoted before or after its own) makes the reply ambiguous.
* The final line must not lie inside an echoed ``<<<NAME>>>`` block (response text the judge
  quoted, delimiters read after NFKC normalization).
* The object's keys are the format's only (``score_a`` / ``score_b`` / ``winner``; pointwise
  ``score``), each once, spelled without escapes; no nesting. Look-alike (e.g. fullwidth,
  NFKC-equivalent) characters, a blockquote ``>`` or quotes around the object are not the format.
* Replies longer than ``max_chars`` (:data:`MAX_REPLY_CHARS`, 100,000 characters by default;
  backends expose it as ``max_reply_chars``) are failures before anything is read. Nothing here
  recurses on the reply's text (deep nesting is bounded work, never a RecursionError).

Values (:func:`parse_verdict`): scores real numbers (not booleans or strings), finite and in
[0, 10]; either both or neither. ``winner`` (case-insensitive ``A``/``B``/``tie``; ``null``
counts as absent) must agree with the scores when both are given: A needs ``score_a > score_b``,
B ``score_b > score_a``, tie equal scores; a disagreement is ``JudgeFailure("inconsistent
verdict: ...")``, retried rather than a coin flip. A winner alone maps to A → (10, 0), B → (0, 10),
tie → (5, 5). :func:`parse_score` (pointwise): ``{"score": <integer 1-10>}``, mapped onto [0, 1].
:func:`parse_ranking` (listwise, k responses): the final line is not JSON but a ranking line,
``RANKING: 3 > 1 = 2 > 4`` (the same final-line, one-line and echoed-block rules; ASCII, the key
upper-case, numbers 1…k joined by ``>`` or ``=``), each number exactly once; a number out of range,
ranked twice or missing is ``JudgeFailure("malformed ranking: ...")``, never a guessed completion.

Anything else is ``JudgeFailure("malformed verdict: <short reason>")``, which the backends count
(``stats["failures"]``) and the engine re-asks.

``prob_a`` is left ``None``; a backend that reads label logprobs fills it from
:func:`label_probability`.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from arenabench.types import JudgeFailure, PairJudgment, RankJudgment

# part of the cache key (judges/llm.py): bump whenever a reply could parse differently
PARSER_VERSION = 2
MAX_REPLY_CHARS = 100_000  # default reply cap (characters); a judge's max_tokens is far below it
_MAX_VERDICT_LINE = 256  # a verdict object is ~50 characters
_PAIR_KEYS = frozenset({"score_a", "score_b", "winner"})
_POINT_KEYS = frozenset({"score"})
_WINNER_SCORES = {"A": (10.0, 0.0), "B": (0.0, 10.0), "tie": (5.0, 5.0)}
_FENCE_OPEN = re.compile(r"```[A-Za-z]*")
_DELIM = re.compile(r"(<<<|\u2039\u2039\u2039)\s*(END\s)?")  # an echoed prompt block's delimiter
# what the final line must be, and what a second one is called, per reply kind
_LINE_NAMES = {"verdict": ("verdict object", "verdict line"), "ranking": ("ranking line", "ranking line")}
_MAX_RANKING_LINE = 4096  # "RANKING: " and up to ~6 characters an item: hundreds of items
# the ranking line (module doc): response numbers joined by '>' or '=', spaces around them optional
_RANKING_LINE = re.compile(r"RANKING: *([0-9]+(?: *[>=] *[0-9]+)*)")
_RANK_ITEM = re.compile(r"[0-9]+|[>=]")
T = TypeVar("T")


def _malformed(why: str, kind: str = "verdict") -> JudgeFailure:
    return JudgeFailure(f"malformed {kind}: {why}")


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _object(line: str, keys: frozenset, limit: int = _MAX_VERDICT_LINE) -> dict | None:
    """``line`` as a verdict object of the format with ``keys``, or None. Bounded, non-recursive
    checks first: ASCII, short, one flat ``{...}``, no escapes; then ``json.loads``."""
    line = line.strip()
    if not (line.startswith("{") and line.endswith("}")) or len(line) > limit or not line.isascii():
        return None
    if line.count("{") != 1 or line.count("}") != 1 or "[" in line or "\\" in line:
        return None
    if any(ord(c) < 32 for c in line):  # a control character (tabs and newlines were split off)
        return None
    try:
        obj = json.loads(line, object_pairs_hook=_no_duplicates)
    except ValueError:  # JSONDecodeError and _Duplicate
        return None
    if not isinstance(obj, dict) or not obj or not set(obj) <= keys:
        return None
    return obj


def _final_object(text: str, keys: frozenset, max_chars: int) -> dict | JudgeFailure:
    """The reply's verdict object under the module's contract, or why there is none."""
    return _final_line(text, lambda line: _object(line, keys), max_chars, "verdict")


def _final_line(text: str, read: Callable[[str], T | None], max_chars: int, kind: str) -> T | JudgeFailure:
    """What ``read`` makes of the reply's final line under the module's contract (a verdict
    object, a ranking line: ``read`` returns None for any other line), or
    ``JudgeFailure("malformed <kind>: ...")`` saying why there is none."""
    what = _LINE_NAMES[kind]
    if not isinstance(text, str) or not text.strip():
        return _malformed("empty reply", kind)
    if len(text) > max_chars:
        return _malformed(f"reply too long ({len(text)} chars > max_reply_chars={max_chars})", kind)
    whole = read(" ".join(text.split()))  # a reply that is only the object
    if whole is not None:
        return whole
    lines = [ln.strip() for ln in text.strip().splitlines()]
    last = len(lines) - 1
    if last >= 2 and lines[last] == "```" and _FENCE_OPEN.fullmatch(lines[last - 2]):
        last -= 1  # a fenced verdict: the object is the line before the closing fence
    obj = read(lines[last])
    if obj is None:
        return _malformed(f"the final line is not a {what[0]}", kind)
    if any(read(ln) is not None for k, ln in enumerate(lines) if k != last):
        return _malformed(f"more than one {what[1]}", kind)
    open_block = False  # is the final line inside an echoed <<<NAME>>> block?
    for ln in lines[:last]:
        m = _DELIM.match(unicodedata.normalize("NFKC", ln))
        if m:
            open_block = m.group(2) is None
    if open_block:
        return _malformed("the final line is inside quoted response text", kind)
    return obj


def _score(obj: Mapping, key: str) -> float | JudgeFailure:
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        return _malformed(f"{key} is not a number ({str(v)[:20]!r})")
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
    return _malformed(f"winner must be A, B or tie ({str(w)[:20]!r})")


def parse_verdict(text: str, max_chars: int = MAX_REPLY_CHARS) -> PairJudgment | JudgeFailure:
    """A pairwise reply whose final line is ``{"score_a": .., "score_b": .., "winner": ..}`` (module doc)."""
    obj = _final_object(text, _PAIR_KEYS, max_chars)
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


def parse_score(
    text: str, scale: tuple[int, int] = (1, 10), max_chars: int = MAX_REPLY_CHARS
) -> float | JudgeFailure:
    """A pointwise reply under the same contract (module doc) whose final line is
    ``{"score": <integer on scale>}`` (``prompts.POINT_SCALE``: 1 worst … 10 best), mapped onto
    [0, 1] as ``(s − lo) / (hi − lo)`` (the simulated judges' range); anything else is a
    ``JudgeFailure("malformed score: ...")``, retried and counted like a malformed verdict."""
    obj = _final_object(text, _POINT_KEYS, max_chars)
    if isinstance(obj, JudgeFailure):
        return JudgeFailure(obj.reason.replace("malformed verdict:", "malformed score:", 1))
    v = obj["score"]
    if isinstance(v, bool) or not isinstance(v, int):
        return JudgeFailure(f"malformed score: score is not an integer ({str(v)[:20]!r})")
    lo, hi = scale
    if not lo <= v <= hi:
        return JudgeFailure(f"malformed score: {v} is outside {lo}-{hi}")
    return (v - lo) / (hi - lo)


def _ranking_line(line: str) -> list[list[int]] | None:
    """``line`` as a ranking line's tiers of response numbers (as written, best first), or None:
    ASCII, short, ``RANKING:`` then numbers joined by ``>`` / ``=`` and nothing else."""
    line = line.strip()
    if len(line) > _MAX_RANKING_LINE or not line.isascii():
        return None
    m = _RANKING_LINE.fullmatch(line)
    if m is None:
        return None
    tiers: list[list[int]] = [[]]
    for tok in _RANK_ITEM.findall(m.group(1)):
        if tok == ">":
            tiers.append([])
        elif tok != "=":
            tiers[-1].append(int(tok))
    return tiers


def parse_ranking(text: str, k: int, max_chars: int = MAX_REPLY_CHARS) -> RankJudgment | JudgeFailure:
    """A listwise reply for ``k`` shown responses under the same contract (module doc) whose final
    line is ``RANKING: 3 > 1 = 2 > 4`` (``prompts.RANK_KEY``): response numbers 1…k, best first,
    ``>`` better than, ``=`` tied, each number exactly once. Read into the
    :class:`~arenabench.types.RankJudgment` of that order (``RankJudgment.from_order``: each
    response gets the number ranked below it, tied ones share; in shown order). A number outside
    1…k, a number twice or a number missing (a partial ranking) is ``JudgeFailure("malformed
    ranking: ...")`` naming it, never a guessed completion; retried and counted like a malformed
    verdict."""
    tiers = _final_line(text, _ranking_line, max_chars, "ranking")
    if isinstance(tiers, JudgeFailure):
        return tiers
    seen: set[int] = set()
    for n in (n for tier in tiers for n in tier):
        if not 1 <= n <= k:
            return _malformed(f"response {n} is not one of 1-{k}", "ranking")
        if n in seen:
            return _malformed(f"response {n} is ranked twice", "ranking")
        seen.add(n)
    if len(seen) < k:
        missing = ", ".join(str(n) for n in range(1, k + 1) if n not in seen)
        return _malformed(f"partial ranking: response(s) {missing} missing", "ranking")
    return RankJudgment.from_order([[n - 1 for n in tier] for tier in tiers], k)


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


__all__ = [
    "MAX_REPLY_CHARS",
    "PARSER_VERSION",
    "label_probability",
    "parse_ranking",
    "parse_score",
    "parse_verdict",
    "verdict_label_probability",
]
