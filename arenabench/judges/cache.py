"""A persistent judgment cache (sqlite) and a judge wrapper that uses it.

Resuming a sweep, re-running a constructor or sharing judgments between constructors must
not pay for the same LLM judge call twice. :class:`JudgmentCache` stores one JSON value per
key in an sqlite file in WAL mode; several processes (a joblib sweep) can read and write
the same file: each process opens its own connection, every write is one short
``BEGIN IMMEDIATE`` transaction, and a busy database is waited on (``timeout``).

Keys (:func:`judgment_key`) are sha256 over a canonical JSON of everything that determines a
reply: judge model, rubric, query, both sides' content, the order they were shown in, the
sample index and the sampling parameters. The retry ``attempt`` is deliberately *not* part
of the key: a retry exists only because an earlier attempt failed, and failures are never
cached.

Failures are never cached: a :class:`JudgeFailure` (timeout, malformed reply) is a property
of that call, not of the request, so a resumed run must ask again. Replies with non-finite
scores are treated the same way.

A bad row (not JSON, not a JSON object, or not a usable verdict: a missing field, a non-finite
score) is never fatal: it is skipped, counted (``bad_rows`` in :meth:`JudgmentCache.stats` and
:meth:`CachedJudge.report`, one warning per batch) and its request asked again, which overwrites it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arenabench.judges.accounting import WrapperStats
from arenabench.kinds import QuestionKind, kind_of_request
from arenabench.types import JudgeFailure, Trajectory

log = logging.getLogger(__name__)

KEY_VERSION = 1
_CHUNK = 500  # keys per SELECT ... IN (...) (sqlite's variable limit is >= 999)
_STRUCTURED_KEYS = ("reasoning", "tool_calls", "final_answer")


def _json_default(o: Any) -> Any:
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return o.item()
    if isinstance(o, set | frozenset):
        return sorted(o)
    raise TypeError(f"cannot put {type(o).__name__} into a judgment key")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def trajectory_content(traj: Trajectory) -> str:
    """What a judge sees of a trajectory: its text plus any structured reasoning/tool calls/answer.

    Hidden simulator fields (``meta["quality"]``) are not content and are not part of it.
    """
    meta = traj.meta or {}
    structured = {k: meta[k] for k in _STRUCTURED_KEYS if k in meta}
    if not structured:
        return traj.text
    return _canonical({"text": traj.text, **structured})


def judgment_key(
    model: str,
    rubric: str,
    prompt: str,
    a_text: str,
    b_text: str,
    order: str | int = "ab",
    sample: int = 0,
    sampling_params: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """sha256 hex of a canonical JSON of all parts.

    ``order`` records which side was shown first (swapping ``a_text``/``b_text`` already
    changes the key; ``order`` is for callers that keep a canonical pair and vary the
    presentation). ``extra`` holds any other prompt options (template version, tool-output
    masking) that change what the judge sees.
    """
    parts = {
        "v": KEY_VERSION,
        "model": model,
        "rubric": rubric,
        "prompt": prompt,
        "a": a_text,
        "b": b_text,
        "order": order,
        "sample": int(sample),
        "sampling_params": dict(sampling_params or {}),
        "extra": dict(extra or {}),
    }
    return hashlib.sha256(_canonical(parts).encode("utf-8")).hexdigest()


class JudgmentCache:
    """sqlite key → JSON dict store; safe to share between processes (see module doc)."""

    def __init__(self, path: str | os.PathLike, timeout: float = 30.0):
        self.path = Path(path)
        self.timeout = float(timeout)
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.bad_rows = 0  # rows skipped as unreadable (module doc)
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection()  # create the file and table now, so errors surface early

    # --- connection ------------------------------------------------------------------------

    def _retry(self, fn, *args):
        # PRAGMA journal_mode / CREATE TABLE can report "locked" without waiting on the busy
        # handler while another process initializes the same file; retry within the timeout.
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return fn(*args)
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # fresh connection after fork
            conn = sqlite3.connect(
                str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            self._retry(conn.execute, "PRAGMA journal_mode=WAL")
            self._retry(conn.execute, "PRAGMA synchronous=NORMAL")
            self._retry(
                conn.execute,
                "CREATE TABLE IF NOT EXISTS judgments "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)",
            )
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> JudgmentCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_conn"], state["_pid"], state["_lock"] = None, None, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # --- reads / writes --------------------------------------------------------------------

    def get(self, key: str) -> dict | None:
        return self.get_many([key])[key]

    def get_many(self, keys: Iterable[str]) -> dict[str, dict | None]:
        """``{key: value or None}`` for every key asked (duplicates counted once)."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, dict] = {}
        with self._lock:
            conn = self._connection()
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._retry(
                    lambda q, c: conn.execute(q, c).fetchall(),
                    f"SELECT key, value FROM judgments WHERE key IN ({marks})",
                    chunk,
                )
                for k, v in rows:
                    try:
                        value = json.loads(v)
                    except (json.JSONDecodeError, TypeError, RecursionError):
                        value = None
                    if isinstance(value, dict):
                        found[k] = value
                    else:  # corrupt row: a counted miss, asked again
                        self.bad_rows += 1
            out = {k: found.get(k) for k in keys}
            n_hit = sum(v is not None for v in out.values())
            self.hits += n_hit
            self.misses += len(out) - n_hit
        return out

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        self.put_many([(key, value)])

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Write all items in one short transaction (later duplicates win)."""
        rows = [(k, json.dumps(dict(v), sort_keys=True), time.time()) for k, v in items]
        if not rows:
            return
        with self._lock:
            conn = self._connection()

            def write():
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany("INSERT OR REPLACE INTO judgments VALUES (?, ?, ?)", rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

            self._retry(write)
            self.writes += len(rows)

    def __len__(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM judgments").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        asked = self.hits + self.misses
        return {
            "path": str(self.path),
            "entries": len(self),
            "hits": self.hits,
            "misses": self.misses,
            "writes": self.writes,
            "bad_rows": self.bad_rows,
            "hit_rate": self.hits / asked if asked else math.nan,
        }


def _stored(kind: QuestionKind, value: Mapping[str, Any], req) -> Any:
    """A stored reply to ``req``; ValueError unless it passes the engine's own check (the kind's
    ``reply``)."""
    ok, why = kind.reply(kind.decode(value), req)
    if ok is None:
        raise ValueError(f"stored {kind.what} reply unusable: {why}")
    return ok


class CachedJudge(WrapperStats):
    """A judge that answers from ``cache`` and sends only misses to ``inner``.

    Each batch call of a question kind (:meth:`judge_pairs`, :meth:`score_points`;
    ``arenabench.kinds``) makes at most ONE inner call of the same name, holding the distinct
    missed requests (identical requests in a batch are asked once). Successful replies are
    stored (the kind's ``encode``; read back with its ``decode`` and checked with the engine's
    own validation, its ``reply``); failures and non-finite scores are returned but not stored.
    A key's sides and ``order`` are the kind's ``key_texts``: a pairwise key has both sides and
    ``order="ab"``, a pointwise key ``order="point"`` and an empty second side, so kinds never
    collide. ``hits`` / ``misses`` count distinct keys per call (this
    judge's own, even when several judges share one :class:`JudgmentCache`); ``stats`` is the
    inner judge's with ``cache_hits`` / ``cache_misses`` set from them
    (:mod:`arenabench.judges.accounting`); :meth:`report` adds the file's own numbers.
    """

    def __init__(
        self,
        inner,
        cache: JudgmentCache,
        model: str,
        rubric: str,
        sampling_params: Mapping[str, Any] | None = None,
        key_extra: Mapping[str, Any] | None = None,
    ):
        self.inner = inner
        self.cache = cache
        self.model = model
        self.rubric = rubric
        self.sampling_params = dict(sampling_params or {})
        self.key_extra = dict(key_extra or {})
        self.inner_calls = 0  # inner batches sent (pairwise and pointwise)
        self.inner_requests = 0  # requests inside them
        self.hits = 0  # distinct keys answered from the cache
        self.misses = 0  # distinct keys sent to the inner judge
        self.bad_rows = 0  # rows found but unreadable, asked again (module doc)

    def __repr__(self) -> str:
        return f"CachedJudge({self.inner!r}, model={self.model!r}, rubric={self.rubric!r})"

    def _key(self, prompt: str, a_text: str, b_text: str, order: str, sample: int) -> str:
        return judgment_key(
            self.model,
            self.rubric,
            prompt,
            a_text,
            b_text,
            order=order,
            sample=sample,
            sampling_params=self.sampling_params,
            extra=self.key_extra,
        )

    def key(self, r) -> str:
        """The cache key of judge request ``r`` of any question kind."""
        a, b, order = kind_of_request(r).key_texts(r, trajectory_content)
        return self._key(r.prompt, a, b, order, r.sample)

    forwards_async = True

    def _ask(self, kind: QuestionKind, requests) -> list:
        keys, replies, todo = self._lookup(kind, list(requests))
        if todo:
            self._keep(kind, replies, todo, getattr(self.inner, kind.method)(list(todo.values())))
        return [replies[k] for k in keys]

    async def _aask(self, kind: QuestionKind, requests) -> list:
        """:meth:`_ask` with the inner judge's coroutine method."""
        keys, replies, todo = self._lookup(kind, list(requests))
        if todo:
            self._keep(kind, replies, todo, await getattr(self.inner, kind.amethod)(list(todo.values())))
        return [replies[k] for k in keys]

    def _lookup(self, kind: QuestionKind, requests) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        """(keys, replies found in the cache, distinct missed requests by key); counts hits/misses."""
        keys = [self.key(r) for r in requests]
        asked = dict(zip(keys, requests, strict=True))  # a key's request (equal keys: equal content)
        bad_before = self.cache.bad_rows
        cached = self.cache.get_many(keys)
        replies: dict[str, Any] = {}
        for k, v in cached.items():
            if v is not None:
                try:
                    replies[k] = _stored(kind, v, asked[k])
                except (KeyError, TypeError, ValueError, AttributeError):  # unreadable: ask again
                    self.cache.bad_rows += 1
        bad = self.cache.bad_rows - bad_before
        if bad:
            self.bad_rows += bad
            log.warning("judgment cache %s: %d unreadable row(s) skipped, asked again", self.cache.path, bad)
        todo: dict[str, Any] = {}
        for k, r in zip(keys, requests, strict=True):
            if k not in replies and k not in todo:
                todo[k] = r
        self.hits += len(replies)
        self.misses += len(todo)
        if todo:
            self.inner_calls += 1
            self.inner_requests += len(todo)
        return keys, replies, todo

    def _keep(self, kind: QuestionKind, replies: dict[str, Any], todo: dict[str, Any], answers) -> None:
        """Add the inner judge's ``answers`` to ``todo``'s keys in ``replies``; store the successes
        (as the engine's own check, the kind's ``reply``, normalizes them: numpy scores are
        stored as floats; a failure or a bad reply is never cached)."""
        answers = list(answers)
        if len(answers) != len(todo):
            raise RuntimeError(f"inner judge answered {len(answers)} of {len(todo)} requests")
        store = []
        for (k, req), ans in zip(todo.items(), answers, strict=True):
            replies[k] = ans
            if isinstance(ans, JudgeFailure):
                continue
            ok, _ = kind.reply(ans, req)
            if ok is not None:
                store.append((k, kind.encode(ok)))
        self.cache.put_many(store)

    def own_stats(self) -> dict[str, Any]:
        return {"cache_hits": self.hits, "cache_misses": self.misses}

    def report(self) -> dict[str, Any]:
        """The cache file's numbers plus this judge's inner calls and hits/misses."""
        return {
            **self.cache.stats(),
            "inner_calls": self.inner_calls,
            "inner_requests": self.inner_requests,
            "judge_hits": self.hits,
            "judge_misses": self.misses,
            "judge_bad_rows": self.bad_rows,
        }


__all__ = ["CachedJudge", "JudgmentCache", "judgment_key", "trajectory_content"]
