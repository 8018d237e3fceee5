"""Windtunnel data policies: which rollouts count (select), how much (reweight), which domain next (mix).

Contract 2: `from policies import StepBatch, load_policy, DomainSampler`.
"""

from policies.batch import StepBatch, dense_ids
from policies.errors import PolicyConfigError
from policies.policy import DataPolicy, PolicyResult, grpo_advantages, load_policy
from policies.registry import ACTUATORS, SCORERS, Param, register_actuator, register_scorer
from policies.sampler import DomainSampler, is_inert

__all__ = [
    "StepBatch", "dense_ids", "load_policy", "DataPolicy", "PolicyResult", "PolicyConfigError", "DomainSampler",
    "is_inert", "register_scorer", "register_actuator", "Param", "SCORERS", "ACTUATORS", "grpo_advantages",
]
