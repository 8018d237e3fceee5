"""Every verl (and TransferQueue) name the plugin and the verl backend import, patch or override, in one list.

Why: the plugin passes through verl seams that are not a stable API (private registries, a name rebound in
another module, trainer methods it overrides). A verl upgrade that moves one of them breaks a run late — on a
cluster node, after the job started — or silently (verl swallows a plugin's import error, VERL.md §2).
`campaign doctor` resolves each entry on every node (`resolve_all`), and `tests/verl/test_internals.py` fails
when code here or in `training/` imports a verl name this list does not hold.

Each entry is `(module, attribute path or "", where it is used)`; an empty attribute means the module itself.
"""

from __future__ import annotations

import importlib
import importlib.util

VERL_INTERNALS: tuple[tuple[str, str, str], ...] = (
    # policies/verl/plugin.py: the rollout registries
    ("verl.workers.rollout.base", "_ROLLOUT_REGISTRY", "policies/verl/plugin.py"),
    ("verl.workers.rollout.base", "BaseRollout", "policies/verl/hf_rollout.py"),
    ("verl.workers.rollout.replica", "RolloutReplicaRegistry.register", "policies/verl/plugin.py"),
    ("verl.workers.rollout.replica", "RolloutReplica", "policies/verl/hf_rollout.py"),
    ("verl.workers.rollout.replica", "TokenOutput", "policies/verl/hf_rollout.py"),
    # policies/verl/trainer.py: the v1 sync trainer and the methods the plugin's trainer overrides
    ("verl.trainer.ppo.v1", "register_trainer", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._compute_advantage", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._update_actor", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._fetch_one_gen_batch", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._save_checkpoint", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._load_checkpoint", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync.on_step_end", "policies/verl/trainer.py"),
    ("verl.trainer.ppo.v1.trainer_base", "TRAINER_REGISTRY", "policies/verl/checks.py"),
    ("verl.trainer.ppo.v1.trainer_base", "get_trainer_cls", "policies/verl/checks.py"),
    ("verl.utils.tensordict_utils", "get_tensordict", "policies/verl/trainer.py"),
    ("verl.utils.dataset.rl_dataset", "collate_fn", "policies/verl/trainer.py"),
    ("verl.workers.utils.padding", "response_to_nested", "policies/verl/trainer.py"),
    ("transfer_queue", "kv_batch_get", "policies/verl/trainer.py"),
    ("transfer_queue", "kv_batch_put", "policies/verl/trainer.py"),
    ("transfer_queue.interface", "", "policies/verl/trainer.py (_TQ_CONTROLLER, read if present)"),
    # policies/verl/dynamic_sampling.py: the sync replay buffer it subclasses and the trainer seams it uses
    ("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer.sample", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer._sync_metadata_from_transfer_queue",
     "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer._clear_groups", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer._materialize_batch", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer._wait_for_next_poll", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._build_replay_buffer", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync.prepare_step", "policies/verl/dynamic_sampling.py"),
    ("verl.trainer.ppo.v1", "PPOTrainerSync._submit_batch_to_rollout", "policies/verl/dynamic_sampling.py"),
    ("verl.utils.tensordict_utils", "assign_non_tensor_data", "policies/verl/dynamic_sampling.py"),
    ("transfer_queue", "kv_list", "policies/verl/dynamic_sampling.py (through ReplayBuffer)"),
    # policies/verl/cpu.py: the CPU walls
    ("verl.plugin.platform.platform_base", "PlatformBase", "policies/verl/cpu.py"),
    ("verl.plugin.platform.platform_manager", "PlatformRegistry.get", "policies/verl/cpu.py"),
    ("verl.plugin.platform.platform_manager", "PlatformRegistry.register", "policies/verl/cpu.py"),
    ("verl.utils.distributed", "initialize_global_process_group_ray", "policies/verl/cpu.py (patched)"),
    ("verl.workers.engine_workers", "initialize_global_process_group_ray", "policies/verl/cpu.py (rebound)"),
    ("verl.workers.engine", "EngineRegistry._engines", "policies/verl/cpu.py"),
    ("verl.workers.engine", "EngineRegistry.register", "policies/verl/cpu.py"),
    ("verl.workers.engine.fsdp.transformer_impl", "FSDPEngineWithLMHead", "policies/verl/cpu.py"),
    # training: the launcher's entry module, the merge, the local backend's loss functions
    ("verl.trainer.main_ppo", "", "training/verl_launcher.py (python -m verl.trainer.main_ppo)"),
    ("verl.model_merger.base_model_merger", "ModelMergerConfig", "training/verl_merge.py"),
    ("verl.model_merger.fsdp_model_merger", "FSDPModelMerger", "training/verl_merge.py"),
    ("verl.trainer.ppo.core_algos", "agg_loss", "training/local_setup.py"),
    ("verl.trainer.ppo.core_algos", "compute_grpo_outcome_advantage", "training/local_setup.py"),
    ("verl.trainer.ppo.core_algos", "get_policy_loss_fn", "training/local_setup.py"),
    ("verl.trainer.ppo.core_algos", "kl_penalty", "training/local_setup.py"),
    ("verl.workers.config.actor", "FSDPActorConfig", "training/local_setup.py"),
)

# verl's vLLM rollout, which policies/verl/vllm_cpu.py subclasses: these modules import vLLM, so they are resolved
# only where vLLM is installed (a GPU node, or .venv-vllm)
VLLM_INTERNALS: tuple[tuple[str, str, str], ...] = (
    ("verl.workers.rollout.vllm_rollout.utils", "vLLMColocateWorkerExtension.update_weights_from_ipc",
     "policies/verl/vllm_cpu.py"),
    ("verl.workers.rollout.vllm_rollout.utils", "vLLMColocateWorkerExtension._update_weights",
     "policies/verl/vllm_cpu.py"),
    ("verl.workers.rollout.vllm_rollout.utils", "vLLMColocateWorkerExtension._get_zmq_handle",
     "policies/verl/vllm_cpu.py"),
    ("verl.workers.rollout.vllm_rollout.vllm_rollout", "ServerAdapter", "policies/verl/vllm_cpu.py"),
    ("verl.workers.rollout.vllm_rollout.bucketed_weight_transfer", "BucketedWeightReceiver",
     "policies/verl/vllm_cpu.py"),
    # the per-request-seeded server subclasses verl's own, overriding generate and set_global_steps
    ("verl.workers.rollout.vllm_rollout.vllm_async_server", "vLLMHttpServer", "policies/verl/vllm_seeded.py"),
    ("verl.workers.rollout.vllm_rollout.vllm_async_server", "vLLMHttpServer.generate",
     "policies/verl/vllm_seeded.py"),
    ("verl.workers.rollout.vllm_rollout.vllm_async_server", "vLLMHttpServer.set_global_steps",
     "policies/verl/vllm_seeded.py"),
    ("verl.workers.rollout.vllm_rollout.vllm_async_server", "vLLMReplica", "policies/verl/vllm_seeded.py"),
)


def resolve(module: str, attr: str) -> str | None:
    """None when `module` imports and `attr` (dotted) resolves on it, else what failed."""
    try:
        obj = importlib.import_module(module)
    except Exception as exc:  # ImportError, or whatever a broken verl raises on import
        return f"import {module}: {type(exc).__name__}: {str(exc)[:200]}"
    for part in [p for p in attr.split(".") if p]:
        if not hasattr(obj, part):
            return f"{module}.{attr}: no attribute {part!r}"
        obj = getattr(obj, part)
    return None


def resolve_all() -> list[dict[str, str]]:
    """The entries that do not resolve here: [{"name", "used_in", "error"}] (empty: all resolve)."""
    out = []
    vllm = importlib.util.find_spec("vllm") is not None
    for module, attr, used in (*VERL_INTERNALS, *(VLLM_INTERNALS if vllm else ())):
        err = resolve(module, attr)
        if err is not None:
            out.append({"name": f"{module}:{attr}" if attr else module, "used_in": used, "error": err})
    return out
