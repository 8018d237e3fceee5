"""verl's own vLLM rollout server with a sampling seed per request (`policies.verl.rollout_seeds`).

Only imported where vLLM is installed: the plugin registers `SeededvLLMReplica` under verl's rollout name `vllm`
(`RolloutReplicaRegistry`, `verl/workers/rollout/replica.py:312`) for the runs Windtunnel launches, so every vLLM
rollout (GPU or vLLM's CPU build) is the same server verl ships, started the same way, with one change: each
`generate` request without a seed of its own gets `SamplingParams.seed` from (rollout.seed, replica, the weights'
global step, prompt, occurrence), the key the `hf` rollout uses. vLLM then samples that request from its own
generator (vLLM's sampler keeps one `torch.Generator` per seeded request), so arrival order and batching no longer
pick the samples. What it does not fix: a GPU batch's float reductions still depend on its composition unless vLLM's
batch-invariant kernels are on (docs/guide/policies.md, "Reproducible runs").
"""

from __future__ import annotations

from typing import Any

import ray
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer, vLLMReplica

from policies.verl.rollout_seeds import RequestSeeds


class SeededvLLMHttpServer(vLLMHttpServer):
    """verl's vLLM server; `generate` adds the request's own seed (a caller's explicit seed is kept)."""

    async def generate(self, prompt_ids: Any, sampling_params: dict[str, Any], request_id: str,
                       *args: Any, **kwargs: Any) -> Any:
        if sampling_params.get("seed") is None:
            seeds = getattr(self, "_wt_seeds", None)
            if seeds is None:
                seeds = self._wt_seeds = RequestSeeds(int(self.config.seed), int(self.replica_rank))
            ids = prompt_ids.tolist() if hasattr(prompt_ids, "tolist") else list(prompt_ids)
            sampling_params = {**sampling_params, "seed": seeds.next(ids, self.global_steps)}
        return await super().generate(prompt_ids, sampling_params, request_id, *args, **kwargs)

    async def set_global_steps(self, global_steps: int) -> None:
        await super().set_global_steps(global_steps)
        seeds = getattr(self, "_wt_seeds", None)
        if seeds is not None:
            seeds.reset()  # new weights: occurrences count afresh (also at the same step number, after a resume)


class SeededvLLMReplica(vLLMReplica):
    """verl's vLLM replica serving through `SeededvLLMHttpServer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_class = ray.remote(SeededvLLMHttpServer)


__all__ = ["SeededvLLMHttpServer", "SeededvLLMReplica"]
