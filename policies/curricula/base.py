"""The curriculum interface: a pre-rollout, per-prompt, stateful rule that proposes which prompts of a pool are
rolled out next, and learns from each step's per-rollout correctness.

Why a class of its own (not an actuator): actuators act on a rollout batch that exists; a curriculum acts before
any rollout, on prompt ids, and carries state across steps and epochs that must survive a checkpoint. Every rule
states the `signal` it reads (per-rollout correctness in {0, 1}, never the shaped score: a filter on `score`
lets all-wrong groups through under shaped rewards, verl-recipe #125).

Parameters are declared as `policies.registry.Param` schemas, so a curriculum's knobs are checked exactly as a
scorer's or an actuator's are (a `PolicyConfigError` naming the field and what is allowed).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from policies.errors import PolicyConfigError
from policies.registry import Param


class Curriculum(ABC):
    """Pre-rollout, per-prompt, stateful: proposes which prompts are rolled out next.

    Subclasses set `name`, `signal`, `PARAMS` and `STATE` (the attribute names of their numpy arrays and
    scalars, saved by `state_dict`), and implement `_propose` and `update`. All state is O(pool)."""

    name: ClassVar[str]
    signal: ClassVar[str]
    PARAMS: ClassVar[dict[str, Param]] = {}
    STATE: ClassVar[tuple[str, ...]] = ()
    needs_pass_rates: ClassVar[bool] = False

    def __init__(self, pool_size: int, batch_size: int, seed: int, params: Mapping[str, Any] | None = None,
                 *, domains: np.ndarray | None = None, pass_rates: np.ndarray | None = None) -> None:
        where = f"curriculum {self.name!r}"
        if isinstance(pool_size, bool) or not isinstance(pool_size, (int, np.integer)) or pool_size < 1:
            raise PolicyConfigError(f"{where}: pool_size: got {pool_size!r}; allowed: int >= 1 (prompts in the pool)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise PolicyConfigError(f"{where}: batch_size: got {batch_size!r}; allowed: int >= 1 (prompts per step)")
        if pool_size < batch_size:
            raise PolicyConfigError(f"{where}: pool_size {pool_size} is smaller than batch_size {batch_size}; "
                                    "use a larger pool or fewer prompts per step")
        self.pool_size, self.batch_size, self.seed = int(pool_size), int(batch_size), int(seed)
        self.params = type(self).validate(params)
        self.domains = None if domains is None else _per_prompt(domains, self.pool_size, "domains", where, int)
        self.pass_rates = None if pass_rates is None else _per_prompt(pass_rates, self.pool_size, "pass_rates",
                                                                       where, float)
        self.rng = np.random.default_rng(self.seed)
        self.last_diagnostics: dict[str, float] = {}

    @classmethod
    def validate(cls, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The parameters with defaults filled, each checked against `PARAMS`, then the rule's own cross-field
        checks (`check_params`): everything about a config that needs no pool."""
        out = validate_curriculum_params(cls, params)
        cls.check_params(out)
        return out

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """Cross-field checks of a rule (e.g. low <= high); raise `PolicyConfigError` naming both fields."""
        return None

    # ------------------------------------------------------------------ the interface

    def propose(self, step: int, allowed: np.ndarray | None = None, n: int | None = None) -> np.ndarray:
        """(n,) unique int64 prompt ids (n defaults to batch_size), chosen among `allowed` (a (pool,) bool mask
        or an id array; None = the whole pool). Never empty, never hangs: a rule whose skips leave too few
        candidates falls back to uniform choice and says so in `last_diagnostics["fallback_uniform"]`."""
        n = self.batch_size if n is None else int(n)
        mask = self.allowed_mask(allowed)
        available = int(mask.sum())
        if n < 1 or n > available:
            raise PolicyConfigError(f"curriculum {self.name!r}: asked for {n} prompts among {available} allowed; "
                                    "ask for between 1 and the number of allowed prompts")
        self.last_diagnostics = {}
        ids = np.asarray(self._propose(int(step), mask, n), dtype=np.int64)
        self.last_diagnostics.setdefault("fallback_uniform", 0.0)
        self.last_diagnostics["proposed"] = float(ids.size)
        return ids

    @abstractmethod
    def _propose(self, step: int, mask: np.ndarray, n: int) -> np.ndarray:
        """n unique ids with mask[ids] all true (mask has at least n true entries)."""

    @abstractmethod
    def update(self, step: int, prompt_ids: np.ndarray, correct: np.ndarray) -> None:
        """Learn from a step: correct is (len(prompt_ids), K) per-rollout correctness in [0, 1]."""

    def state_dict(self) -> dict[str, Any]:
        """numpy arrays and JSON-safe scalars, the rng state included: enough for identical future proposals."""
        out: dict[str, Any] = {"curriculum": self.name, "pool_size": self.pool_size,
                               "rng": self.rng.bit_generator.state}
        for key in self.STATE:
            value = getattr(self, key)
            out[key] = value.copy() if isinstance(value, np.ndarray) else value
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        where = f"curriculum {self.name!r}: state"
        if state.get("curriculum") != self.name or int(state.get("pool_size", -1)) != self.pool_size:
            raise PolicyConfigError(f"{where}: saved by curriculum {state.get('curriculum')!r} over a pool of "
                                    f"{state.get('pool_size')}, not {self.name!r} over {self.pool_size}; resume "
                                    "with the run's own policy and pool")
        missing = [k for k in ("rng", *self.STATE) if k not in state]
        if missing:
            raise PolicyConfigError(f"{where}: missing {missing}; the state file is not this curriculum's")
        for key in self.STATE:
            old, new = getattr(self, key), state[key]
            if isinstance(old, np.ndarray):
                arr = np.asarray(new, dtype=old.dtype)
                if arr.shape != old.shape:
                    raise PolicyConfigError(f"{where}.{key}: shape {arr.shape}, expected {old.shape}")
                setattr(self, key, arr.copy())
            else:
                setattr(self, key, type(old)(new))
        rng_state = state["rng"]
        self.rng.bit_generator.state = dict(rng_state) if isinstance(rng_state, Mapping) else rng_state
        self._derive()

    def _derive(self) -> None:
        """Recompute caches derived from the saved state (after construction and after a load); none here."""
        return None

    # ------------------------------------------------------------------ helpers shared by the rules

    def allowed_mask(self, allowed: np.ndarray | None) -> np.ndarray:
        """(pool,) bool mask from None, a bool mask or an id array (ids outside the pool are refused)."""
        if allowed is None:
            return np.ones(self.pool_size, dtype=bool)
        a = np.asarray(allowed)
        if a.dtype == bool:
            if a.shape != (self.pool_size,):
                raise PolicyConfigError(f"curriculum {self.name!r}: allowed mask has shape {a.shape}; "
                                        f"expected ({self.pool_size},)")
            return a
        ids = a.astype(np.int64, copy=False).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self.pool_size):
            raise PolicyConfigError(f"curriculum {self.name!r}: allowed ids outside [0, {self.pool_size})")
        mask = np.zeros(self.pool_size, dtype=bool)
        mask[ids] = True
        return mask

    def check_update(self, prompt_ids: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64, correct float64 (n, K)) after checking shapes and ranges (a trainer bug, named)."""
        ids = np.asarray(prompt_ids, dtype=np.int64).ravel()
        c = np.asarray(correct, dtype=np.float64)
        if c.ndim == 1:
            c = c[:, None]
        if c.ndim != 2 or c.shape[0] != ids.size:
            raise PolicyConfigError(f"curriculum {self.name!r}: update: correct has shape {c.shape}; expected "
                                    f"({ids.size}, K) per-rollout correctness")
        if ids.size and (ids.min() < 0 or ids.max() >= self.pool_size):
            raise PolicyConfigError(f"curriculum {self.name!r}: update: prompt ids outside [0, {self.pool_size})")
        if c.size and not (np.isfinite(c).all() and c.min() >= 0.0 and c.max() <= 1.0):
            raise PolicyConfigError(f"curriculum {self.name!r}: update: correct must lie in [0, 1] (per-rollout "
                                    "correctness, not the shaped score)")
        return ids, c


def top_n(keys: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """Ids of the n largest `keys` among `mask` (one O(pool) argpartition over the candidates only: over the
    whole pool, the -inf of the masked-out ones degrades introselect), largest first. The caller breaks ties in
    keys (a random jitter or a random key) and guarantees mask holds at least n ids."""
    cand = np.flatnonzero(mask)
    k = keys[cand]
    if n < cand.size:
        part = np.argpartition(-k, n - 1)[:n]
        cand, k = cand[part], k[part]
    return cand[np.argsort(-k, kind="stable")]


def validate_curriculum_params(cls: type[Curriculum], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults filled, every given parameter checked against `cls.PARAMS`; unknown names are errors. All bad
    fields are reported in one error (one `; `-separated clause each), so a user fixes them in one pass."""
    given = dict(params or {})
    problems = []
    unknown = sorted(set(given) - set(cls.PARAMS))
    if unknown:
        problems.append(f"curriculum {cls.name!r}: params: unknown parameter(s) {unknown}; "
                        f"allowed: {sorted(cls.PARAMS)}")
    out: dict[str, Any] = {}
    for p, spec in cls.PARAMS.items():
        try:
            out[p] = spec.check(given[p], f"curriculum {cls.name!r}: params.{p}") if p in given else spec.default
        except PolicyConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise PolicyConfigError("; ".join(problems))
    return out


def _per_prompt(values: np.ndarray, pool: int, field: str, where: str, kind: type) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (pool,):
        raise PolicyConfigError(f"{where}: {field}: shape {arr.shape}; expected ({pool},), one per prompt")
    if kind is float:
        arr = arr.astype(np.float64)
        if not (np.isfinite(arr).all() and arr.min() >= 0.0 and arr.max() <= 1.0):
            raise PolicyConfigError(f"{where}: {field}: pass rates must lie in [0, 1]")
        return arr
    return arr.astype(np.int64)
