"""Typed fields read out of a YAML mapping, and the base of the config types built that way.

Why a mapping kept beside typed fields: a model file, a recipe and a campaign's `evaluation:` block are hashed
into run keys and stored as spec JSON exactly as the YAML gave them (unknown keys kept, `1` stays `1`, no
default written in), so a config type keeps the mapping it was built from (`raw`) for storage and hashing and
exposes the fields code reads as typed attributes, checked once at construction. A bad value raises
`ConfigFieldError` (a `UserError`, exit 2) naming where the mapping came from, the key and the fix.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wtcommon.errors import UserError


_EXPONENT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class ConfigFieldError(UserError):
    """A config mapping's field has the wrong type or range; the message names the source, the key and the fix."""


@dataclass(frozen=True)
class MappingConfig:
    """A config read from a YAML mapping: `raw` is that mapping (stored and hashed as given), the subclass's
    other fields the typed values code reads."""

    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: a copy of the mapping the config was built from, unchanged."""
        return copy.deepcopy(dict(self.raw))


def _bad(where: str, key: str, val: Any, fix: str, section: str | None = None) -> ConfigFieldError:
    return ConfigFieldError(f"{where}: key '{section + '.' if section else ''}{key}': got {val!r}; {fix}")


def mapping_of(raw: Any, where: str) -> Mapping[str, Any]:
    """`raw` itself when it is a mapping, else a `ConfigFieldError` naming `where`."""
    if not isinstance(raw, Mapping):
        raise ConfigFieldError(f"{where}: expected a mapping of keys to values, got {type(raw).__name__}")
    return raw


def opt_int(m: Mapping[str, Any], key: str, where: str, *, minimum: int | None = None,
            section: str | None = None) -> int | None:
    """An integer field (bool refused), None when absent or null; `minimum` bounds it. `section` (a nested
    mapping's key in its parent, e.g. `actor`) prefixes the key in the message: `actor.lr`."""
    val = m.get(key)
    if val is None:
        return None
    if isinstance(val, bool) or not isinstance(val, int) or (minimum is not None and val < minimum):
        raise _bad(where, key, val, "give an integer" + (f" >= {minimum}" if minimum is not None else ""), section)
    return val


def opt_number(m: Mapping[str, Any], key: str, where: str, *, section: str | None = None) -> float | None:
    """A number field (int or float, bool refused), None when absent or null. A string in exponent notation
    (`1e-4`: YAML 1.1 reads an exponent without a dot as a string) is read as the number it spells, as the
    trainers' `float()` always did; any other string is refused."""
    val = m.get(key)
    if val is None:
        return None
    if isinstance(val, str) and _EXPONENT.fullmatch(val.strip()):
        return float(val)
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        raise _bad(where, key, val, "give a number", section)
    return float(val)


def _opt_of(m: Mapping[str, Any], key: str, where: str, kind: type, fix: str, section: str | None) -> Any:
    """The field's value when it is a `kind`, None when absent or null, else a `ConfigFieldError` saying `fix`."""
    val = m.get(key)
    if val is None:
        return None
    if not isinstance(val, kind):
        raise _bad(where, key, val, fix, section)
    return val


def opt_str(m: Mapping[str, Any], key: str, where: str, *, section: str | None = None) -> str | None:
    """A string field, None when absent or null."""
    return _opt_of(m, key, where, str, "give a string", section)


def opt_bool(m: Mapping[str, Any], key: str, where: str, *, section: str | None = None) -> bool | None:
    """A boolean field (true/false only: a string such as 'false' would read as true), None when absent or null."""
    return _opt_of(m, key, where, bool, "give true or false", section)


def opt_mapping(m: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """A nested mapping (a section) as a dict of its own (the stored mapping is never changed through it), None
    when absent or null."""
    val = m.get(key)
    if val is None:
        return None
    if not isinstance(val, Mapping):
        raise ConfigFieldError(f"{where}: key '{key}': expected a mapping, got {type(val).__name__}; write it as "
                               f"`{key}: {{name: value, ...}}`")
    return dict(val)


__all__ = ["ConfigFieldError", "MappingConfig", "mapping_of", "opt_bool", "opt_int", "opt_mapping", "opt_number",
           "opt_str"]
