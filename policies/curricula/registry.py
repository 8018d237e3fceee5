"""The shipped curricula by name, and `build_curriculum`, the one way callers construct one.

The rule modules import only `base` and are registered here, in the one registry idiom (wtcommon/registry.py): a
plugin's own rule registers with `CURRICULA[name] = cls` (a taken name is refused), so nothing here can form an
import loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from policies.curricula.base import Curriculum
from policies.curricula.greso import Greso
from policies.curricula.hardest_k import HardestK
from policies.curricula.learnability import Learnability
from policies.curricula.mopps import MoPPS
from policies.curricula.prioritized_replay import PrioritizedReplay
from policies.curricula.prompt_replay import PromptReplay
from policies.curricula.uniform import Uniform
from policies.errors import PolicyConfigError
from wtcommon.registry import Registry

CURRICULA: Registry[type[Curriculum]] = Registry("curriculum", PolicyConfigError)
CURRICULA.update({c.name: c for c in (Uniform, Greso, MoPPS, Learnability, PrioritizedReplay, PromptReplay, HardestK)})


def curriculum_class(name: Any) -> type[Curriculum]:
    """The class registered as `name`; an unknown name is refused with the close names."""
    return CURRICULA.lookup(name, where="curriculum.name")


def needs_pass_rates(block: Any) -> bool:
    """Whether a policy's `curriculum:` block names a rule that reads the difficulty pre-pass (hardest_k); an
    unknown or missing name is False here (the policy checks name it)."""
    cls = CURRICULA.get(str(block.get("name"))) if isinstance(block, dict) else None
    return cls is not None and cls.needs_pass_rates


def check_curriculum(name: Any, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A config's curriculum block checked without a pool (the policy loader's check): the name, every parameter
    and the rule's cross-field constraints; returns the parameters with defaults filled. What needs the pool
    (batch <= pool, hardest_k's pass rates and kept count) is checked by `build_curriculum` in the trainer."""
    return curriculum_class(name).validate(params)


def build_curriculum(name: str, params: Mapping[str, Any] | None, pool_size: int, batch_size: int, seed: int,
                     domains: np.ndarray | None = None, pass_rates: np.ndarray | None = None) -> Curriculum:
    """Construct and validate: unknown name or parameter, out-of-range value, pool smaller than the batch, a
    missing pre-pass -> `PolicyConfigError` naming the field and the fix."""
    cls = curriculum_class(name)
    return cls(pool_size, batch_size, seed, params, domains=domains, pass_rates=pass_rates)
