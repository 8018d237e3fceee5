"""`RunMeta`: the run's labels that every record row of one evaluated checkpoint carries.

One typed object instead of a dict read by key at both ends: the evaluate stage builds it from the run spec,
`campaign eval` from its options, and the evaluator (or the noop backend) writes its fields into the records
unchanged. Field order is the records' column order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wtcommon.errors import WindtunnelError

REQUIRED = ("run_id", "campaign", "model", "policy", "seed", "step")


class RunMetaError(WindtunnelError, ValueError):
    """A run's labels are incomplete or unknown (a caller's mistake, named with the fix)."""


@dataclass(frozen=True)
class RunMeta:
    """`run_key` defaults to `run_id` (a checkpoint evaluated outside a campaign); `mechanism` to "unknown" (the
    caller knows the policy's YAML, evaluation does not); `eval_hash` is set by the evaluate stage."""

    run_id: str
    campaign: str
    model: str
    policy: str
    seed: int
    step: int
    run_key: str = ""
    mechanism: str = "unknown"
    regime: str = ""
    config_hash: str = ""
    eval_hash: str = ""

    def __post_init__(self) -> None:
        for name in ("run_id", "campaign", "model", "policy", "run_key", "mechanism", "regime", "config_hash",
                     "eval_hash"):
            object.__setattr__(self, name, str(getattr(self, name)))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "step", int(self.step))
        if not self.run_key:
            object.__setattr__(self, "run_key", self.run_id)

    @classmethod
    def from_mapping(cls, meta: Mapping[str, Any]) -> RunMeta:
        """From a mapping of its fields (a run record's columns, a test's labels): missing required and unknown
        keys are refused by name."""
        known = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in REQUIRED if k not in meta]
        unknown = sorted(set(meta) - set(known))
        if missing or unknown:
            raise RunMetaError(f"run_meta: missing {missing}, unknown {unknown}; it must supply {list(REQUIRED)} "
                               f"and may supply {[k for k in known if k not in REQUIRED]}")
        return cls(**dict(meta))

    def columns(self) -> dict[str, Any]:
        """The record columns, in the records' order: run_key first, as the ledger and the run dirs name runs."""
        d = dataclasses.asdict(self)
        return {k: d[k] for k in ("run_key", "run_id", "campaign", "model", "policy", "mechanism", "seed", "step",
                                  "regime", "config_hash", "eval_hash")}

    def with_eval_hash(self, eval_hash: str) -> RunMeta:
        return dataclasses.replace(self, eval_hash=eval_hash)
