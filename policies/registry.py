"""Registry of scorers and actuators by name, with strict parameter schemas.

The reference registry silently dropped unknown parameters (a typo fell back to the default) and
checked no ranges (STUDY.md P15). Here every parameter is declared with its type, range or choices,
and anything else is a `PolicyConfigError` naming the policy, the field and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar
from collections.abc import Callable, Mapping

from policies.errors import PolicyConfigError
from wtcommon.registry import Registry


@dataclass(frozen=True)
class Param:
    """One declared parameter. `low`/`high` bound numeric values (`*_open` makes a bound strict)."""

    type: type
    default: Any
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    doc: str = ""

    def allowed(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        if self.type is bool:
            return "true or false"
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        return f"{self.type.__name__} in {'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"

    def check(self, value: Any, where: str) -> Any:
        """Return the coerced value or raise naming `where` and the allowed values."""
        bad = PolicyConfigError(f"{where}: got {value!r}; allowed: {self.allowed()}")
        if self.choices is not None:
            if value not in self.choices:
                raise bad
            return value
        if self.type is bool:
            if not isinstance(value, bool):
                raise bad
            return value
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad
        elif self.type is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise bad
            value = float(value)
        elif not isinstance(value, self.type):
            raise bad
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise bad
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise bad
        return value

    def contains_range(self, low: float, high: float) -> bool:
        """Whether [low, high] lies inside the allowed range (used to validate search spaces)."""
        if self.low is not None and (low < self.low or (self.low_open and low == self.low)):
            return False
        if self.high is not None and (high > self.high or (self.high_open and high == self.high)):
            return False
        return True


@dataclass(frozen=True)
class Entry:
    kind: str  # "scorer" | "actuator"
    name: str
    cls: type[Any]  # a Scorer or Actuator subclass; its class attributes (mechanism, granularity) are read
    params: Mapping[str, Param]


SCORERS: Registry[Entry] = Registry("scorer", PolicyConfigError, lambda e: e.cls)
ACTUATORS: Registry[Entry] = Registry("actuator", PolicyConfigError, lambda e: e.cls)
TABLES = {"scorer": SCORERS, "actuator": ACTUATORS}

T = TypeVar("T", bound=type)


def _register(table: Registry[Entry], kind: str, name: str) -> Callable[[T], T]:
    def deco(cls: T) -> T:
        table[name] = Entry(kind, name, cls, dict(getattr(cls, "PARAMS", {})))  # a different class: refused
        cls.registry_name = name  # type: ignore[attr-defined]
        return cls

    return deco


def register_scorer(name: str) -> Callable[[T], T]:
    """Class decorator: register a scorer under `name`; its `PARAMS` dict is the schema."""
    return _register(SCORERS, "scorer", name)


def register_actuator(name: str) -> Callable[[T], T]:
    """Class decorator: register an actuator (Selector / Reweighter / Mixer subclass) under `name`."""
    return _register(ACTUATORS, "actuator", name)


def lookup(kind: str, name: Any, policy: str) -> Entry:
    """The `kind` ("scorer" or "actuator") entry `name`; an unknown kind or name is a PolicyConfigError."""
    if kind not in TABLES:
        raise PolicyConfigError(f"policy {policy!r}: unknown registry kind {kind!r}; one of {sorted(TABLES)}")
    return TABLES[kind].lookup(name, where=f"policy {policy!r}: {kind}.name")


def validate_params(entry: Entry, given: Mapping[str, Any] | None, policy: str) -> dict[str, Any]:
    """Fill defaults and check every given parameter; unknown names are errors (no silent fallback)."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(entry.params))
    if unknown:
        raise PolicyConfigError(
            f"policy {policy!r}: {entry.kind}.params: unknown parameter(s) {unknown} for {entry.kind} "
            f"{entry.name!r}; allowed: {sorted(entry.params)}"
        )
    out = {}
    for pname, spec in entry.params.items():
        where = f"policy {policy!r}: {entry.kind}.params.{pname} ({entry.kind} {entry.name!r})"
        out[pname] = spec.check(given[pname], where) if pname in given else spec.default
    return out
