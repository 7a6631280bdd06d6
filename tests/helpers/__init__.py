"""Helpers shared by test files in several folders (``from helpers import ROOT``).

tests/ has no ``__init__.py``: pytest puts tests/ on ``sys.path`` (rootdir-relative "prepend"
imports), which is what makes ``from conftest import make_group`` and ``from helpers import ...``
work from any subfolder. So every test file needs a basename unique across tests/.
tests/conftest.py must not import this package: tests/verl has its own ``helpers`` module and runs
in the verl venv with tests/conftest.py loaded first.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
CONF = ROOT / "conf"


def compose_cfg(*overrides, config_name: str = "train") -> dict:
    """conf/train.yaml composed with ``overrides`` and resolved to a plain dict, as the CLI does."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return OmegaConf.to_container(compose(config_name, overrides=list(overrides)), resolve=True)


class Scripted:
    """A pairwise judge that answers from a table ``{(text of A, text of B): (score_a, score_b)}``
    and fails any request it has no entry for (exact fixtures for tie and failure rules)."""

    def __init__(self, table):
        self.table = table

    def judge_pairs(self, requests):
        from arenabench.types import JudgeFailure, PairJudgment

        return [
            PairJudgment(*self.table[(r.a.text, r.b.text)])
            if (r.a.text, r.b.text) in self.table
            else JudgeFailure("not scripted")
            for r in requests
        ]


def drive_play(constructor, group, answer, seed: int = 0):
    """Play a listwise ``constructor`` on ``group`` without an engine (issue 41: until the engine
    runs ``Rank`` asks), answering each ``Rank`` ask with ``answer(ask)``: a ``RankJudgment``, or
    None for a request that failed after the retries (every vote alike). Votes are folded as the
    engine folds them. Returns (the finalized ``ConstructorResult``, judge calls — one per vote —
    waves and failures counted; the waves of asks, in order)."""
    import numpy as np

    from arenabench.types import Accounting, RankResult

    acc, waves = Accounting(), []
    gen = constructor.play(group, np.random.default_rng(seed))
    try:
        asks = next(gen)
        while True:
            waves.append(asks)
            acc.waves += 1
            results = []
            for ask in asks:
                acc.judge_calls += ask.votes
                reply = answer(ask)
                if reply is None:
                    acc.failures += ask.votes
                    results.append(RankResult(ask.items, (float("nan"),) * len(ask.items), failed=True))
                else:
                    results.append(RankResult(ask.items, reply.scores, samples=[reply.scores] * ask.votes))
            asks = gen.send(results)
    except StopIteration as stop:
        outcome = stop.value
    return constructor.finalize(group, outcome, acc), waves


@contextlib.contextmanager
def stub_servers(tmp_path):
    """A maker of served stub judges (``judges/stub_server.py``), each a process on a free loopback
    port logging its replies under ``tmp_path``, started by ``make(*extra args)``; all killed on
    exit. A test file's fixture: ``with stub_servers(tmp_path) as make: yield make``."""
    from arenabench.judges.stub_server import ServerProcess, free_port

    made = []

    def make(*extra):
        srv = ServerProcess(free_port(), log=tmp_path / f"answered{len(made)}.log", extra=extra)
        made.append(srv)
        srv.start()
        return srv

    try:
        yield make
    finally:
        for srv in made:
            srv.kill()


def stub_judge(srv, **kw):
    """An ``OpenAIJudge`` on the served stub judge ``srv`` (no API key, fast resends)."""
    from arenabench.judges.openai_compat import OpenAIJudge

    return OpenAIJudge(srv.url, "stub", api_key_env=None, backoff_s=0.01, **kw)
