"""verl plugin entry point (`[project.entry-points."verl.plugins"] windtunnel = "policies.verl.plugin"`).

Importing this module registers the `windtunnel_sync` trainer in verl's TRAINER_REGISTRY and the `hf`
rollout in verl's two rollout registries (`policies.verl.hf_rollout`); with `WINDTUNNEL_VERL_CPU=1` it
also installs the CPU workarounds (`policies.verl.cpu`); with `WINDTUNNEL_ROLLOUT_SEEDS=per-request` (every
run the launcher starts) verl's `vllm` rollout name serves through the per-request-seeded server
(`policies.verl.vllm_seeded`). verl imports it on every `import verl` and swallows any exception (VERL.md §2),
so run `campaign policies check` (or `policies.verl.checks.self_check()`) to see a failure.
"""

import os

from policies.verl import cpu as _cpu
from policies.verl import reward_audit as _reward_audit

if _cpu.enabled():
    _cpu.register_platform()  # before verl's engine modules import (they read the platform at import)

from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry

from policies.verl.launcher import SEEDED_ROLLOUT_ENV, SEEDED_ROLLOUT_VALUE
from policies.verl.trainer import TRAINER_NAME, WindtunnelTrainer

ROLLOUT_NAME = "hf"
ROLLOUT_MODULE = "policies.verl.hf_rollout"


def _load_hf_replica():
    # lazy, like verl's own loaders (`replica.py:_load_vllm`): a Ray worker that unpickles an hf_rollout
    # class imports hf_rollout -> verl -> this plugin, which must not need hf_rollout's attributes yet
    from policies.verl.hf_rollout import HFReplica

    return HFReplica


def _load_seeded_vllm_replica():
    from policies.verl.vllm_seeded import SeededvLLMReplica

    return SeededvLLMReplica


RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_hf_replica)  # `verl/workers/rollout/replica.py:312`
_ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{ROLLOUT_MODULE}.HFServerAdapter"  # `verl/workers/rollout/base.py:89`
if _cpu.enabled():
    _cpu.install()
    # verl's own vLLM rollout on vLLM's CPU build: the trainer side of the weight sync with the launch's own
    # socket (policies/verl/vllm_cpu.py); resolved only when a recipe selects `rollout.name: vllm`
    _ROLLOUT_REGISTRY[("vllm", "async")] = "policies.verl.vllm_cpu.CPUServerAdapter"
if os.environ.get(SEEDED_ROLLOUT_ENV) == SEEDED_ROLLOUT_VALUE:
    # verl's own vLLM server with a sampling seed per request (policies/verl/vllm_seeded.py): runs Windtunnel
    # launches reproduce at the same seed; resolved only when a recipe selects `rollout.name: vllm`
    RolloutReplicaRegistry.register("vllm", _load_seeded_vllm_replica)
_reward_audit.install()  # only with WINDTUNNEL_REWARD_AUDIT_DIR set (policies/verl/reward_audit.py)


__all__ = ["ROLLOUT_NAME", "TRAINER_NAME", "WindtunnelTrainer"]
