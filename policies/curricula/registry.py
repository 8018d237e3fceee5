"""The curricula by name, `register_curriculum` (how a researcher's own rule joins them) and `build_curriculum`,
the one way callers construct one.

The shipped rule modules import only `base` and are registered here, in the one registry idiom
(wtcommon/registry.py), so nothing here can form an import loop. A plugin module (named under a policy's
`plugins:`) registers its own rule with `@register_curriculum("name")`: a taken name is refused, and the class is
checked as a rule (a `Curriculum` subclass whose `PARAMS` are `Param` schemas and whose `signal` is stated)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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
from policies.registry import Param
from wtcommon.registry import Registry

CURRICULA: Registry[type[Curriculum]] = Registry("curriculum", PolicyConfigError)
CURRICULA.update({c.name: c for c in (Uniform, Greso, MoPPS, Learnability, PrioritizedReplay, PromptReplay, HardestK)})


C = TypeVar("C", bound=type[Curriculum])


def register_curriculum(name: str) -> Callable[[C], C]:
    """Class decorator: register a curriculum rule under `name` (its `name` attribute is set to it). Refused with a
    `PolicyConfigError` naming the class: not a `Curriculum` subclass, abstract methods left (`_propose`,
    `update`), no `signal` stated, a `PARAMS` entry that is not a `Param`, a `STATE` entry that is not a name, or
    the name taken by another class."""
    def deco(cls: C) -> C:
        where = f"register_curriculum({name!r}): {getattr(cls, '__qualname__', cls)!r}"
        if not (isinstance(cls, type) and issubclass(cls, Curriculum)):
            raise PolicyConfigError(f"{where}: not a subclass of policies.curricula.base.Curriculum")
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise PolicyConfigError(f"{where}: implement {missing} (see docs/guide/policies.md, 'A curriculum of "
                                    "your own')")
        if not isinstance(getattr(cls, "signal", None), str) or not cls.signal:
            raise PolicyConfigError(f"{where}: set `signal`, the per-rollout signal the rule reads (e.g. 'accuracy: "
                                    "per-rollout correctness in {0,1}', or 'none')")
        bad = sorted(k for k, v in cls.PARAMS.items() if not isinstance(v, Param))
        if bad:
            raise PolicyConfigError(f"{where}: PARAMS {bad} are not policies.Param schemas")
        if not all(isinstance(k, str) and k for k in cls.STATE):
            raise PolicyConfigError(f"{where}: STATE must list attribute names (strings), got {cls.STATE!r}")
        problems = _interface_problems(cls)
        if problems:
            raise PolicyConfigError(f"{where}: {'; '.join(problems)} (see docs/guide/policies.md, 'A curriculum of "
                                    "your own')")
        own = cls.__dict__.get("name")
        if own is not None and own != name:
            raise PolicyConfigError(f"{where}: its `name` is {own!r}; register it under that name or drop the "
                                    "attribute")
        CURRICULA[name] = cls  # a different class under a taken name: refused by the registry
        cls.name = name
        return cls

    return deco


# how the trainer calls each overridable method: (positional arguments after self, keyword arguments)
_CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "__init__": ((8, 2, 0, {}), {"domains": None, "pass_rates": None}),
    "_propose": ((1, np.ones(8, dtype=bool), 2), {}),
    "update": ((1, np.arange(2), np.ones(2)), {}),
}


def _interface_problems(cls: type[Curriculum]) -> list[str]:
    """Each overridden method that the trainer's call would not bind to (issue 59: a wrong `_propose`, `update`
    or `__init__` signature passed plan and validate, and failed at training time)."""
    import inspect

    out = []
    for meth, (args, kwargs) in _CALLS.items():
        if meth not in cls.__dict__:
            continue
        try:
            inspect.signature(cls.__dict__[meth]).bind(None, *args, **kwargs)
        except TypeError as e:
            base = inspect.signature(getattr(Curriculum, meth))
            out.append(f"{meth}{inspect.signature(cls.__dict__[meth])} cannot take the trainer's call ({e}); "
                       f"give it the base class's signature {meth}{base}")
    return out


def _check_state(cls: type[Curriculum], params: dict[str, Any]) -> None:
    """Build the rule on a small pool and check every `STATE` name is an attribute it sets: a missing one failed
    only when the trainer saved its first checkpoint."""
    pool, batch = 8, 2
    rates = np.linspace(0.0, 1.0, pool) if cls.needs_pass_rates else None
    try:
        rule = cls(pool, batch, 0, params, domains=np.zeros(pool, dtype=int), pass_rates=rates)
    except PolicyConfigError:
        return  # needs a larger pool or real pass rates: its own checks speak at build time
    except Exception as e:  # the user's constructor raised: say so now, not at training time
        raise PolicyConfigError(f"curriculum {cls.name!r}: constructing it on an {pool}-prompt pool raised "
                                f"{type(e).__name__}: {e}; fix its __init__") from None
    missing = [k for k in cls.STATE if not hasattr(rule, k)]
    if missing:
        raise PolicyConfigError(f"curriculum {cls.name!r}: STATE names {missing}, which the rule never sets; set "
                                "them in __init__ (or _derive) or drop them from STATE")


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
    cls = curriculum_class(name)
    try:
        params = cls.validate(params)
    except PolicyConfigError:
        raise
    except Exception as e:  # a plugin's check_params that raised something else: a config error, not a traceback
        raise PolicyConfigError(f"curriculum {cls.name!r}: its check_params raised {type(e).__name__}: {e}; make it "
                                "raise PolicyConfigError naming the field, or fix it") from None
    if cls.STATE:
        _check_state(cls, params)
    return params


def build_curriculum(name: str, params: Mapping[str, Any] | None, pool_size: int, batch_size: int, seed: int,
                     domains: np.ndarray | None = None, pass_rates: np.ndarray | None = None) -> Curriculum:
    """Construct and validate: unknown name or parameter, out-of-range value, pool smaller than the batch, a
    missing pre-pass -> `PolicyConfigError` naming the field and the fix."""
    cls = curriculum_class(name)
    return cls(pool_size, batch_size, seed, params, domains=domains, pass_rates=pass_rates)
