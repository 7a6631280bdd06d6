"""Helpers shared by test files in several folders (``from helpers import ROOT``).

tests/ has no ``__init__.py``: pytest puts tests/ on ``sys.path`` (rootdir-relative "prepend"
imports), which is what makes ``from conftest import make_group`` and ``from helpers import ...``
work from any subfolder. So every test file needs a basename unique across tests/.
tests/conftest.py must not import this package: tests/verl has its own ``helpers`` module and runs
in the verl venv with tests/conftest.py loaded first.
"""

from __future__ import annotations

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
