"""A pairwise judge backed by any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, ...).

:class:`OpenAIJudge` answers one engine batch by sending all of its requests concurrently
(at most ``max_concurrency`` in flight) to one or more servers, round-robin, and parsing each
reply with :func:`arenabench.judges.parsing.parse_verdict`.

Calling it: ``judge_pairs`` is synchronous and runs its own event loop with ``asyncio.run``.
Call it from sync code (the engine does). If the calling thread already runs an event loop
(a notebook, an async trainer) the batch runs in a short-lived worker thread instead, so it
still works, but it blocks the calling loop until the batch is done.

Pipelined: ``ajudge_pairs`` is the same in the running event loop, and ``prefers_pipelined``
makes ``Engine(schedule="auto")`` send each group's next wave as soon as its previous one is
answered (``arenabench.engine``), at most ``max_concurrency`` requests in flight.

Outages: a refused connection, a reset, a timeout, HTTP 429 and 5xx are one class, the
server being away (a ``vllm serve`` replica restarting, a node draining). Such a request is
resent with the *same* body (so the same seed: an outage never changes an answer) after a
bounded, jittered exponential backoff ``min(max_backoff_s, backoff_s * 2**k) * (0.5 + u/2)``,
``u`` a pure function of the request's seed and ``k`` (it moves only *when* a request is resent,
never what it answers); each resend goes to the next base URL, so a dead replica fails over.
A request gives up once it has been resent ``retries`` times *and* ``outage_deadline_s`` have
passed since its first failure; its reply is then ``JudgeFailure("outage: <last reason>")``,
which the engine does not re-ask (it has waited a whole deadline already) but counts as a lost
request of its group and masks the group (``arenabench.advantages.is_masked``); see
``docs/faults.md``. Any other 4xx is final (``"http: status <code>"``). A 200 whose body is not
the expected chat-completion JSON is ``JudgeFailure("bad response: ...")``. A reply that parses
badly (truncated, inconsistent verdict) is returned as the parser's failure unchanged: the
engine's own retry re-asks with a new ``attempt`` number and hence a new seed.

Counters (``stats``, cumulative): ``calls`` (HTTP posts) ``== answered + retries + lost``:
every post either got a final reply (``answered``), was resent (``retries``) or was the last of
a request given up (``lost``); ``outage_s`` is the wall time during which at least one request
was between its first transport failure and its reply (the union of those intervals).

Secrets: the API key is read from the environment variable named ``api_key_env`` at every
batch (``None``, or an unset/empty variable, sends no ``Authorization`` header; a 401/403 reply
then says so in its failure reason). It is never stored on the judge, logged, shown in ``repr``
or placed in a failure reason or ``stats``. ``api_key_env`` must look like a variable's name
(:func:`api_key_env_problem`): a pasted key is refused without being echoed.

Structured decoding: pass the server's own request fields through ``extra_body``, e.g.
``extra_body={"structured_outputs": {"regex": VERDICT_REGEX}}`` for vLLM; it is merged into
the request body last, so it may also override ``temperature`` and friends.

Pointwise (``score_points`` / ``ascore_points``): the same transport with the pointwise prompt
(:func:`~arenabench.judges.prompts.point_prompt`: one trajectory, a 1-10 score on the last line),
read by :func:`~arenabench.judges.parsing.parse_score` (strict: anything but the exact score line
is a counted ``malformed score`` failure) into [0, 1]. ``point_extra_body`` replaces
``extra_body`` for these requests when given (a verdict regex would not admit a score line, e.g.
``{"structured_outputs": {"regex": POINT_REGEX}}``); no logprobs are asked for.

Listwise (``rank_lists`` / ``arank_lists``): the same transport with the ranking prompt
(:func:`~arenabench.judges.prompts.rank_prompt`: k trajectories, each once, numbered; a
``RANKING: 3 > 1 = 2 > 4`` line last), read by :func:`~arenabench.judges.parsing.parse_ranking`
into one score per shown item (a number missing, repeated or out of range is a counted
``malformed ranking`` failure). ``rank_extra_body`` replaces ``extra_body`` for these requests
when given (e.g. ``{"structured_outputs": {"regex": rank_regex(k)}}`` for lists of one size k);
no logprobs are asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from arenabench.asyncrun import run_coroutine
from arenabench.judges.accounting import request_seed
from arenabench.judges.llm import LLMJudge
from arenabench.judges.parsing import (
    MAX_REPLY_CHARS,
    parse_ranking,
    parse_score,
    parse_verdict,
    verdict_label_probability,
)
from arenabench.judges.prompts import POINT_SCALE
from arenabench.types import (
    OUTAGE,
    JudgeFailure,
    PairJudgment,
    PairRequest,
    PointRequest,
    RankJudgment,
    RankRequest,
)

_RETRYABLE_STATUS = frozenset({429}) | frozenset(range(500, 600))
_MAX_REASON = 160
DEFAULT_OUTAGE_DEADLINE_S = 120.0  # why this value: docs/faults.md
DEFAULT_MAX_BACKOFF_S = 10.0


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def api_key_env_problem(name: Any) -> str | None:
    """Why ``name`` cannot be ``api_key_env`` (None if it can: null, or an environment variable's
    NAME such as ``OPENAI_API_KEY``). The value itself is never shown: where a name belongs, a
    user may have pasted the key."""
    if name is None:
        return None
    if isinstance(name, str) and _ENV_NAME.fullmatch(name):
        return None
    size = f"{len(name)} characters" if isinstance(name, str) else f"a {type(name).__name__}"
    return (
        "api_key_env must be the NAME of the environment variable that holds the key (capitals, "
        f"digits and _, e.g. OPENAI_API_KEY), or null; got {size}, not shown (is it the key itself?)"
    )


def _normalize_base_url(url: str) -> str:
    url = str(url).strip().rstrip("/")
    if not url:
        raise ValueError("a base URL must not be empty")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"a base URL must start with http:// or https://; got {url[:60]!r}")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


class _Retryable(Exception):
    """A transport-level problem worth another try; ``reason`` is already short and safe."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class OpenAIJudge(LLMJudge):
    """Pairwise, pointwise and listwise judge over OpenAI-compatible chat-completions servers (module doc)."""

    # a served judge with continuous batching: Engine(schedule="auto") pipelines the groups
    prefers_pipelined = True
    # where and how a request is sent, never what it answers: not in the cache key (judges/llm.py)
    transport_params = (
        "base_urls",
        "api_key_env",
        "max_concurrency",
        "timeout_s",
        "retries",
        "backoff_s",
        "outage_deadline_s",
        "max_backoff_s",
    )

    def __init__(
        self,
        base_urls: str | list[str],
        model: str,
        rubric: str = "open_writing",
        api_key_env: str | None = "OPENAI_API_KEY",
        max_concurrency: int = 16,
        timeout_s: float = 60.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        temperature: float = 0.0,
        max_tokens: int = 512,
        extra_body: dict | None = None,
        mask_tool_outputs: bool = True,
        top_logprobs: int = 0,
        outage_deadline_s: float = DEFAULT_OUTAGE_DEADLINE_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        point_extra_body: dict | None = None,
        max_reply_chars: int = MAX_REPLY_CHARS,
        rank_extra_body: dict | None = None,
    ):
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("OpenAIJudge needs at least one base URL")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1; got {max_concurrency}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0; got {retries}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0; got {timeout_s}")
        if backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0; got {backoff_s}")
        if not outage_deadline_s >= 0:
            raise ValueError(f"outage_deadline_s must be >= 0; got {outage_deadline_s}")
        if not max_backoff_s >= backoff_s:
            raise ValueError(f"max_backoff_s must be >= backoff_s ({backoff_s}); got {max_backoff_s}")
        self.base_urls = [_normalize_base_url(u) for u in urls]
        self.endpoints = [u + "/v1/chat/completions" for u in self.base_urls]
        if top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0; got {top_logprobs}")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0; got {temperature}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1; got {max_tokens}")
        if problem := api_key_env_problem(api_key_env):
            raise ValueError(problem)
        if max_reply_chars < 1:
            raise ValueError(f"max_reply_chars must be >= 1; got {max_reply_chars}")
        self.max_reply_chars = int(max_reply_chars)
        super().__init__(model, rubric, temperature, max_tokens, top_logprobs, mask_tool_outputs)
        self.api_key_env = api_key_env
        self.max_concurrency = int(max_concurrency)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.outage_deadline_s = float(outage_deadline_s)
        self.max_backoff_s = float(max_backoff_s)
        self._down = 0  # requests now between a transport failure and their reply
        self._down_since = 0.0
        self.extra_body = dict(extra_body or {})
        # the pointwise requests' extra fields (e.g. a score regex); None: ``extra_body``'s
        self.point_extra_body = None if point_extra_body is None else dict(point_extra_body)
        # the ranking requests' extra fields (e.g. a ranking regex); None: ``extra_body``'s
        self.rank_extra_body = None if rank_extra_body is None else dict(rank_extra_body)
        self._next_url = 0
        self._lock = threading.Lock()
        self._loop_sessions: dict = {}  # event loop -> (session, semaphore, secret): ajudge_pairs

    def __repr__(self) -> str:
        return self._repr(
            base_urls=self.base_urls,
            model=self.model,
            rubric=self.rubric_name,
            api_key_env=self.api_key_env,
            max_concurrency=self.max_concurrency,
        )

    def _take_urls(self, n: int) -> int:
        """The base-URL index the next ``n`` requests start at (round-robin across calls)."""
        with self._lock:
            start = self._next_url
            self._next_url = (start + n) % len(self.endpoints)
        return start

    # -- public --------------------------------------------------------------------------

    def judge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        """Judge a batch concurrently; one reply per request, in order, never an exception per request."""
        return self._send(requests)

    def score_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        """Score a batch concurrently with the pointwise prompt (``prompts.point_prompt``): one score
        in [0, 1] per request (``parsing.parse_score``), in order; the same transport, retries,
        outage rules and counters as :meth:`judge_pairs`."""
        return self._send(requests)

    async def ascore_points(self, requests: Sequence[PointRequest]) -> list[float | JudgeFailure]:
        """:meth:`score_points` in the running event loop (as :meth:`ajudge_pairs`)."""
        return await self.ajudge_pairs(requests)

    def rank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        """Rank a batch concurrently with the ranking prompt (``prompts.rank_prompt``, one request
        per list, each trajectory's text sent once): one score per shown item per request
        (``parsing.parse_ranking``), in order; the same transport, retries, outage rules and
        counters as :meth:`judge_pairs`."""
        return self._send(requests)

    async def arank_lists(self, requests: Sequence[RankRequest]) -> list[RankJudgment | JudgeFailure]:
        """:meth:`rank_lists` in the running event loop (as :meth:`ajudge_pairs`)."""
        return await self.ajudge_pairs(requests)

    def _send(self, requests) -> list:
        requests = list(requests)
        if not requests:
            return []
        start = self._take_urls(len(requests))
        return run_coroutine(self._run_batch(requests, start), name="openai-judge-batch")

    async def ajudge_pairs(self, requests: Sequence[PairRequest]) -> list[PairJudgment | JudgeFailure]:
        """``judge_pairs`` in the running event loop (the engine's pipelined schedule sends one
        request per call): one HTTP session per loop, kept until :meth:`aclose`, with at most
        ``max_concurrency`` requests in flight across all calls; the API key is read when the
        loop's session is opened."""
        requests = list(requests)
        if not requests:
            return []
        start = self._take_urls(len(requests))
        loop = asyncio.get_running_loop()
        state = self._loop_sessions.get(loop)
        if state is None:
            secret = self._secret()
            state = self._loop_sessions[loop] = (
                self._session(secret),
                asyncio.Semaphore(self.max_concurrency),
                secret,
            )
        session, sem, secret = state
        return await self._judge_all(session, sem, requests, start, secret)

    async def aclose(self) -> None:
        """Close the running loop's session (the engine calls it at the end of a pipelined step)."""
        state = self._loop_sessions.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[0].close()

    # -- internals -----------------------------------------------------------------------

    def _secret(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env) or None

    def _scrub(self, text: str, secret: str | None) -> str:
        text = " ".join(str(text).split())
        if secret:
            text = text.replace(secret, "***")
        return text[:_MAX_REASON]

    def _body(self, req: PairRequest | PointRequest | RankRequest) -> dict[str, Any] | JudgeFailure:
        messages = self._messages(req)
        if isinstance(messages, JudgeFailure):
            return messages
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": request_seed(req.sample, req.attempt),
        }
        if isinstance(req, PointRequest | RankRequest):
            own = self.point_extra_body if isinstance(req, PointRequest) else self.rank_extra_body
            body.update(self.extra_body if own is None else own)
            return body
        if self.top_logprobs:  # for PRC's P(A): top-k logprobs at the verdict's label token
            body["logprobs"] = True
            body["top_logprobs"] = self.top_logprobs
        body.update(self.extra_body)
        return body

    def _session(self, secret: str | None):
        import aiohttp

        headers = {"Content-Type": "application/json"}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        connector = aiohttp.TCPConnector(limit=self.max_concurrency)
        return aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers)

    async def _run_batch(self, requests: list[PairRequest], start: int) -> list[PairJudgment | JudgeFailure]:
        secret = self._secret()
        sem = asyncio.Semaphore(self.max_concurrency)
        async with self._session(secret) as session:
            return await self._judge_all(session, sem, requests, start, secret)

    async def _judge_all(self, session, sem, requests, start, secret) -> list[PairJudgment | JudgeFailure]:
        self.stats["requests"] += len(requests)
        tasks = [
            self._judge_one(session, sem, req, (start + k) % len(self.endpoints), secret)
            for k, req in enumerate(requests)
        ]
        out = await asyncio.gather(*tasks)
        for rep in out:
            if isinstance(rep, JudgeFailure):
                self._count_failure(rep)
        return list(out)

    async def _judge_one(self, session, sem, req, url_index, secret) -> PairJudgment | JudgeFailure:
        body = self._body(req)
        if isinstance(body, JudgeFailure):
            return body
        first_failure = None  # monotonic time of this request's first transport failure
        try:
            for k in itertools.count():
                url = self.endpoints[(url_index + k) % len(self.endpoints)]
                try:
                    async with sem:
                        reply = await self._post(session, url, body, secret, req)
                    self.stats["answered"] += 1
                    return reply
                except _Retryable as exc:
                    reason = exc.reason
                except Exception as exc:  # an unexpected error: final, but still a failure, not a crash
                    self.stats["answered"] += 1  # not a transport failure: the post is accounted for
                    return JudgeFailure(self._scrub(f"http: {type(exc).__name__}: {exc}", secret))
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                    self._outage(+1)
                left = self.outage_deadline_s - (now - first_failure)
                if k >= self.retries and left <= 0:
                    self.stats["lost"] += 1
                    return JudgeFailure(f"{OUTAGE}: {reason}")
                self.stats["retries"] += 1
                wait = self._backoff(k, body)
                await asyncio.sleep(wait if k < self.retries else min(wait, left))
        finally:
            if first_failure is not None:
                self._outage(-1)
        raise AssertionError("unreachable")

    def _backoff(self, k: int, body: dict) -> float:
        """The wait before resend ``k + 1``: capped exponential, jittered by a pure function of
        the request body (so a run's timing is reproducible and concurrent resends spread out)."""
        key = json.dumps([body.get("messages"), body.get("seed"), k], sort_keys=True, default=str)
        h = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        u = int.from_bytes(h, "little") / float(1 << 64)
        return min(self.max_backoff_s, self.backoff_s * 2**k) * (0.5 + 0.5 * u)

    def _outage(self, delta: int) -> None:
        """Track the requests in an outage; ``stats["outage_s"]`` adds each interval with >= 1."""
        with self._lock:
            if delta > 0 and self._down == 0:
                self._down_since = time.monotonic()
            self._down += delta
            if delta < 0 and self._down == 0:
                self.stats["outage_s"] += time.monotonic() - self._down_since

    async def _post(
        self, session, url, body, secret, req
    ) -> PairJudgment | float | RankJudgment | JudgeFailure:
        import aiohttp

        self.stats["calls"] += 1
        t0 = time.perf_counter()
        try:
            async with session.post(url, json=body) as resp:
                status = resp.status
                raw = await self._read_capped(resp)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._latencies.append(time.perf_counter() - t0)
            what = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
            raise _Retryable(self._scrub(f"http: {what}", secret)) from None
        self._latencies.append(time.perf_counter() - t0)
        if status in _RETRYABLE_STATUS:
            raise _Retryable(f"http: status {status}")
        if status in (401, 403) and not secret:  # say why: the key was never sent
            why = f"{self.api_key_env} is not set" if self.api_key_env else "api_key_env is null"
            return JudgeFailure(f"http: status {status} (no API key sent: {why})")
        if status != 200:
            return JudgeFailure(f"http: status {status}")
        return self._read_reply(raw, secret, req)

    def _body_limit(self) -> int:
        """Bytes of a response body read at most: the reply cap in UTF-8 (4 bytes a character) plus
        room for the envelope and logprobs (a token's top-k alternatives, ~64 bytes each)."""
        return 4 * self.max_reply_chars + 64 * self.max_tokens * (self.top_logprobs + 1) + (1 << 16)

    async def _read_capped(self, resp) -> bytes | None:
        """The body, or None once it passes :meth:`_body_limit` (the rest is not read)."""
        limit, chunks, size = self._body_limit(), [], 0
        async for chunk in resp.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _read_reply(
        self,
        raw: bytes | None,
        secret: str | None,
        req: PairRequest | PointRequest | RankRequest | None = None,
    ) -> PairJudgment | float | RankJudgment | JudgeFailure:
        """A chat-completion body read into ``req``'s kind of reply (a verdict when ``req`` is None)."""
        if raw is None:
            return JudgeFailure(f"bad response: body over {self._body_limit()} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return JudgeFailure("bad response: body is not JSON")
        if not isinstance(data, dict):
            return JudgeFailure("bad response: body is not a JSON object")
        usage = data.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            for key, v in (
                ("prompt_tokens", usage.get("prompt_tokens")),
                ("completion_tokens", usage.get("completion_tokens")),
                ("cached_prompt_tokens", cached),  # vLLM: only with --enable-prompt-tokens-details
            ):
                if isinstance(v, int) and not isinstance(v, bool):
                    self.stats[key] += v
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return JudgeFailure("bad response: no choices")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            return JudgeFailure("bad response: choices[0].message.content is not a string")
        if isinstance(req, PointRequest):
            return parse_score(content, POINT_SCALE, self.max_reply_chars)
        if isinstance(req, RankRequest):
            return parse_ranking(content, len(req.trajs), self.max_reply_chars)
        verdict = parse_verdict(content, self.max_reply_chars)
        if isinstance(verdict, JudgeFailure) or not self.top_logprobs:
            return verdict
        return PairJudgment(verdict.score_a, verdict.score_b, prob_a=_reply_prob_a(choices[0]))


def _reply_prob_a(choice: dict) -> float | None:
    """P(A) from a chat-completion choice's ``logprobs.content`` (None when absent or odd)."""
    lp = choice.get("logprobs")
    content = lp.get("content") if isinstance(lp, dict) else None
    if not isinstance(content, list):
        return None
    tokens, tops = [], []
    for item in content:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            return None
        tokens.append(item["token"])
        top = {}
        for alt in item.get("top_logprobs") or ():
            if isinstance(alt, dict) and isinstance(alt.get("token"), str):
                with contextlib.suppress(TypeError, ValueError):
                    top[alt["token"]] = float(alt["logprob"])
        tops.append(top)
    return verdict_label_probability(tokens, tops)


__all__ = ["OpenAIJudge"]
