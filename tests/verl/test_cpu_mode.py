"""The pieces of ``trainer.device=cpu`` one at a time (the whole loop: test_cpu_e2e.py)."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import arenabench
from arenabench.trainers.verl import cpu, launch

REPO = Path(arenabench.__file__).resolve().parents[1]


def test_the_cpu_mode_refuses_another_verl():
    cpu.check_verl_version(cpu.VERL_VERSION)
    with pytest.raises(RuntimeError, match=r"support verl==0\.9\.1 only; installed: verl==0\.9\.2"):
        cpu.check_verl_version("0.9.2")


def test_one_override_away_and_the_users_overrides_win(smoke_env):
    gpu = launch.compose("smoke")
    cfg = launch.compose("smoke", ["trainer.device=cpu", "ray_kwargs.ray_init.num_cpus=4"])
    assert gpu.actor_rollout_ref.rollout.name == "vllm" and not launch.is_cpu(gpu)
    arr = cfg.actor_rollout_ref
    assert (arr.rollout.name, arr.rollout.agent.default_agent_loop) == ("hf", "hf_single_turn_agent")
    assert (arr.actor.strategy, arr.ref.strategy) == ("fsdp2", "fsdp2")
    assert arr.actor.fsdp_config.mixed_precision.param_dtype == "fp32"
    assert arr.model.override_config.attn_implementation == "eager"
    assert cfg.ray_kwargs.ray_init.num_gpus == 1 and cfg.ray_kwargs.ray_init.num_cpus == 4  # user's
    assert cfg.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
    # everything else is the smoke config a GPU run uses
    same = (cfg.data.train_batch_size, arr.rollout.n, cfg.arenabench.reward.name, cfg.trainer.project_name)
    assert same == (2, 4, "seeded_single_elim", "verl_smoke")
    assert launch.verl_validate(cfg) is None and launch.check_wiring(cfg) == []
    env = launch.worker_env(cfg, {"MLFLOW_RUN_ID": "r"})
    assert env["VERL_PLATFORM"] == "cpu" and env["MLFLOW_RUN_ID"] == "r"
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"{cpu.PLUGIN_MODULE},{launch.ADV_MODULE}"
    assert dict(cfg.ray_kwargs.ray_init.runtime_env.env_vars)["VERL_PLATFORM"] == "cpu"


def test_the_plugin_registers_through_verls_own_extension_points(tmp_path):
    """In a fresh process, as a Ray worker gets it: only the env vars, then ``import verl``."""
    probe = textwrap.dedent(
        """
        import json, os
        import torch
        import torch.distributed as dist
        import verl  # imports the plugin (VERL_USE_EXTERNAL_MODULES)
        from verl.plugin.platform import get_platform
        from verl.utils.device import get_device_name, get_torch_device, get_nccl_backend
        from verl.utils.flops_counter import get_device_flops
        from verl.workers.engine.base import EngineRegistry
        from verl.workers.engine.fsdp import transformer_impl as fsdp
        from verl.workers.rollout.base import get_rollout_class
        from verl.workers.rollout.replica import get_rollout_replica_class
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PROBE_PORT"])
        dist.init_process_group(f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}", rank=0, world_size=1)
        dev = get_torch_device()
        print(json.dumps({
            "platform": get_platform().device_name,
            "backend": dist.get_backend(),
            "reserved": dev.memory_reserved(),
            "device": dev.get_device_name(),
            "flops": get_device_flops(),
            "lm": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
            "value": EngineRegistry.get_engine_cls("value_model", "fsdp").__name__,
            "pinned": fsdp.CPUOffloadPolicy(pin_memory=True).pin_memory,
            "adapter": get_rollout_class("hf").__name__,
            "replica": get_rollout_replica_class("hf").__name__,
            "agent_loop": _agent_loop_registry["hf_single_turn_agent"]["_target_"],
        }))
        """
    )
    env = {
        **os.environ,
        **cpu.env(),
        "PYTHONPATH": str(REPO),
        "PROBE_PORT": str(29500 + os.getpid() % 1000),
    }
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {
        "platform": "cpu",
        "backend": "cpu:gloo",  # "cpu:gloo,cpu:gloo" narrowed to what torch accepts
        "reserved": 0,
        "device": "CPU",
        "flops": 0.448,  # TFLOPS: verl's own entry for "CPU" (what it uses for torch.cpu)
        "lm": "FSDPEngineWithLMHead",
        "value": "FSDPEngineWithValueHead",
        "pinned": False,
        "adapter": "HFServerAdapter",
        "replica": "HFReplica",
        "agent_loop": "arenabench.trainers.verl.hf_rollout.SessionAgentLoop",
    }


def test_a_gpu_run_gets_the_hf_backend_only_and_the_old_plugin_name_still_works(tmp_path):
    """Without ``VERL_PLATFORM=cpu`` (a GPU run with ``rollout.name=hf``) the plugin registers the
    hf backend and leaves verl's platform, engines and FSDP offload alone; listed under its old
    name ``...cpu.plugin`` it does the same, with a warning naming the new one."""
    probe = textwrap.dedent(
        """
        import json, warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as seen:
            import verl  # imports the plugin (VERL_USE_EXTERNAL_MODULES)
        from verl.workers.engine.base import EngineRegistry
        from verl.workers.engine.fsdp import transformer_impl as fsdp
        from verl.workers.rollout.base import get_rollout_class
        from verl.workers.rollout.replica import get_rollout_replica_class
        print(json.dumps({
            "cpu_engines": "cpu" in EngineRegistry._engines["language_model"]["fsdp2"],
            "offload_patched": getattr(fsdp.CPUOffloadPolicy, "_arenabench_unpinned", False),
            "adapter": get_rollout_class("hf").__name__,
            "replica": get_rollout_replica_class("hf").__name__,
            "warned": [str(w.message) for w in seen if "arenabench.trainers.verl.plugin" in str(w.message)],
        }))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    env.update(PYTHONPATH=str(REPO), VERL_USE_EXTERNAL_MODULES="arenabench.trainers.verl.cpu.plugin")
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got.pop("warned") == [
        "arenabench.trainers.verl.cpu.plugin is now arenabench.trainers.verl.plugin (it serves GPU runs "
        "too); the old name will be removed"
    ]
    assert got == {
        "cpu_engines": False,
        "offload_patched": False,
        "adapter": "HFServerAdapter",
        "replica": "HFReplica",
    }


def test_hf_on_a_gpu_is_one_override_away(smoke_env):
    """``actor_rollout_ref.rollout.name=hf`` without ``trainer.device=cpu``: the hf backend's
    overrides and plugin, none of the CPU mode's (no CPU platform, FSDP and dtypes as configured)."""
    gpu = launch.compose("smoke")
    cfg = launch.compose("smoke", ["actor_rollout_ref.rollout.name=hf"])
    arr = cfg.actor_rollout_ref
    assert not launch.is_cpu(cfg) and launch.uses_hf(cfg) and not launch.uses_hf(gpu)
    assert (arr.rollout.name, arr.rollout.agent.default_agent_loop) == ("hf", "hf_single_turn_agent")
    assert arr.rollout.calculate_log_probs is True and arr.rollout.tensor_model_parallel_size == 1
    assert arr.rollout.dtype == "bfloat16"  # what the server runs in on the GPU (hf_rollout.placement)
    assert arr.actor.strategy == gpu.actor_rollout_ref.actor.strategy  # the CPU mode's fsdp2 is not forced
    assert "mixed_precision" not in arr.actor.fsdp_config or arr.actor.fsdp_config.mixed_precision is None
    assert cfg.trainer.n_gpus_per_node == gpu.trainer.n_gpus_per_node
    assert launch.verl_validate(cfg) is None and launch.check_wiring(cfg) == []
    env = launch.worker_env(cfg, {})
    assert "VERL_PLATFORM" not in env
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"{cpu.PLUGIN_MODULE},{launch.ADV_MODULE}"
    assert cpu.PLUGIN_MODULE == "arenabench.trainers.verl.plugin"
    # the user's override wins over the mode's, as with the CPU mode
    back = launch.compose(
        "smoke", ["actor_rollout_ref.rollout.name=hf", "actor_rollout_ref.rollout.dtype=float32"]
    )
    assert back.actor_rollout_ref.rollout.dtype == "float32"


def test_the_hf_server_picks_the_actor_workers_gpu_when_it_sees_one(monkeypatch):
    """The device query is mocked (no GPU here): with CUDA visible the server's model goes to the
    GPU Ray gave the replica's actor worker, in ``rollout.dtype``; without, to the CPU in fp32."""
    from arenabench.trainers.verl import hf_rollout

    cfg = SimpleNamespace(dtype="bfloat16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hf_rollout.placement(cfg, "0") == (torch.device("cpu"), torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hf_rollout.placement(cfg, "3") == (torch.device("cuda", 3), torch.bfloat16)
    assert hf_rollout.placement(cfg, None) == (torch.device("cuda", 0), torch.bfloat16)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")  # Ray numbers the GPUs by these entries
    assert hf_rollout.placement(SimpleNamespace(dtype="float32"), "6") == (
        torch.device("cuda", 1),
        torch.float32,
    )
    with pytest.raises(ValueError, match="unknown rollout.dtype 'int8'"):
        hf_rollout.placement(SimpleNamespace(dtype="int8"), "6")


@pytest.fixture
def server(tiny_dir):
    """The hf rollout server's class, without Ray (its methods are plain async functions)."""
    from arenabench.trainers.verl.hf_rollout import HFServer

    config = SimpleNamespace(max_model_len=128, prompt_length=64, response_length=12, seed=0)
    return HFServer(config, SimpleNamespace(path=str(tiny_dir / "model")))


PROMPT = [5, 17, 42, 9, 60]
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def generate(server, session):
    return asyncio.run(server.generate(PROMPT, dict(SAMPLING), request_id="r", session=session))


def test_server_log_probs_are_the_models_and_sessions_have_their_own_stream(server):
    a, a_again, b = generate(server, 0), generate(server, 0), generate(server, 1)
    assert a.token_ids == a_again.token_ids and a.log_probs == a_again.log_probs  # same session, same tokens
    assert a.token_ids != b.token_ids
    assert 1 <= len(a.token_ids) <= 12 and a.stop_reason == "completed"
    # log_softmax of the model's logits for the sampled tokens, from one full forward pass
    ids = torch.tensor([PROMPT + a.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(server.model(ids).logits[0].float(), -1)
    want = [float(logp[len(PROMPT) - 1 + i, t]) for i, t in enumerate(a.token_ids)]
    assert a.log_probs == pytest.approx(want, abs=1e-5)


def test_server_loads_weights_by_name_and_refuses_strangers(server):
    state = {k: v.clone() for k, v in server.model.state_dict().items()}
    with pytest.raises(KeyError, match="weights the model does not have"):
        asyncio.run(server.update_weights({"lm_head.wieght": state["lm_head.weight"]}))
    with pytest.raises(ValueError, match="has shape"):
        asyncio.run(server.update_weights({"lm_head.weight": state["lm_head.weight"][:3]}))
    assert server.weight_updates == 0 and server.global_steps is None
    name = "lm_head.weight"
    assert asyncio.run(server.update_weights({name: state[name] * 2.0}, global_steps=1)) == 1
    assert (server.weight_updates, server.global_steps) == (1, 1)
    assert torch.equal(server.model.lm_head.weight, state[name] * 2.0)
