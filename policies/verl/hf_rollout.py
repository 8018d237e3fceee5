"""`hf`: a verl rollout backend that generates with Hugging Face `transformers` (CPU or GPU).

verl 0.9.1's trainers only use server rollouts (vLLM/SGLang/TRT-LLM), none of which installs on a CPU
machine (VERL.md §8 wall 8). This module plugs a third one in through verl's own registries, from the
plugin, without touching site-packages:

- `RolloutReplicaRegistry.register("hf", ...)` (`verl/workers/rollout/replica.py:312`) -> `HFReplica`,
  whose `launch_servers` starts one Ray actor per node (`HFRolloutServer`) holding the model. verl's
  `LLMServerClient.generate` (`verl/workers/rollout/llm_server.py:150`) calls its `generate`.
- `_ROLLOUT_REGISTRY[("hf", "async")]` (`verl/workers/rollout/base.py:89`) -> `HFServerAdapter`, the
  worker-side `BaseRollout` that verl's fused actor worker builds (`verl/workers/engine_workers.py:667`)
  and feeds the actor's weights every step (`engine_workers.py:800-806`, naive checkpoint engine). The
  adapter ships them to the server actor, which loads them: rollouts always come from the weights verl's
  actor produced.

Sampling: temperature, top_p, top_k (<=0 = off, as in vLLM), stop at EOS or the response budget, per-token
log-probs of the sampled tokens under the temperature-scaled distribution (what verl's actor recomputes).
Seeds: each request's generator is seeded from (rollout.seed, replica, the weights' global step, prompt, the
prompt's occurrence number since the last weight update), so a step's groups are reproducible up to the
order of samples inside a group, however the async requests interleave.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from typing import Any
from collections.abc import Generator, Iterable

import ray
import torch

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from policies.verl.rollout_seeds import RequestSeeds

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "hf"
SERVER_PREFIX = "hf_server_"


def server_name(replica_rank: int, node_rank: int, suffix: str = "") -> str:
    """Ray actor name of a replica's server on one node (the adapter looks it up by this name; Ray
    scopes it to the run's job namespace)."""
    return f"{SERVER_PREFIX}{replica_rank}_{node_rank}{suffix}"


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """top-k then top-p (nucleus) filtering of temperature-scaled logits (1-D); removed entries -inf."""
    out = logits.clone()
    if top_k and 0 < top_k < out.shape[-1]:
        kth = torch.topk(out, top_k).values[-1]
        out[out < kth] = float("-inf")
    if top_p is not None and 0.0 < top_p < 1.0:
        sorted_logits, idx = torch.sort(out, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        cum = torch.cumsum(probs, dim=-1)
        remove = cum - probs > top_p  # keep the smallest prefix whose mass reaches top_p
        sorted_logits[remove] = float("-inf")
        out = torch.full_like(out, float("-inf")).scatter(0, idx, sorted_logits)
    return out


def _cfg(cfg: Any, key: str) -> Any:
    """A field of a verl config that may arrive as a dataclass or as a DictConfig/dict."""
    if hasattr(cfg, "get") and not hasattr(type(cfg), "__dataclass_fields__"):
        return cfg.get(key, None)
    return getattr(cfg, key, None)


class HFRolloutServer:
    """The server actor: an HF causal LM, token-in/token-out generation, weight loading."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int, node_rank: int,
                 cuda_visible_devices: str | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if cuda_visible_devices:
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        self.config = config
        self.replica_rank = replica_rank
        self.node_rank = node_rank
        path = _cfg(model_config, "local_path") or _cfg(model_config, "path")
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.set_num_threads(int(os.environ.get("WINDTUNNEL_HF_ROLLOUT_THREADS", "1")))
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
        self.model = model.to(self.device).eval()  # type: ignore[arg-type]  # transformers types `to` unbound
        tok = AutoTokenizer.from_pretrained(_cfg(model_config, "local_tokenizer_path") or path)
        eos = set()
        for src in (tok.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if isinstance(src, int):
                eos.add(src)
            elif src:
                eos.update(int(x) for x in src)
        self.eos_ids = sorted(eos)
        self.global_steps: int | None = None
        self.version = 0  # number of weight updates received
        self.seeds = RequestSeeds(int(self.config.seed), replica_rank)
        self.n_requests = 0

    # ---- generation --------------------------------------------------------------------------
    def _budget(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        cfg = self.config
        limit = sampling_params.pop("max_tokens", None) or sampling_params.pop("max_new_tokens", None)
        default = min(cfg.response_length, cfg.prompt_length + cfg.response_length - prompt_len)
        return max(1, min(int(limit) if limit else default, cfg.response_length))

    @torch.no_grad()
    def _sample(self, prompt_ids: list[int], params: dict[str, Any],
                gen: torch.Generator) -> tuple[list[int], list[float]]:
        max_new = self._budget(len(prompt_ids), params)
        temperature = float(params.get("temperature", 1.0))
        top_k = int(params.get("top_k", -1) or -1)
        top_p = float(params.get("top_p", 1.0))
        greedy = temperature <= 0.0
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        past = None
        out_ids: list[int] = []
        out_lp: list[float] = []
        for _ in range(max_new):
            res = self.model(input_ids=ids, past_key_values=past, use_cache=True)
            past = res.past_key_values
            logits = res.logits[0, -1].float()
            scaled = logits if greedy else logits / temperature
            logp = torch.log_softmax(scaled, dim=-1)
            if greedy:
                tok = int(torch.argmax(logits))
            else:
                probs = torch.softmax(filter_logits(scaled, top_k, top_p), dim=-1)
                tok = int(torch.multinomial(probs.cpu(), 1, generator=gen))
            out_ids.append(tok)
            out_lp.append(float(logp[tok]))
            if tok in self.eos_ids and not params.get("ignore_eos", False):
                break
            ids = torch.tensor([[tok]], dtype=torch.long, device=self.device)
        return out_ids, out_lp

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: list[Any] | None = None, video_data: list[Any] | None = None,
                       **kwargs: Any) -> TokenOutput:
        if image_data or video_data:
            raise NotImplementedError("the hf rollout serves text-only models")
        prompt_ids = [int(t) for t in prompt_ids]
        # keyed on the trainer's step of the weights (not on how many syncs this server saw): a run resumed
        # from a checkpoint draws the same samples as one that never stopped
        gen = torch.Generator().manual_seed(self.seeds.next(prompt_ids, self.global_steps))
        params = dict(sampling_params)
        want_lp = bool(params.pop("logprobs", False))
        ids, lps = self._sample(prompt_ids, params, gen)
        self.n_requests += 1
        return TokenOutput(token_ids=ids, log_probs=lps if want_lp else None, stop_reason="completed",
                           extra_fields={"global_steps": self.global_steps})

    # ---- weights -----------------------------------------------------------------------------
    def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> dict[str, Any]:
        """Load the actor's weights (HF names). Unknown names are an error; a tied lm_head may be absent."""
        own = self.model.state_dict()
        unknown = sorted(k for k in state if k not in own)
        if unknown:
            raise KeyError(f"hf rollout: weights {unknown[:5]} are not parameters of the rollout model")
        with torch.no_grad():
            for k, v in state.items():
                own[k].copy_(v.to(own[k].dtype))
        self.version += 1
        self.seeds.reset()
        if global_steps is not None:
            self.global_steps = global_steps
        return {"version": self.version, "n": len(state)}

    def weights_digest(self) -> str:
        """sha256 over the model's parameters (tests: the server holds the actor's weights)."""
        h = hashlib.sha256()
        for k, v in sorted(self.model.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()

    def stats(self) -> dict[str, Any]:
        return {"version": self.version, "global_steps": self.global_steps, "n_requests": self.n_requests,
                "device": str(self.device), "pid": os.getpid()}

    def get_server_address(self) -> tuple[str, int]:
        return ray.util.get_node_ip_address(), 0

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # Memory management and request control: the replica base class forwards these to every server
    # (`replica.py:RolloutReplica.wake_up` ...). An HF model keeps its weights resident and has no KV
    # pool or request queue, so there is nothing to do.
    async def wake_up(self, tags: list[str] | None = None) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...

    async def abort_all_requests(self, reject_request: bool = False, **kwargs: Any) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}


class HFReplica(RolloutReplica):
    """One replica = one `HFRolloutServer` per node, next to verl's fused workers (hybrid mode)."""

    async def launch_servers(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node_ids: list[str | None] = [None] * self.nnodes
        devices: list[str | None] = [None] * self.nnodes
        if self.workers:
            infos: list[tuple[str, str]] = await asyncio.gather(*[w.__ray_call__.remote(lambda self: (
                ray.get_runtime_context().get_node_id(),
                os.environ.get("CUDA_VISIBLE_DEVICES", ""))) for w in self.workers])
            per = self.gpus_per_replica_node
            for r in range(self.nnodes):
                node_ids[r] = infos[r * per][0]
                devices[r] = ",".join(i[1] for i in infos[r * per:(r + 1) * per] if i[1]) or None
        server_cls: Any = ray.remote(HFRolloutServer)  # an actor class; its handles go into verl's servers list
        for r in range(self.nnodes):
            opts: dict[str, Any] = {"name": server_name(self.replica_rank, r, self.name_suffix), "num_cpus": 0,
                                    "max_concurrency": self.max_concurrency}
            node_id = node_ids[r]
            if node_id is not None:
                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            if devices[r] and torch.cuda.is_available():
                # share the fused workers' GPUs like verl's vLLM server does (`vllm_async_server.py:1372`)
                opts["runtime_env"] = {"env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}}
            self.servers.append(server_cls.options(**opts).remote(
                config=self.config, model_config=self.model_config, replica_rank=self.replica_rank, node_rank=r,
                cuda_visible_devices=devices[r]))
        ip, port = await self.servers[0].get_server_address.remote()
        self._server_handle = self.servers[0]
        self._server_address = f"{ip}:{port}/{server_name(self.replica_rank, 0, self.name_suffix)}"

    def rollout_worker_use_gpu(self) -> bool:
        return True  # the CPU platform maps "GPU" to the private runtime's fake GPU


class HFServerAdapter(BaseRollout):
    """Worker-side adapter: receives the actor's per-step weights and sends them to the server actor."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        local_world_size = int(os.environ.get("RAY_LOCAL_WORLD_SIZE", "1"))
        world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                 * self.config.pipeline_model_parallel_size)
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.node_rank = self.rollout_rank // local_world_size
        self._has_server = self.rollout_rank % local_world_size == 0
        self._server = None

    def _handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank, self.node_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None  # weights stay resident in the server

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                             wire_format: str = "named_tensors",
                             global_steps: int | None = None, **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf rollout supports wire_format='named_tensors', got {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("hf rollout: LoRA adapters are not supported; set model.lora.merge=true")
        state: dict[str, torch.Tensor] = {}
        # every rank iterates: with FSDP the generator gathers full tensors collectively
        items: Iterable[tuple[str, torch.Tensor]] = weights
        if hasattr(weights, "__aiter__"):
            items = [item async for item in weights]
        for name, tensor in items:
            if self._has_server:
                t = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
                state[name] = t.detach().to("cpu", copy=True)
        if self._has_server:
            await self._handle().update_weights.remote(state, global_steps)
