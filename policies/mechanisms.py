"""The data-policy mechanisms, declared once: every package that names a mechanism (the policy loader, the
campaign grid, the records schema) takes them from here.

* none: the policy leaves the batch alone (the baseline).
* select: a scorer ranks rollouts and a selector keeps some of them.
* reweight: a scorer's scores become per-rollout or per-token loss weights.
* mix: a mixer sets the training-data proportions of the domains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MECHANISMS = ("none", "select", "reweight", "mix")


def mechanism_of(cfg: Mapping[str, Any], name: str | None = None) -> str:
    """The mechanism a policy config declares, as text: its `mechanism` key; without one, "none" for the policy
    named `baseline` (`name`, else the config's own `name`) and "" for any other, which is no mechanism (a
    caller refuses it against `MECHANISMS`)."""
    policy = cfg.get("name") if name is None else name
    return str(cfg.get("mechanism", "none" if policy == "baseline" else ""))
