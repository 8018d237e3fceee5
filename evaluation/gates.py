"""Health gates (DESIGN.md rule 2) and the overrides a campaign or caller sets on a suite's gates.

`Gates` is what a suite declares; `GateOverrides` is what an `evaluation: {gates: ...}` block or a caller
changes, field by field (None keeps the suite's value). Overrides keep each value as written, so the
evaluation key that hashes the effective gates is the same as when they travelled as a mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wtcommon.config_fields import ConfigFieldError


@dataclass(frozen=True)
class Gates:
    min_parse_rate: float = 0.5
    max_truncation_rate: float = 0.2
    require_item_count: bool = True


GATE_KEYS = tuple(f.name for f in dataclasses.fields(Gates))


@dataclass(frozen=True)
class GateOverrides:
    """The gates a campaign or caller sets; a field left None keeps the suite's."""

    min_parse_rate: float | None = None
    max_truncation_rate: float | None = None
    require_item_count: bool | None = None

    @classmethod
    def from_mapping(cls, raw: Any) -> GateOverrides:
        """The overrides of a `gates:` mapping; ConfigFieldError names the key and what it takes."""
        if not isinstance(raw, Mapping):
            raise ConfigFieldError(f"gates: got {raw!r}; a mapping such as {{min_parse_rate: 0.5}}")
        bad = sorted(set(raw) - set(GATE_KEYS))
        if bad:
            raise ConfigFieldError(f"gates: unknown key(s) {bad}; allowed: {sorted(GATE_KEYS)}")
        for k, x in raw.items():
            if k.endswith("_rate") and (isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1):
                raise ConfigFieldError(f"gates.{k}: got {x!r}; a rate between 0 and 1")
        if "require_item_count" in raw and not isinstance(raw["require_item_count"], bool):
            raise ConfigFieldError(f"gates.require_item_count: got {raw['require_item_count']!r}; true or false")
        return cls(**raw)

    def set_fields(self) -> dict[str, Any]:
        """The fields this override sets, as written."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def apply(self, gates: Gates) -> Gates:
        """`gates` with the fields this override sets replaced."""
        return dataclasses.replace(gates, **self.set_fields())


__all__ = ["GATE_KEYS", "GateOverrides", "Gates"]
