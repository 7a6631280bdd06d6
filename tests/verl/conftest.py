"""tests/verl run only in the verl venv (``.venv-verl/bin/python -m pytest tests/verl``); in any
other venv this folder collects nothing (the safety net behind ``pytest --ignore=tests/verl``)."""

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _have_verl() -> bool:
    # "verl" alone is found even without verl: this folder, as a namespace package
    try:
        return importlib.util.find_spec("verl.protocol") is not None
    except ModuleNotFoundError:
        return False


if not _have_verl():
    collect_ignore_glob = ["test_*.py"]


def pytest_collection_modifyitems(items):
    """Every test in this folder is marked ``verl`` (``-m "not verl"`` / ``-m verl`` select by it)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.verl)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """The locally built tokenizer + 2-layer Llama + toy parquet files (``ARENABENCH_SMOKE_DIR``)."""
    import torch

    from arenabench.trainers.verl import tiny_model

    torch.set_num_threads(1)
    return tiny_model.build_all(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def tokenizer(tiny_dir):
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(tiny_dir / "model"))


@pytest.fixture
def smoke_env(tiny_dir, monkeypatch):
    monkeypatch.setenv("ARENABENCH_SMOKE_DIR", str(tiny_dir))
    return tiny_dir
