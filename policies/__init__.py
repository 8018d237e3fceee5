"""Windtunnel data policies: which rollouts count (select), how much (reweight), which domain next (mix).

Contract 2: `from policies import StepBatch, load_policy, DomainSampler`.

`Mechanism`, `MECHANISMS` and `mechanism_of` are plain data, imported at once: the campaign grid and the records schema
name mechanisms without paying for torch. Everything else loads on first use (PEP 562), and loading any of
it imports the policy loader, which registers every shipped scorer and actuator, as a plain import did.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from policies.mechanisms import MECHANISMS, Mechanism, declared_mechanism, mechanism_of

if TYPE_CHECKING:
    from policies.advantages import grpo_advantages
    from policies.batch import StepBatch, dense_ids
    from policies.errors import PolicyConfigError
    from policies.loader import load_policy
    from policies.policy import DataPolicy, PolicyResult
    from policies.registry import ACTUATORS, SCORERS, Param, register_actuator, register_scorer
    from policies.sampler import DomainSampler, is_inert
    from policies.curricula.base import Curriculum
    from policies.curricula.registry import CURRICULA, register_curriculum

_LAZY = {
    "StepBatch": "policies.batch", "dense_ids": "policies.batch", "load_policy": "policies.loader",
    "DataPolicy": "policies.policy", "PolicyResult": "policies.policy", "PolicyConfigError": "policies.errors",
    "DomainSampler": "policies.sampler", "is_inert": "policies.sampler", "register_scorer": "policies.registry",
    "register_actuator": "policies.registry", "Param": "policies.registry", "SCORERS": "policies.registry",
    "ACTUATORS": "policies.registry", "grpo_advantages": "policies.advantages",
    "Curriculum": "policies.curricula.base", "CURRICULA": "policies.curricula.registry",
    "register_curriculum": "policies.curricula.registry",
}

__all__ = [
    "StepBatch", "dense_ids", "load_policy", "DataPolicy", "PolicyResult", "PolicyConfigError", "DomainSampler",
    "is_inert", "register_scorer", "register_actuator", "Param", "SCORERS", "ACTUATORS", "grpo_advantages",
    "MECHANISMS", "Mechanism", "declared_mechanism", "mechanism_of", "Curriculum", "CURRICULA", "register_curriculum",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'policies' has no attribute {name!r}")
    importlib.import_module("policies.loader")  # registers the shipped scorers and actuators
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
