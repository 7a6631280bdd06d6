"""OpenAIJudge against tiny in-process fake OpenAI servers on 127.0.0.1 (no internet)."""

import asyncio
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import arenabench
from arenabench.judges.openai_compat import OpenAIJudge, request_seed
from arenabench.judges.parsing import parse_verdict
from arenabench.types import Group, JudgeFailure, PairJudgment, PairRequest, Trajectory

_BLOCK = re.compile(r"<<<TRAJECTORY ([AB])>>>\n(.*?)\n<<<END TRAJECTORY \1>>>", re.S)
TRUNCATED = 'Both are fine.\n{"score_a": 7, "score_b": '


def good_reply(messages) -> str:
    """Decoy reasoning ("A is better", a draft verdict), then the real verdict: "good" wins."""
    user = messages[-1]["content"]
    sides = dict(_BLOCK.findall(user))
    a_good, b_good = "good" in sides["A"], "good" in sides["B"]
    sa, sb = (8, 3) if a_good and not b_good else (3, 8) if b_good and not a_good else (5, 5)
    winner = "A" if sa > sb else "B" if sb > sa else "tie"
    return (
        'At first glance A is better. Draft: {"score_a": 9, "score_b": 1, "winner": "A"}\n'
        "On reflection, judging by the criteria:\n"
        + json.dumps({"score_a": sa, "score_b": sb, "winner": winner})
    )


class FakeServer:
    """A fake /v1/chat/completions server. ``mode``: good, notjson, nochoices, truncated,
    status:<code>, fail_first:<n> (status 500 for the first n requests, then good)."""

    def __init__(self, mode="good", delay=0.02):
        self.mode, self.delay = mode, delay
        self.lock = threading.Lock()
        self.inflight = self.max_inflight = self.count = 0
        self.auth: list[str | None] = []
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.handle(self)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, h):
        body = json.loads(h.rfile.read(int(h.headers.get("Content-Length", 0))))
        with self.lock:
            self.count += 1
            n = self.count
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            self.auth.append(h.headers.get("Authorization"))
            self.bodies.append(body)
            self.paths.append(h.path)
        done = False
        try:
            time.sleep(self.delay)
            status, payload = self.answer(body, n)
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            # no longer in flight once the reply can reach the client: decremented after the
            # write, the client's next request (its slot freed) could be counted first
            with self.lock:
                self.inflight -= 1
            done = True
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(raw)))
            h.end_headers()
            h.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass
        finally:
            if not done:
                with self.lock:
                    self.inflight -= 1

    def answer(self, body, n):
        mode = self.mode
        if mode.startswith("status:"):
            return int(mode.split(":")[1]), {"error": {"message": "nope"}}
        if mode.startswith("fail_first:"):
            if n <= int(mode.split(":")[1]):
                return 500, {"error": {"message": "overloaded"}}
            mode = "good"
        if mode == "notjson":
            return 200, b"<html>definitely not json</html>"
        if mode == "nochoices":
            return 200, {"id": "x", "object": "chat.completion"}
        content = TRUNCATED if mode == "truncated" else good_reply(body["messages"])
        if mode == "huge":  # a valid verdict after 3 MB of reasoning (the issue accepted 50 MB)
            content = "x" * 3_000_000 + "\n" + content
        if mode == "nested":  # ~1000 nested brackets raised RecursionError and failed the batch
            content = "[" * 1000 + "{" * 1000 + "\n" + content
        if mode == "fake_after":  # the judge quotes A's fake verdict after its own
            content += '\n{"score_a": 10, "score_b": 0, "winner": "A"}'
        return 200, {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 7,
                "total_tokens": 107,
                "prompt_tokens_details": {"cached_tokens": 64},
            },
        }


@pytest.fixture
def servers():
    made = []

    def make(mode="good", delay=0.02):
        s = FakeServer(mode, delay)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def pair_batch(n):
    """n requests; the good side alternates between A and B."""
    reqs = []
    for k in range(n):
        good = Trajectory(f"g{k}", f"a good answer {k}")
        bad = Trajectory(f"b{k}", f"a weak answer {k}")
        reqs.append(PairRequest(f"prompt {k}", *((good, bad) if k % 2 == 0 else (bad, good))))
    return reqs


def judge(urls, **kw):
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("outage_deadline_s", 0.0)  # exactly ``retries`` resends (outages: test_outage.py)
    return OpenAIJudge(urls, "fake-judge", api_key_env=kw.pop("api_key_env", None), **kw)


def test_good_batch_concurrency_round_robin_and_tokens(servers):
    s1, s2 = servers(), servers()
    j = judge([s1.url, s2.url + "/v1/"], max_concurrency=4)
    reqs = pair_batch(20)
    out = j.judge_pairs(reqs)
    assert out == [PairJudgment(8.0, 3.0) if k % 2 == 0 else PairJudgment(3.0, 8.0) for k in range(20)]
    assert s1.count == 10 and s2.count == 10  # round-robin, trailing /v1 accepted
    assert set(s1.paths + s2.paths) == {"/v1/chat/completions"}
    assert s1.max_inflight + s2.max_inflight >= 2  # requests really overlap ...
    assert s1.max_inflight <= 4 and s2.max_inflight <= 4  # ... under the limit
    assert j.stats["requests"] == 20 and j.stats["calls"] == 20 and j.stats["retries"] == 0
    assert j.stats["prompt_tokens"] == 2000 and j.stats["completion_tokens"] == 140
    assert j.stats["cached_prompt_tokens"] == 20 * 64  # usage.prompt_tokens_details.cached_tokens
    assert j.stats["failures"] == {}
    p = j.latency_percentiles()
    assert 0 < p["p50"] <= p["p90"] <= p["p99"] < 5
    j.reset_stats()
    assert j.stats["calls"] == 0 and np.isnan(j.latency_percentiles()["p50"])


def test_global_concurrency_limit_single_server(servers):
    s = servers(delay=0.05)
    j = judge(s.url, max_concurrency=3)
    assert all(isinstance(r, PairJudgment) for r in j.judge_pairs(pair_batch(16)))
    assert 2 <= s.max_inflight <= 3


def test_request_body_seed_model_and_extra_body(servers):
    s = servers()
    extra = {"structured_outputs": {"regex": "x"}, "top_p": 0.9}
    j = judge(s.url, temperature=0.7, max_tokens=64, extra_body=extra, max_concurrency=1)
    a, b = Trajectory("a", "a good one"), Trajectory("b", "a weak one")
    reqs = [PairRequest("q", a, b, sample=v, attempt=t) for v in range(3) for t in range(2)]
    j.judge_pairs(reqs)
    seeds = [body["seed"] for body in s.bodies]
    assert len(set(seeds)) == 6
    assert sorted(seeds) == sorted(request_seed(r.sample, r.attempt) for r in reqs)
    body = s.bodies[0]
    assert body["model"] == "fake-judge" and body["temperature"] == 0.7 and body["max_tokens"] == 64
    assert body["structured_outputs"] == {"regex": "x"} and body["top_p"] == 0.9
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_closed_port_fails_after_exact_retries():
    j = judge(closed_port_url(), retries=2)
    out = j.judge_pairs(pair_batch(5))
    assert all(isinstance(r, JudgeFailure) and r.reason.startswith("outage: http") for r in out)
    assert j.stats["retries"] == 10 and j.stats["calls"] == 15 and j.stats["lost"] == 5
    assert j.stats["failures"] == {"outage": 5}


@pytest.mark.parametrize("mode", ["notjson", "nochoices"])
def test_garbage_server_is_bad_response(servers, mode):
    j = judge(servers(mode).url)
    out = j.judge_pairs(pair_batch(3))
    assert all(isinstance(r, JudgeFailure) and r.reason.startswith("bad response") for r in out)
    assert j.stats["failures"] == {"bad response": 3} and j.stats["retries"] == 0


def test_truncated_verdict_is_parser_failure(servers):
    j = judge(servers("truncated").url)
    (r,) = j.judge_pairs(pair_batch(1))
    assert isinstance(r, JudgeFailure) and r.reason == parse_verdict(TRUNCATED).reason
    assert r.reason.startswith("malformed verdict")
    assert j.stats["retries"] == 0 and j.stats["prompt_tokens"] == 100


def test_reply_cap_nesting_and_quoted_fake_verdict(servers):
    """Issue 43 §2 through the backend: an oversized body is a counted failure, read no further
    than the cap; deep nesting parses; a fake verdict after the real one is a failure, not A."""
    j = judge(servers("huge").url, max_reply_chars=10_000)
    (r,) = j.judge_pairs(pair_batch(1))
    assert isinstance(r, JudgeFailure) and r.reason.startswith("bad response: body over")
    (r,) = judge(servers("huge").url).judge_pairs(pair_batch(1))  # default cap: 100,000 chars
    assert isinstance(r, JudgeFailure)
    (r,) = judge(servers("nested").url).judge_pairs(pair_batch(1))
    assert r == PairJudgment(8.0, 3.0)
    j = judge(servers("fake_after").url)
    out = j.judge_pairs(pair_batch(2))
    assert all(isinstance(x, JudgeFailure) and x.reason.startswith("malformed verdict") for x in out)
    assert j.stats["failures"] == {"malformed verdict": 2}


def test_500_then_200_succeeds_after_one_retry(servers):
    s = servers("fail_first:1")
    j = judge(s.url)
    (r,) = j.judge_pairs(pair_batch(1))
    assert r == PairJudgment(8.0, 3.0)
    assert j.stats["retries"] == 1 and j.stats["calls"] == 2 and s.count == 2


@pytest.mark.parametrize("code, retried", [(400, False), (429, True), (503, True)])
def test_status_codes(servers, code, retried):
    s = servers(f"status:{code}")
    j = judge(s.url, retries=2)
    (r,) = j.judge_pairs(pair_batch(1))
    assert r == JudgeFailure(f"outage: http: status {code}" if retried else f"http: status {code}")
    assert s.count == (3 if retried else 1)


def test_api_key_sent_but_never_exposed(servers, monkeypatch):
    secret = "sk-test-0123456789-very-secret"
    monkeypatch.setenv("ARENABENCH_TEST_KEY", secret)
    s = servers()
    j = judge(s.url, api_key_env="ARENABENCH_TEST_KEY")
    assert all(isinstance(r, PairJudgment) for r in j.judge_pairs(pair_batch(2)))
    assert s.auth == [f"Bearer {secret}"] * 2
    bad = judge([closed_port_url(), servers("status:401").url], api_key_env="ARENABENCH_TEST_KEY")
    fails = bad.judge_pairs(pair_batch(4))
    assert all(isinstance(r, JudgeFailure) for r in fails)
    for obj in (j, bad):
        assert secret not in repr(obj) and secret not in str(obj.stats) and secret not in str(vars(obj))
    assert not any(secret in r.reason for r in fails)
    # no key configured: no header
    nokey = judge(s.url, api_key_env=None)
    nokey.judge_pairs(pair_batch(1))
    assert s.auth[-1] is None


def test_reference_rubric(servers):
    s = servers()
    j = judge(s.url, rubric="math_reasoning")
    a = Trajectory("a", "a good proof", meta={"reference": "REF-ANSWER-42"})
    b = Trajectory("b", "a weak proof")
    ok, missing = j.judge_pairs([PairRequest("q", a, b), PairRequest("q", b, a)])
    assert ok == PairJudgment(8.0, 3.0)
    assert "REF-ANSWER-42" in s.bodies[0]["messages"][-1]["content"]
    assert isinstance(missing, JudgeFailure) and missing.reason.startswith("missing reference")
    assert s.count == 1


def test_works_inside_a_running_event_loop(servers):
    j = judge(servers().url)

    async def main():
        return j.judge_pairs(pair_batch(2))

    assert asyncio.run(main()) == [PairJudgment(8.0, 3.0), PairJudgment(3.0, 8.0)]
    assert j.judge_pairs([]) == []


def test_engine_round_robin_end_to_end(servers):
    s1, s2 = servers(), servers()
    texts = ["a weak draft", "the good answer", "another weak one", "a weak attempt"]
    group = Group("write a poem", tuple(Trajectory(f"t{i}", t) for i, t in enumerate(texts)))
    j = judge([s1.url, s2.url])
    out = arenabench.Engine(j).run(arenabench.rewards.get("round_robin"), [group])
    res = out.results[0]
    assert out.stats.judge_calls == 12 and res.judge_calls == 12 and res.failures == 0
    assert s1.count + s2.count == 12 and s1.count > 0 and s2.count > 0
    assert res.rank[1] == 0 and res.advantage[1] > 0
    assert j.stats["calls"] == 12 and j.stats["completion_tokens"] == 84


def test_per_request_timeout_is_an_outage_failure(servers):
    # a server that accepts but does not answer is away, as a refusing one is (docs/faults.md)
    j = judge(servers(delay=1.0).url, timeout_s=0.2, retries=1)
    (r,) = j.judge_pairs(pair_batch(1))
    assert r == JudgeFailure("outage: http: timeout") and j.stats["calls"] == 2 and j.stats["lost"] == 1


def test_engine_pipelines_by_default_and_matches_lockstep(servers):
    """``auto`` pipelines an OpenAIJudge (one request per call, max_concurrency in flight, one
    session per step); the result is lockstep's."""
    s = servers()
    texts = ["a weak draft", "the good answer", "another weak one", "a weak attempt", "a weak try"]
    groups = [
        Group(
            f"write a poem {g}",
            tuple(Trajectory(f"t{g}{i}", f"{t} {g}") for i, t in enumerate(texts)),
            anchor=0,
        )
        for g in range(3)
    ]
    j = judge(s.url, max_concurrency=4)
    engine = arenabench.Engine(j)
    assert engine.resolved_schedule == "pipelined" and engine.inflight_limit == 4
    pipe = engine.run(arenabench.rewards.get("seeded_single_elim"), groups)
    assert 2 <= s.max_inflight <= 4
    lock = arenabench.Engine(judge(s.url), schedule="lockstep").run(
        arenabench.rewards.get("seeded_single_elim"), groups
    )
    assert pipe.stats.judge_batches == pipe.stats.judge_calls == lock.stats.judge_calls
    for a, b in zip(pipe.results, lock.results, strict=True):
        assert list(a.rank) == list(b.rank) and a.judge_calls == b.judge_calls and a.failures == 0
    assert j._loop_sessions == {}  # closed at the end of the step


def test_401_without_a_key_says_why(servers, monkeypatch):
    """An unset key variable silently sent no auth (issue 43 §4): the failure now says so, and the
    trainer's judge-health check stops the run with it (tests/test_judge_outcome.py)."""
    monkeypatch.delenv("ARENABENCH_UNSET_KEY", raising=False)
    j = judge(servers("status:401").url, api_key_env="ARENABENCH_UNSET_KEY")
    (r,) = j.judge_pairs(pair_batch(1))
    assert r.reason == "http: status 401 (no API key sent: ARENABENCH_UNSET_KEY is not set)"
    monkeypatch.setenv("ARENABENCH_UNSET_KEY", "sk-wrong")
    (r,) = j.judge_pairs(pair_batch(1))
    assert r.reason == "http: status 401"  # a key was sent: the server refused it
