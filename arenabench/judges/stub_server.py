"""The served test judge: a deterministic OpenAI-compatible ``/v1/chat/completions`` server.

A real server *process* to kill and restart (``tests/judges/test_outage.py``, ``make soak``),
cheap enough for two busy cores where ``vllm serve`` on the tiny model is not. Standard library
only, so it starts in a fraction of a second and runs as a script::

    python arenabench/judges/stub_server.py --port 8000 [--log answered.log]

It reads the ``QUERY`` and ``TRAJECTORY A/B`` blocks of the project's judge prompt
(:mod:`arenabench.judges.prompts`) and scores each side ``1 + 9 * mean_t u(query, token_t)``
(``u`` a hash-uniform in [0, 1) of the query and a whitespace token, rounded to 2 decimals): a
judge with stable, content-only preferences, so its answer to a request is the same whenever
and however often it is asked -- what a rerun on the judgment cache relies on. The reply ends
in the verdict line :func:`arenabench.judges.parsing.parse_verdict` reads; asked with
``logprobs``, its label token carries ``P(A) = sigmoid(score_a - score_b)`` (PRC). The pointwise
prompt (a lone ``TRAJECTORY`` block) gets that side's score rounded to 1-10 as the score line
:func:`arenabench.judges.parsing.parse_score` reads (``--bad-scores N``: the first N malformed).
The ranking prompt (``TRAJECTORY 1`` … ``TRAJECTORY k`` blocks) gets the ranking line
:func:`arenabench.judges.parsing.parse_ranking` reads, best :func:`side_score` first, equal scores
tied with ``=`` (``--bad-rankings N``: the first N partial, the last-ranked number left out).

Faults it can rehearse on purpose (counted from the server's start): ``--fail-first N`` answers
the first N posts with ``--fail-status`` (503: an overloaded or draining replica), ``--reset-first
N`` closes the first N connections without a reply (a reset), ``--delay S`` waits before each
reply (so a kill finds requests in flight). ``--log`` appends one line per
reply written (``<status>``), so a test can count what the server answered across restarts.
It binds loopback addresses only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_BLOCK = re.compile(
    r"<<<(QUERY|TRAJECTORY A|TRAJECTORY B|TRAJECTORY [0-9]+|TRAJECTORY)>>>\n(.*?)\n<<<END \1>>>", re.S
)
PATH = Path(__file__).resolve()  # run it as a script: ``[sys.executable, str(PATH), ...]``


def _u(*parts: str) -> float:
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "little") / float(1 << 64)


def side_score(query: str, text: str) -> float:
    """The stub judge's score of one side: ``1 + 9 * mean`` hash-uniform token values, 2 decimals."""
    tokens = text.split()
    if not tokens:
        return 1.0
    return round(1.0 + 9.0 * sum(_u(query, t) for t in tokens) / len(tokens), 2)


def _blocks(messages: list) -> dict[str, str]:
    user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return dict(_BLOCK.findall(str(user)))


def verdict(messages: list) -> str:
    """The reply text for a chat request carrying the project's pairwise judge prompt."""
    blocks = _blocks(messages)
    query = blocks.get("QUERY", "")
    sa = side_score(query, blocks.get("TRAJECTORY A", ""))
    sb = side_score(query, blocks.get("TRAJECTORY B", ""))
    winner = "A" if sa > sb else "B" if sb > sa else "tie"
    return "Compared token by token.\n" + json.dumps({"score_a": sa, "score_b": sb, "winner": winner})


def point_score(query: str, text: str) -> int:
    """The stub judge's pointwise score of a trajectory: :func:`side_score` rounded to 1-10."""
    return min(10, max(1, round(side_score(query, text))))


def ranking(query: str, texts: list[str]) -> str:
    """The stub judge's ranking line of the listed texts (numbered from 1): best :func:`side_score`
    first, equal scores tied (``=``), equal ones in shown order."""
    scores = [side_score(query, t) for t in texts]
    order = sorted(range(len(texts)), key=lambda n: -scores[n])
    line = str(order[0] + 1)
    for prev, n in zip(order, order[1:], strict=False):
        line += (" = " if scores[n] == scores[prev] else " > ") + str(n + 1)
    return "RANKING: " + line


def reply(messages: list, logprobs: bool = False, bad_score: bool = False) -> tuple[str, dict | None]:
    """The reply text for the project's pairwise, pointwise or ranking prompt (a ``TRAJECTORY``
    block alone: the score line ``{"score": n}``; ``TRAJECTORY 1`` … ``k``: the ranking line;
    ``bad_score``: a malformed score line, a partial ranking), and for a pairwise request asked
    with ``logprobs`` a chat ``logprobs`` object whose label token carries ``P(A) =
    sigmoid(score_a - score_b)`` (what PRC reads)."""
    blocks = _blocks(messages)
    listed = [blocks[f"TRAJECTORY {n}"] for n in range(1, len(blocks) + 1) if f"TRAJECTORY {n}" in blocks]
    if listed:
        line = ranking(blocks.get("QUERY", ""), listed)
        if bad_score:  # partial: the last-ranked number left out
            line = line[: max(line.rfind(" > "), line.rfind(" = "))]
        return "Ranked token by token.\n" + line, None
    if "TRAJECTORY" in blocks and "TRAJECTORY A" not in blocks:
        n = point_score(blocks.get("QUERY", ""), blocks["TRAJECTORY"])
        return "Scored token by token.\n" + (
            f"Score: {n}/10" if bad_score else json.dumps({"score": n})
        ), None
    content = verdict(messages)
    if not logprobs:
        return content, None
    obj = json.loads(content.splitlines()[-1])
    p_a = 1.0 / (1.0 + math.exp(-(obj["score_a"] - obj["score_b"])))
    cut = content.rindex('"winner": "') + len('"winner": "')
    label = content[cut : cut + (3 if obj["winner"] == "tie" else 1)]
    top = [
        {"token": "A", "logprob": math.log(max(p_a, 1e-12))},
        {"token": "B", "logprob": math.log(max(1.0 - p_a, 1e-12))},
    ]
    pieces = [(content[:cut], []), (label, top), (content[cut + len(label) :], [])]
    return content, {"content": [{"token": t, "logprob": 0.0, "top_logprobs": alts} for t, alts in pieces]}


class StubJudgeServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restart binds the same port at once
    request_queue_size = 128

    def __init__(
        self,
        host: str,
        port: int,
        fail_first=0,
        fail_status=503,
        reset_first=0,
        log=None,
        delay_s=0.0,
        bad_scores=0,
        bad_rankings=0,
    ):
        if host not in LOOPBACK:
            raise ValueError(f"the stub judge binds loopback only ({', '.join(LOOPBACK)}); got {host!r}")
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.fail_first, self.fail_status, self.reset_first = fail_first, fail_status, reset_first
        self.log = Path(log) if log else None
        self.delay_s = float(delay_s)
        self.bad_scores = int(bad_scores)  # the first N pointwise replies end in a malformed score line
        self.bad_rankings = int(bad_rankings)  # the first N ranking replies partial
        self.scored = 0
        self.ranked = 0
        self.posts = 0
        self.lock = threading.Lock()
        super().__init__((host, port), _Handler)

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a reset, a timeout) is routine here: no traceback on stderr."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | TimeoutError):
            super().handle_error(request, client_address)

    def record(self, status: int) -> None:
        if self.log is not None:
            with self.lock, self.log.open("a") as f:
                f.write(f"{status}\n")


class _Handler(BaseHTTPRequestHandler):
    server: StubJudgeServer
    protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's server: a kill resets open connections

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path in ("/health", "/v1/models"):
            self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        srv = self.server
        with srv.lock:
            srv.posts += 1
            n = srv.posts
        if n <= srv.reset_first:  # a reset: RST (linger 0) without a status line
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "not found"}})
        if n <= srv.reset_first + srv.fail_first:
            return self._send(srv.fail_status, {"error": {"message": "stub: failing on purpose"}})
        if srv.delay_s:
            time.sleep(srv.delay_s)
        try:
            body = json.loads(raw)
            blocks = _blocks(body["messages"])
            bad = False
            if "TRAJECTORY 1" in blocks:
                with srv.lock:
                    srv.ranked += 1
                    bad = srv.ranked <= srv.bad_rankings
            elif "TRAJECTORY A" not in blocks:
                with srv.lock:
                    srv.scored += 1
                    bad = srv.scored <= srv.bad_scores
            content, logprobs = reply(body["messages"], bool(body.get("logprobs")), bad)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return self._send(400, {"error": {"message": f"bad request: {type(exc).__name__}"}})
        choice = {"index": 0, "message": {"role": "assistant", "content": content}}
        if logprobs is not None:
            choice["logprobs"] = logprobs
        self._send(
            200,
            {
                "object": "chat.completion",
                "model": body.get("model", "stub"),
                "choices": [choice],
                "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": len(content) // 4},
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.server.record(status)


class ServerProcess:
    """The stub judge as a child process on a fixed loopback port: :meth:`start`, :meth:`kill`
    (SIGKILL: open connections reset, new ones refused) and start again on the same port."""

    def __init__(self, port: int, log: str | Path | None = None, extra: tuple[str, ...] = ()):
        self.port, self.log, self.extra = int(port), log, tuple(extra)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout_s: float = 30.0) -> None:
        if self.proc is not None:
            raise RuntimeError("the stub judge is already running")
        cmd = [sys.executable, str(PATH), "--port", str(self.port), *self.extra]
        if self.log:
            cmd += ["--log", str(self.log)]
        # stderr to a file, not a pipe: a pipe nobody reads fills up and freezes the server
        err_path = Path(str(self.log) + ".stderr") if self.log else None
        err = err_path.open("ab") if err_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        finally:
            if err_path:
                err.close()
        self.starts += 1
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # bounded: ready, or died, or the timeout
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                tail = err_path.read_text(errors="replace")[-2000:] if err_path else ""
                raise RuntimeError(f"the stub judge exited at start ({code}):\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1.0) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the stub judge was not healthy within {timeout_s} s")

    def kill(self) -> None:
        """SIGKILL and reap (no-op when not running)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def free_port() -> int:
    """A free loopback TCP port *below* the kernel's ephemeral range. A port the OS picks from that
    range (``bind(0)``) can later be taken by an outgoing connection -- even a client's own
    connect to the dead server (a TCP self-connect) -- and a restart on it then fails."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):  # bounded
        port = rng.randrange(max(1024, low - 12000), max(1025, low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # every probe taken: the OS's pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", choices=LOOPBACK)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-status", type=int, default=503)
    ap.add_argument("--reset-first", type=int, default=0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each reply")
    ap.add_argument("--bad-scores", type=int, default=0, help="the first N pointwise replies malformed")
    ap.add_argument("--bad-rankings", type=int, default=0, help="the first N ranking replies partial")
    a = ap.parse_args(argv)
    srv = StubJudgeServer(
        a.host,
        a.port,
        a.fail_first,
        a.fail_status,
        a.reset_first,
        a.log,
        a.delay,
        a.bad_scores,
        a.bad_rankings,
    )
    print(f"stub judge on http://{a.host}:{a.port}", flush=True)
    srv.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
