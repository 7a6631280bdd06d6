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
