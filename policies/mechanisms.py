"""The data-policy mechanisms, declared once: every package that names a mechanism (the policy loader, the
campaign grid, the records schema) takes them from here.

* none: the policy leaves the batch alone (the baseline).
* select: a scorer ranks rollouts and a selector keeps some of them.
* reweight: a scorer's scores become per-rollout or per-token loss weights.
* mix: a mixer sets the training-data proportions of the domains.
* curriculum: a stateful per-prompt rule proposes which prompts are rolled out next (`policies.curricula`).

A `curriculum:` block composes with the others (`CURRICULUM_COMPOSES`): alone (mechanism curriculum); with a
post-rollout selector or reweighter (mechanism select/reweight: the curriculum picks the prompts, the policy
acts on their rollouts, e.g. GRESO + the DAPO filter); with a mixer (mechanism mix: the mixer's domain counts
first, then the curriculum picks the prompts within each domain through `allowed`), except for curricula that
fix the pool themselves (`REFUSED_WITH_MIXER`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Mechanism(StrEnum):
    """How a policy acts on training (module docstring). A member is its stored string (`Mechanism.select ==
    "select"`), so specs, ledgers and records keep plain text while code compares members."""

    none = "none"
    select = "select"
    reweight = "reweight"
    mix = "mix"
    curriculum = "curriculum"


MECHANISMS = tuple(m.value for m in Mechanism)

# The mechanisms a policy's `curriculum:` block may sit beside ("none" is the baseline: it takes none).
CURRICULUM_COMPOSES = ("curriculum", "select", "reweight", "mix")

# Curricula refused together with a mixer, with the reason (the loader's message).
REFUSED_WITH_MIXER = {
    "hardest_k": "hardest_k keeps a fixed hardest fraction of the whole pool, which already decides the domain "
                 "proportions a mixer would set; run the mixer without it, or hardest_k without the mixer",
}


def declared_mechanism(cfg: Mapping[str, Any], name: str | None = None) -> str:
    """The mechanism a policy config declares, as written: its `mechanism` key; without one, "none" for the
    policy named `baseline` (`name`, else the config's own `name`) and "" for any other (for messages)."""
    policy = cfg.get("name") if name is None else name
    return str(cfg.get("mechanism", "none" if policy == "baseline" else ""))


def mechanism_of(cfg: Mapping[str, Any], name: str | None = None) -> Mechanism | None:
    """The `Mechanism` a policy config declares (`declared_mechanism`), or None when it declares none or one
    outside the set (the caller refuses it, naming `declared_mechanism`)."""
    text = declared_mechanism(cfg, name)
    return Mechanism(text) if text in MECHANISMS else None
