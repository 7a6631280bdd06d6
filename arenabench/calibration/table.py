"""Recorded judgments of real judges in one typed table, and the loaders that fill it.

One :class:`Judgment` row is one answer of one judge: a pairwise verdict on a pair shown in one
order, or a pointwise score of one response. Rows name the *item* (a pair of responses to one
prompt, ``a`` and ``b``), so pairwise and pointwise answers about the same pair meet in
:mod:`arenabench.calibration.stats`. Verdicts are in the pair's own terms (``a`` / ``b`` /
``tie``), never in slot terms: ``order`` says which response was shown first.

Loaders (``load_files`` picks one by file name and content):

* LLMBar ``result.json`` (princeton-nlp/LLMBar, MIT): strategy ``Vanilla`` (and other
  comparison strategies) → two pair rows per item (``swap = False``: order ``ab``; ``swap =
  True``: ``ba``; the file already maps the swapped verdict back to output labels);
  ``Rating*`` → two point rows per item (``score_1``, ``score_2`` on 0–9). The human ``label``
  is the gold. The file's derived Rating ``winner`` fields are ignored (they send a score tie to
  a slot); ties are read from the scores.
* FastChat ``llm_judge`` ``<judge>_pair.jsonl`` (``g1_winner`` in A/B order, ``g2_winner`` in
  B/A order, both already named ``model_1`` / ``model_2`` / ``tie``) and ``<judge>_single.jsonl``
  (a 1–10 ``score``; a response judged again appends a row: repeat 1, 2, ... in file order).
* our JSONL (``docs/calibration.md``): one judgment per line, the fields of :class:`Judgment`.

A row that cannot be read is skipped and counted by reason (``JudgmentTable.skipped``); a file
with no usable row is one :class:`CalibrationDataError`. A value of the wrong type -- a score
that is not a finite number (``1e400`` reads as infinity, ``NaN``), a string where a number
belongs, a number where a string belongs -- is a broken file rather than a judge's answer: one
:class:`CalibrationDataError` line naming the file, the line (``path:N``) or LLMBar item
(``path: item N``) and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

KINDS = ("pair", "point")
VERDICTS = ("a", "b", "tie")
ORDERS = ("ab", "ba")
LLMBAR_GRID = (0, 9)  # LLMBar's Rating prompt: "an integer between 0 and 9"
FASTCHAT_GRID = (1, 10)  # FastChat single-v1: "a scale of 1 to 10"


class CalibrationDataError(ValueError):
    """A judgment file that yields no usable row, or an unknown file kind."""


@dataclass(frozen=True)
class Judgment:
    """One recorded answer. ``a``/``b``: the item's two response ids (``b`` None for a scored
    response that belongs to no pair); pair rows: ``order`` shown and ``verdict`` in a/b terms;
    point rows: the scored ``response`` (``a`` or ``b``), its ``score`` on the integer grid
    ``grid_lo..grid_hi``. ``gold``: which response the humans prefer (``a``/``b``) or None.
    ``repeat``: 0 for the first answer to the same question, 1 for the next, ...
    ``text_a``/``text_b``: the responses' texts where recorded (optional)."""

    judge: str
    source: str
    item: str
    prompt: str
    kind: str
    a: str
    b: str | None = None
    order: str | None = None
    verdict: str | None = None
    response: str | None = None
    score: int | None = None
    grid_lo: int | None = None
    grid_hi: int | None = None
    gold: str | None = None
    repeat: int = 0
    # optional: the texts of responses a and b (LLMBar has them; our JSONL may carry them).
    # Read only for surface features (their length, ``persistence.py``); never a key or a verdict.
    text_a: str | None = None
    text_b: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.kind == "pair":
            if self.b is None or self.order not in ORDERS or self.verdict not in VERDICTS:
                raise ValueError("a pair row needs b, order in ab/ba and verdict in a/b/tie")
        else:
            if self.response is None or self.score is None or self.grid_lo is None or self.grid_hi is None:
                raise ValueError("a point row needs response, score, grid_lo and grid_hi")
            if not self.grid_lo <= self.score <= self.grid_hi:
                raise ValueError(f"score {self.score} outside the grid {self.grid_lo}..{self.grid_hi}")
        if self.gold not in (None, "a", "b"):
            raise ValueError(f"gold must be a, b or null; got {self.gold!r}")
        if not all(t is None or isinstance(t, str) for t in (self.text_a, self.text_b)):
            raise ValueError("text_a / text_b must be strings or null")


@dataclass
class JudgmentTable:
    """The rows of one or more files and what was skipped (reason → count)."""

    rows: list[Judgment] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    # file → the (judge, source) pairs its rows belong to (provenance of a fit on a subset)
    file_keys: dict[str, set] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def __add__(self, other: JudgmentTable) -> JudgmentTable:
        return JudgmentTable(
            self.rows + other.rows,
            self.skipped + other.skipped,
            self.files + other.files,
            {**self.file_keys, **other.file_keys},
        )

    def files_of(self, judge: str, sources: Iterable[str]) -> list[str]:
        """The files holding rows of ``judge`` from any of ``sources``."""
        want = {(judge, s) for s in sources}
        return [f for f in self.files if self.file_keys.get(f, set()) & want]

    def judges(self) -> list[str]:
        return sorted({r.judge for r in self.rows})

    def select(self, judge: str | None = None, sources: Iterable[str] | None = None) -> JudgmentTable:
        keep = set(sources) if sources is not None else None
        rows = [
            r for r in self.rows if (judge is None or r.judge == judge) and (keep is None or r.source in keep)
        ]
        return JudgmentTable(rows, Counter(self.skipped), list(self.files), dict(self.file_keys))

    def counts(self) -> Counter:
        return Counter((r.judge, r.kind) for r in self.rows)


def _bad_value(path: Path, where: str, field: str, why: str) -> CalibrationDataError:
    """One line naming the file, the line (``path:N``) or item (``path: item N``) and the field."""
    return CalibrationDataError(f"{path}{where}: field '{field}': {why}")


def _shown(v) -> str:
    r = repr(v)  # repr escapes newlines: the message stays one line
    return r if len(r) <= 40 else r[:37] + "..."


def _number(v, path: Path, where: str, field: str) -> int | float:
    """``v`` if it is a finite JSON number, else the one-line error (1e400 reads as inf)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _bad_value(path, where, field, f"not a number ({_shown(v)})")
    if not math.isfinite(v):
        raise _bad_value(path, where, field, f"not a finite number ({v})")
    return v


def _integer(v, path: Path, where: str, field: str) -> int:
    v = _number(v, path, where, field)
    if v != int(v):
        raise _bad_value(path, where, field, f"not an integer ({_shown(v)})")
    return int(v)


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:12]


class _Rows:
    """Collects one file's rows and skip reasons; ``done()`` raises if nothing was usable."""

    def __init__(self, path: Path):
        self.path, self.rows, self.skipped = path, [], Counter()

    def add(self, **kw) -> None:
        try:
            self.rows.append(Judgment(**kw))
        except ValueError as exc:
            self.skip(str(exc).split(";")[0])

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def done(self) -> JudgmentTable:
        if not self.rows:
            why = ", ".join(f"{k}: {v}" for k, v in self.skipped.items()) or "the file is empty"
            raise CalibrationDataError(f"{self.path}: no usable judgment ({why})")
        keys = {(r.judge, r.source) for r in self.rows}
        return JudgmentTable(self.rows, self.skipped, [str(self.path)], {str(self.path): keys})


# --- LLMBar -------------------------------------------------------------------------------------


def _llmbar_names(path: Path) -> tuple[str, str, str]:
    """(judge, strategy, subset) from ``.../<subset>[/evaluators]/<judge>/<strategy>/result.json``."""
    parts = path.resolve().parts
    if len(parts) < 4:
        raise CalibrationDataError(f"{path}: an LLMBar result.json sits in <subset>/<judge>/<strategy>/")
    judge, strategy = parts[-3], parts[-2]
    subset = parts[-5] if parts[-4] == "evaluators" and len(parts) >= 5 else parts[-4]
    return judge, strategy, subset


def load_llmbar(path: str | Path) -> JudgmentTable:
    path = Path(path)
    judge, strategy, subset = _llmbar_names(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationDataError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, list):
        raise CalibrationDataError(f"{path}: an LLMBar result.json is a list of items")
    out = _Rows(path)
    source = f"llmbar/{subset}"
    rating = strategy.startswith("Rating")
    for index, inst in enumerate(data):
        try:
            text, o1, o2 = inst["input"], inst["output_1"], inst["output_2"]
            result = inst["results"][-1]
            label = inst.get("label")
        except (KeyError, IndexError, TypeError, AttributeError):
            out.skip("item without input/output_1/output_2/results", 2)
            continue
        if label is not None and (isinstance(label, bool) or not isinstance(label, int)):
            raise _bad_value(path, f": item {index}", "label", f"not an integer ({_shown(label)})")
        for name, v in (("input", text), ("output_1", o1), ("output_2", o2)):
            if not isinstance(v, str):
                raise _bad_value(path, f": item {index}", name, f"not a string ({_shown(v)})")
        gold = {1: "a", 2: "b"}.get(label)
        prompt = _hash(text)
        a, b = _hash(text, o1), _hash(text, o2)
        item = f"{source}/{_hash(text, o1, o2)}"
        common = dict(judge=judge, source=source, item=item, prompt=prompt, a=a, b=b, gold=gold)
        if isinstance(o1, str) and isinstance(o2, str):
            common |= dict(text_a=o1, text_b=o2)
        if rating:
            for k, resp in (("score_1", a), ("score_2", b)):
                raw = result.get(k) if isinstance(result, dict) else None
                text_score = raw[0] if isinstance(raw, list) and raw else raw
                try:
                    score = int(str(text_score).strip())
                except ValueError:
                    finish = raw[1] if isinstance(raw, list) and len(raw) > 1 else ""
                    out.skip(f"score not an integer ({finish or 'unparsed'})")
                    continue
                out.add(
                    **common,
                    kind="point",
                    response=resp,
                    score=score,
                    grid_lo=LLMBAR_GRID[0],
                    grid_hi=LLMBAR_GRID[1],
                )
        else:
            for key, order in (("swap = False", "ab"), ("swap = True", "ba")):
                w = (result.get(key) or {}).get("winner") if isinstance(result, dict) else None
                verdict = {"1": "a", "2": "b"}.get(str(w)) if w is not None else None
                if verdict is None:
                    out.skip("no parsable verdict")
                    continue
                out.add(**common, kind="pair", order=order, verdict=verdict)
    return out.done()


# --- FastChat llm_judge ------------------------------------------------------------------------


def _jsonl(path: Path, out: _Rows):
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CalibrationDataError(f"{path}: not readable ({exc})") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            out.skip("not a JSON line")
            continue
        if not isinstance(rec, dict):
            out.skip("not a JSON object")
            continue
        yield f":{lineno}", rec


def _fastchat_judge(rec: dict) -> str:
    j = rec["judge"]
    return j[0] if isinstance(j, list) else str(j)


def load_fastchat_pair(path: str | Path) -> JudgmentTable:
    path = Path(path)
    out = _Rows(path)
    seen: Counter = Counter()
    names = {"model_1": "a", "model_2": "b", "tie": "tie"}
    for where, rec in _jsonl(path, out):
        turn = _integer(rec.get("turn", 1), path, where, "turn")
        try:
            qid, m1, m2 = rec["question_id"], rec["model_1"], rec["model_2"]
            judge = _fastchat_judge(rec)
        except (KeyError, TypeError, ValueError):
            out.skip("pair record without question_id/model_1/model_2/judge", 2)
            continue
        prompt = f"mtbench/q{qid}/t{turn}"
        item = f"{prompt}/{m1}|{m2}"
        repeat = seen[(judge, item)]
        seen[(judge, item)] += 1
        common = dict(
            judge=judge,
            source="mtbench",
            item=item,
            prompt=prompt,
            a=f"{prompt}/{m1}",
            b=f"{prompt}/{m2}",
            repeat=repeat,
        )
        for key, order in (("g1_winner", "ab"), ("g2_winner", "ba")):
            verdict = names.get(rec.get(key))
            if verdict is None:
                out.skip(f"verdict {rec.get(key)!r} (FastChat's parse failure)")
                continue
            out.add(**common, kind="pair", order=order, verdict=verdict)
    return out.done()


def load_fastchat_single(path: str | Path, grid: tuple[int, int] = FASTCHAT_GRID) -> JudgmentTable:
    path = Path(path)
    out = _Rows(path)
    seen: Counter = Counter()
    for where, rec in _jsonl(path, out):
        turn = _integer(rec.get("turn", 1), path, where, "turn")
        try:
            qid, model = rec["question_id"], rec["model"]
            judge = _fastchat_judge(rec)
            raw = rec["score"]
        except (KeyError, TypeError, ValueError):
            out.skip("single record without question_id/model/judge/score")
            continue
        raw = _number(raw, path, where, "score")
        if raw != int(raw):
            out.skip("score not an integer")
            continue
        if raw == -1:
            out.skip("score -1 (FastChat's parse failure)")
            continue
        prompt = f"mtbench/q{qid}/t{turn}"
        resp = f"{prompt}/{model}"
        repeat = seen[(judge, resp)]
        seen[(judge, resp)] += 1
        out.add(
            judge=judge,
            source="mtbench",
            item=resp,
            prompt=prompt,
            kind="point",
            a=resp,
            response=resp,
            score=int(raw),
            grid_lo=grid[0],
            grid_hi=grid[1],
            repeat=repeat,
        )
    return out.done()


# --- our JSONL -----------------------------------------------------------------------------------

FIELDS = tuple(Judgment.__dataclass_fields__)
REQUIRED = ("judge", "item", "kind", "a")
INT_FIELDS = ("score", "grid_lo", "grid_hi", "repeat")


def load_jsonl(path: str | Path) -> JudgmentTable:
    """Our format: one JSON object per line with the fields of :class:`Judgment` (``source``
    defaults to the file's stem, ``prompt`` to the item). See ``docs/calibration.md``."""
    path = Path(path)
    out = _Rows(path)
    for where, rec in _jsonl(path, out):
        unknown = sorted(set(rec) - set(FIELDS))
        if unknown:
            out.skip(f"unknown field(s) {', '.join(unknown)}")
            continue
        missing = [k for k in REQUIRED if rec.get(k) is None]
        if missing:
            out.skip(f"missing field(s) {', '.join(missing)}")
            continue
        for name in INT_FIELDS:  # a present value of the wrong type: one line naming it
            if rec.get(name) is not None:
                rec[name] = (_number if name == "score" else _integer)(rec[name], path, where, name)
        for name in FIELDS:
            if name not in INT_FIELDS and rec.get(name) is not None and not isinstance(rec[name], str):
                raise _bad_value(path, where, name, f"not a string ({_shown(rec[name])})")
        rec = {"source": path.stem, "prompt": rec["item"], **rec}
        if rec.get("score") is not None:
            s = rec["score"]
            if s != int(s):
                out.skip("score not an integer")
                continue
            rec["score"] = int(s)
        out.add(**rec)
    return out.done()


def write_jsonl(rows: Iterable[Judgment], path: str | Path) -> None:
    """Write rows in our format (what a run against a served judge records)."""
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps({k: v for k, v in asdict(r).items() if v is not None}) + "\n")


# --- dispatch ------------------------------------------------------------------------------------


def file_kind(path: str | Path) -> str:
    """``llmbar`` | ``fastchat_pair`` | ``fastchat_single`` | ``jsonl`` by file name."""
    name = Path(path).name
    if name.endswith(".json"):
        return "llmbar"
    if name.endswith("_pair.jsonl"):
        return "fastchat_pair"
    if name.endswith("_single.jsonl"):
        return "fastchat_single"
    if name.endswith(".jsonl"):
        return "jsonl"
    raise CalibrationDataError(
        f"{path}: unknown judgment file; valid: LLMBar result.json, FastChat <judge>_pair.jsonl / "
        "<judge>_single.jsonl, our .jsonl"
    )


LOADERS = {
    "llmbar": load_llmbar,
    "fastchat_pair": load_fastchat_pair,
    "fastchat_single": load_fastchat_single,
    "jsonl": load_jsonl,
}


def expand(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given; a directory contributes every judgment file below it, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(
                q for q in p.rglob("*") if q.is_file() and (q.name == "result.json" or q.suffix == ".jsonl")
            )
        elif p.exists():
            out.append(p)
        else:
            raise CalibrationDataError(f"{p}: no such file or directory")
    if not out:
        raise CalibrationDataError(f"no judgment files in {', '.join(map(str, paths))}")
    return out


def load_files(paths: Sequence[str | Path]) -> JudgmentTable:
    table = JudgmentTable()
    for p in expand(paths):
        table = table + LOADERS[file_kind(p)](p)
    return table
