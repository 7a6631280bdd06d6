"""The tokens a real judge would be sent, for judges that send none (the simulator).

:class:`PromptTokens` counts, for a pairwise request, exactly the prompt an LLM judge of this
project sends (:func:`~arenabench.judges.prompts.request_messages`, rendered with the tiny
model's chat template :func:`~arenabench.judges.tokenizer.render_chat`) under a named tokenizer:

* ``"tiny-bpe"``: the byte-level BPE of :func:`~arenabench.judges.tokenizer.build_tiny_tokenizer`
  (vocabulary 1024, trained on the judge prompts). It is the tokenizer of the tiny model the
  vLLM tests serve, so a simulated run's prefill equals what that model's engine reports for the
  same requests (tested). Real judges' tokenizers have larger vocabularies: their counts are
  lower by roughly a constant factor; the ratios between constructors carry over.

Ranking requests (:meth:`PromptTokens.rank_prefill`: k trajectories in one prompt, each
prefilled once, RULER's token floor) and pointwise requests (:meth:`PromptTokens.point_prefill`:
one trajectory) are counted the same way, from the prompts the LLM judges send for them
(``prompts.rank_request_messages`` / ``prompts.point_request_messages``).

**Decode** is an assumption, not a count: a verdict-only reply, the JSON line
``{"score_a": a, "score_b": b, "winner": w}`` with the judgment's scores rounded to integers
(what the vLLM judge's default regex-constrained decoding emits) plus one end-of-sequence
token (a ranking: ``RANKING: 3 > 1 = 2``; a score: ``{"score": n}`` on 1–10). A judge that
reasons first decodes more; multiply accordingly.

**Prefix cache** (``cached``): the prefill an ideal prefix cache would serve: unbounded,
token-granular and kept for the counter's lifetime. Every request after the first gets the
system message (the prompt up to the query's text) cached; one whose query was seen before gets
the whole system + query part; one whose query *and* trajectory A were seen
before also gets trajectory A's and the text up to trajectory B. Real engines cache whole
blocks (vLLM: 16 tokens) and evict, so this is an upper bound on what they serve.

Speed: the prompt is counted as the sum of its pieces (the part before trajectory A, A's text,
the part between, B's text, the rest), each memoized, which equals the count of the whole only
because the byte-level pre-tokenizer never merges across the ``\\n`` that surrounds each piece
when the piece starts and ends with a non-whitespace character; any other request is encoded
whole. A test checks the two agree on adversarial texts.

A text of ASCII letters and digits in words separated by single spaces (a tiny policy's
response, ``"t3 t5 t12"``) is counted as the sum of its pre-tokens' counts, each memoized: the
byte-level pre-tokenizer (GPT-2's pattern; no normalizer) splits it into exactly the runs
`` ?[A-Za-z]+`` and `` ?[0-9]+``, and BPE never merges across pre-tokens. A regex split and a few
lookups cost a quarter of an encode, and every step brings new texts. Only for a tokenizer of
that shape (checked when the counter is built); a test checks it against the whole encode.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence

from arenabench.judges.prompts import (
    POINT_SCALE,
    RANK_KEY,
    point_request_messages,
    rank_request_messages,
    render_trajectory,
    request_messages,
)
from arenabench.registry import unknown_message
from arenabench.types import (
    JudgeFailure,
    PairJudgment,
    PairRequest,
    PointRequest,
    RankJudgment,
    RankRequest,
    Trajectory,
)

TOKENIZERS = ("tiny-bpe",)
_SENT_A, _SENT_B = "\x00arenabench-A\x00", "\x00arenabench-B\x00"


@functools.cache
def load_tokenizer(name: str):
    """The ``tokenizers.Tokenizer`` registered as ``name`` (built once per process)."""
    if name not in TOKENIZERS:
        raise ValueError(unknown_message("tokenizer", name, list(TOKENIZERS)))
    from arenabench.judges.tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer()


# a text whose byte-level pre-tokens are its letter and digit runs, each with its leading space
_PLAIN = re.compile(r"[A-Za-z0-9]+(?: [A-Za-z0-9]+)*")
_PRE_TOKENS = re.compile(r" ?[A-Za-z]+| ?[0-9]+")


def _splits_plain_words(tok) -> bool:
    """Whether ``tok`` pre-tokenizes plain text into :data:`_PRE_TOKENS`: no normalizer and a
    byte-level pre-tokenizer with GPT-2's pattern and no added prefix space."""
    cfg = json.loads(tok.to_str())
    pre = cfg.get("pre_tokenizer") or {}
    return (
        cfg.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and not pre.get("add_prefix_space", False)
    )


def _hard(text: str) -> bool:
    """A piece whose count adds up: non-empty, starting and ending with non-whitespace."""
    return bool(text) and not text[0].isspace() and not text[-1].isspace()


class PromptTokens:
    """Exact prefill, ideal-cache prefill and assumed decode tokens of pairwise and ranking
    requests (module doc)."""

    def __init__(
        self, tokenizer: str = "tiny-bpe", rubric: str = "open_writing", mask_tool_outputs: bool = True
    ):
        from arenabench.judges.prompts import load_rubric

        self.tokenizer_name = tokenizer
        self.tok = load_tokenizer(tokenizer)
        self.rubric = load_rubric(rubric)
        self.mask_tool_outputs = mask_tool_outputs
        self._counts: dict[str, int] = {}
        self._pre_tokens: dict[str, int] | None = {} if _splits_plain_words(self.tok) else None
        self._frames: dict[tuple, tuple[str, int, int, int] | None] = {}
        # the ideal cache's contents: per (query, text before A) prefix sent, the A texts sent after it
        self._prefixes: dict[tuple[str, str], set[str]] = {}
        self._root: int | None = None  # tokens before the query text: the same for every request
        self._verdicts: dict[tuple[int, int], int] = {}
        self.eos = 1
        # ranking and pointwise requests, per kind: the ideal cache's prefixes sent, in whole
        # pieces (see rank_prefill), and the tokens before the query
        self._list_prefixes: dict[str, set[tuple]] = {}
        self._list_roots: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens of ``text`` (no special tokens added), memoized."""
        n = self._counts.get(text)
        if n is None:
            if self._pre_tokens is not None and _PLAIN.fullmatch(text):  # module doc
                pieces = _PRE_TOKENS.findall(text)
                try:
                    n = sum([self._pre_tokens[p] for p in pieces])
                except KeyError:  # a piece not seen yet
                    n = sum(map(self._pre_token, pieces))
            else:
                n = len(self.tok.encode(text, add_special_tokens=False).ids)
            self._counts[text] = n
        return n

    def _pre_token(self, piece: str) -> int:
        n = self._pre_tokens.get(piece)
        if n is None:
            n = self._pre_tokens[piece] = len(self.tok.encode(piece, add_special_tokens=False).ids)
        return n

    def render(self, req: PairRequest) -> str | JudgeFailure:
        """The whole prompt text the LLM judges send for ``req``."""
        from arenabench.judges.tokenizer import render_chat

        messages = request_messages(self.rubric, req, self.mask_tool_outputs)
        return messages if isinstance(messages, JudgeFailure) else render_chat(messages)

    def _frame(self, req: PairRequest) -> tuple[str, int, int, int] | None:
        """The text before A and the token counts of (before A, between A and B, after B) for
        the request's query and reference."""
        ref = (req.a.meta or {}).get("reference") if self.rubric.uses_reference else None
        key = (req.prompt, ref)
        if key not in self._frames:
            a = Trajectory("a", _SENT_A, meta={"reference": ref} if ref is not None else {})
            probe = self.render(PairRequest(req.prompt, a, Trajectory("b", _SENT_B)))
            if isinstance(probe, JudgeFailure) or probe.count(_SENT_A) != 1 or probe.count(_SENT_B) != 1:
                self._frames[key] = None
            else:
                head, rest = probe.split(_SENT_A)
                mid, tail = rest.split(_SENT_B)
                self._frames[key] = (head, self.count(head), self.count(mid), self.count(tail))
        return self._frames[key]

    def prefill(self, req: PairRequest) -> tuple[int, int] | None:
        """(prompt tokens, of which the ideal prefix cache serves) of one request."""
        return self.prefill_batch([req])[0]

    def prefill_batch(self, requests) -> list[tuple[int, int] | None]:
        """(prompt tokens, of which the ideal prefix cache serves) per request, in order; None
        for a request the LLM judges fail before sending (a rubric's missing reference)."""
        # id(trajectory) -> its judge-visible text and that text's tokens when they add up
        # (:func:`_hard`; None otherwise): rendered, checked and counted once per batch, not per
        # request (the trajectories are alive in the batch, so their ids are unique)
        texts: dict[int, tuple[str, int | None]] = {}
        for req in requests:
            for t in (req.a, req.b):
                if id(t) not in texts:
                    x = render_trajectory(t, self.mask_tool_outputs)
                    # one encode per new text (not encode_batch: its thread pool competes with
                    # torch's threads in a trainer)
                    texts[id(t)] = (x, self.count(x) if _hard(x) else None)
        return [self._prefill(req, *texts[id(req.a)], *texts[id(req.b)]) for req in requests]

    def _prefill(
        self, req: PairRequest, ta: str, na: int | None, tb: str, nb: int | None
    ) -> tuple[int, int] | None:
        """One request's (prompt tokens, cached); ``na`` / ``nb``: A's and B's tokens, None when
        their text does not add up (then the whole prompt is encoded)."""
        frame = self._frame(req)
        if frame is not None and na is not None and nb is not None:
            head, n_head, n_mid, n_tail = frame
            n_a = na + n_mid
            total = n_head + n_a + nb + n_tail
        else:
            text = self.render(req)
            if isinstance(text, JudgeFailure):
                return None
            head = "\x00no-frame"
            n_head, n_a, total = 0, 0, self.count(text)
        prefixes = self._prefixes
        after = prefixes.get((req.prompt, head))
        if after is None:  # a new prefix: only the system prompt (shared by all queries) is cached
            cached = self._root_tokens(req) if prefixes else 0
            prefixes[req.prompt, head] = {ta}
        else:
            cached = n_head
            if ta in after:
                cached += n_a
            else:
                after.add(ta)
        return total, cached

    def parts(self, req: PairRequest) -> tuple[int, int, int, int] | None:
        """``req``'s prompt tokens split where a prefix can stop being shared: (the text before
        trajectory A, A + the text up to B, B, the rest); they sum to its prefill. None when the
        prompt does not split exactly (then only :meth:`prefill`'s total is known)."""
        frame = self._frame(req)
        ta, tb = (render_trajectory(t, self.mask_tool_outputs) for t in (req.a, req.b))
        if frame is None or not (_hard(ta) and _hard(tb)):
            return None
        _, n_head, n_mid, n_tail = frame
        return n_head, self.count(ta) + n_mid, self.count(tb), n_tail

    def _root_tokens(self, req: PairRequest) -> int:
        """Tokens of the prompt before the query's text (system message, query delimiter), or 0
        when the query's first character could merge with what precedes it."""
        query = req.prompt
        if not query or query[0].isspace() or query.startswith(("<<<", ">>>")):
            return 0
        if self._root is None:
            a = Trajectory("a", "x", meta={"reference": "r"} if self.rubric.uses_reference else {})
            probe = self.render(PairRequest(_SENT_A, a, Trajectory("b", "y")))
            self._root = self.count(probe.split(_SENT_A)[0])
        return self._root

    def charge(self, stats: dict, requests: Sequence[PairRequest], replies: Sequence[PairJudgment]) -> None:
        """Add a text-free judge's answered batch to its ``stats``: each request's prefill and
        ideal-cache share, and the assumed reply for its verdict (a request an LLM judge fails
        before sending, e.g. a rubric's missing reference, costs nothing)."""
        self._bill(stats, self.prefill_batch(requests), (self.decode(v.score_a, v.score_b) for v in replies))

    @staticmethod
    def _bill(stats: dict, sent: Iterable[tuple[int, int] | None], decoded: Iterable[int]) -> None:
        """Add requests' (prefill, cached) and decode tokens to ``stats``, skipping the unsent (None)."""
        prompt = cached = completion = 0  # integers: summed first, the same totals
        for s, d in zip(sent, decoded, strict=True):
            if s is None:
                continue
            prompt += s[0]
            cached += s[1]
            completion += d
        stats["prompt_tokens"] += prompt
        stats["cached_prompt_tokens"] += cached
        stats["completion_tokens"] += completion

    def decode(self, score_a: float, score_b: float) -> int:
        """Tokens of the assumed verdict-only reply (module doc), end-of-sequence included."""
        a, b = int(round(score_a)), int(round(score_b))
        n = self._verdicts.get((a, b))
        if n is None:
            w = "A" if a > b else "B" if b > a else "tie"
            line = f'{{"score_a": {a}, "score_b": {b}, "winner": "{w}"}}'
            n = self._verdicts[(a, b)] = self.count(line) + self.eos
        return n

    # -- ranking requests: k trajectories in one prompt, each once (RULER's token floor) ------------

    def render_rank(self, req: RankRequest) -> str | JudgeFailure:
        """The whole prompt text the LLM judges send for a ranking request."""
        from arenabench.judges.tokenizer import render_chat

        messages = rank_request_messages(self.rubric, req, self.mask_tool_outputs)
        return messages if isinstance(messages, JudgeFailure) else render_chat(messages)

    def _list_frame(
        self, kind: str, prompt: str, trajs: Sequence[Trajectory]
    ) -> tuple[list[str], list[int]] | None:
        """A ``kind`` (``"rank"`` or ``"point"``) prompt's pieces around its trajectories (the text
        before the first, then the text after each) and their token counts, for the query, the
        reference and the number of trajectories; None when the prompt does not split exactly."""
        k = len(trajs)
        ref = (trajs[0].meta or {}).get("reference") if self.rubric.uses_reference else None
        key = (kind, prompt, ref, k)
        if key not in self._frames:
            marks = [f"\x00arenabench-{n}\x00" for n in range(k)]
            first = {"reference": ref} if ref is not None else {}
            probe = self._render_list(
                kind,
                prompt,
                tuple(Trajectory(str(n), m, meta=first if n == 0 else {}) for n, m in enumerate(marks)),
            )
            if isinstance(probe, JudgeFailure) or any(probe.count(m) != 1 for m in marks):
                self._frames[key] = None
            else:
                pieces, rest = [], probe
                for m in marks:
                    head, rest = rest.split(m)
                    pieces.append(head)
                pieces.append(rest)
                self._frames[key] = (pieces, [self.count(x) for x in pieces])
        return self._frames[key]

    def _render_list(self, kind: str, prompt: str, trajs: tuple[Trajectory, ...]) -> str | JudgeFailure:
        if kind == "rank":
            return self.render_rank(RankRequest(prompt, trajs))
        return self.render_point(PointRequest(prompt, trajs[0]))

    def rank_prefill(self, req: RankRequest) -> tuple[int, int] | None:
        """(prompt tokens, of which the ideal prefix cache serves) of one ranking request; None for
        a request the LLM judges fail before sending (a rubric's missing reference). Each of the
        k trajectories is prefilled once. The ideal cache serves the longest run of whole pieces
        (the text before trajectory 1, then each trajectory with the text after it) that an
        earlier ranking request began with; a new query, the system message (as for pairs)."""
        return self._list_prefill("rank", req.prompt, req.trajs)

    def point_prefill(self, req: PointRequest) -> tuple[int, int] | None:
        """:meth:`rank_prefill` for a pointwise request (one trajectory): a query seen before gets
        the text before the trajectory cached, the same trajectory again its whole prompt."""
        return self._list_prefill("point", req.prompt, (req.traj,))

    def _list_prefill(self, kind: str, prompt: str, trajs: tuple[Trajectory, ...]) -> tuple[int, int] | None:
        texts = [render_trajectory(t, self.mask_tool_outputs) for t in trajs]
        frame = self._list_frame(kind, prompt, trajs)
        if frame is not None and all(map(_hard, texts)):
            pieces, counts = frame
            head = pieces[0]
            parts = [counts[0]] + [self.count(x) + c for x, c in zip(texts, counts[1:], strict=True)]
        else:
            text = self._render_list(kind, prompt, trajs)
            if isinstance(text, JudgeFailure):
                return None
            head, parts, texts = "\x00no-frame", [self.count(text)], []
        seen = self._list_prefixes.setdefault(kind, set())
        key: tuple = (prompt, head)
        cached = 0 if not seen or key in seen else self._list_root_tokens(kind, prompt)
        for j in range(len(parts)):
            if j:
                key = (*key, texts[j - 1])
            if key in seen:
                cached = sum(parts[: j + 1])
            else:
                seen.add(key)
        return sum(parts), cached

    def _list_root_tokens(self, kind: str, query: str) -> int:
        """Tokens of a ``kind`` prompt before the query's text (as :meth:`_root_tokens`)."""
        if not query or query[0].isspace() or query.startswith(("<<<", ">>>")):
            return 0
        if kind not in self._list_roots:
            meta = {"reference": "r"} if self.rubric.uses_reference else {}
            probe = self._render_list(kind, _SENT_A, (Trajectory("a", "x", meta=meta), Trajectory("b", "y")))
            self._list_roots[kind] = self.count(probe.split(_SENT_A)[0])
        return self._list_roots[kind]

    def rank_decode(self, scores: Sequence[float]) -> int:
        """Tokens of the assumed ranking-only reply, ``RANKING: 3 > 1 = 2`` for the judgment's
        scores (best first, equal scores tied, equal ones in shown order), end-of-sequence included."""
        order = sorted(range(len(scores)), key=lambda n: -scores[n])
        line = RANK_KEY + " " + str(order[0] + 1)
        for prev, n in zip(order, order[1:], strict=False):
            line += (" = " if scores[n] == scores[prev] else " > ") + str(n + 1)
        return self.count(line) + self.eos

    def charge_ranks(
        self, stats: dict, requests: Sequence[RankRequest], replies: Sequence[RankJudgment]
    ) -> None:
        """:meth:`charge` for a text-free judge's answered batch of ranking requests."""
        self._bill(stats, map(self.rank_prefill, requests), (self.rank_decode(j.scores) for j in replies))

    # -- pointwise requests: one trajectory per prompt ----------------------------------------------

    def render_point(self, req: PointRequest) -> str | JudgeFailure:
        """The whole prompt text the LLM judges send for a pointwise request."""
        from arenabench.judges.tokenizer import render_chat

        messages = point_request_messages(self.rubric, req, self.mask_tool_outputs)
        return messages if isinstance(messages, JudgeFailure) else render_chat(messages)

    def point_decode(self, score: float) -> int:
        """Tokens of the assumed score-only reply ``{"score": n}`` (``n`` the judge's [0, 1] score on
        the prompts' 1–10 scale, as ``parsing.parse_score`` reads it back), end-of-sequence included."""
        lo, hi = POINT_SCALE
        n = min(hi, max(lo, int(round(lo + score * (hi - lo)))))
        return self.count(f'{{"score": {n}}}') + self.eos

    def charge_points(self, stats: dict, requests: Sequence[PointRequest], replies: Sequence[float]) -> None:
        """:meth:`charge` for a text-free judge's answered batch of pointwise requests."""
        self._bill(stats, map(self.point_prefill, requests), map(self.point_decode, replies))


def prompt_tokens(tokenizer: str | None = "tiny-bpe", rubric: str = "open_writing") -> PromptTokens | None:
    """The counter of a judge that sends no text (the simulated and the fitted judges), built from
    their shared ``tokenizer`` / ``rubric`` options; ``tokenizer=None``: no counter, no tokens."""
    return None if tokenizer is None else PromptTokens(tokenizer, rubric)


__all__ = ["TOKENIZERS", "PromptTokens", "load_tokenizer", "prompt_tokens"]
