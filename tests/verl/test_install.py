"""The verl venv: CPU torch kept, the two packages verl imports but does not declare present."""

import importlib
import importlib.metadata as md
import re

import torch


def test_verl_extra_keeps_the_cpu_torch():
    assert md.version("verl") == "0.9.1"
    assert md.version("torch") == "2.13.0+cpu"
    assert torch.version.cuda is None and not torch.cuda.is_available()
    names = {d.metadata["Name"].lower() for d in md.distributions()}
    assert not {n for n in names if n.startswith("nvidia-")}  # no CUDA runtime wheels came in
    assert not names & {"torchvision", "torchaudio", "triton", "vllm"}


def _base(req: str) -> str:
    return re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower()


def test_cachetools_and_transferqueue_are_needed_and_installed():
    reqs = md.requires("verl") or []
    base = {_base(r) for r in reqs if "extra ==" not in r}
    core = {_base(r) for r in reqs if 'extra == "verl-core"' in r}
    # verl imports both (rollout router, the v1 trainer) but lists them only in its verl-core
    # extra, which also pulls torchcodec, nvtx and qwen_vl_utils: we install the two by name
    assert {"cachetools", "transferqueue"} <= core - base
    assert "torchcodec" in core
    importlib.import_module("cachetools")
    importlib.import_module("transfer_queue")
    importlib.import_module("verl.workers.rollout.router")  # `from cachetools import LRUCache`
    importlib.import_module("verl.trainer.ppo.v1")  # `import transfer_queue as tq`
