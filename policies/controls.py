"""Controls the paper ran but the release lacks (STUDY.md §3.5).

- `matched_random`: keep the same *number* the wrapped selector keeps, with the same structure (per
  group, globally, or whole groups), chosen uniformly at random from an RNG seeded by (run seed, step).
  Answers "is it which sequences are kept, or only how many?".
- `matched_update_tokens`: no selection; make the token mass carrying gradient equal to the selector's
  (`scale`: every token weighted kept_tokens / valid_tokens; `random_sequences`: a random subset of
  sequences whose token count first reaches the selector's). Answers "is it just the smaller step (P6)?".
- strength variants: the same scorer/actuator with one knob moved, as named parameter sets.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any
from collections.abc import Mapping

import torch
from torch import Tensor

from policies import signals
from policies.batch import StepBatch
from policies.errors import PolicyConfigError

CONTROLS: dict[str, dict[str, tuple[str, ...]]] = {
    "matched_random": {"structure": ("auto", "per_group", "global", "whole_groups")},
    "matched_update_tokens": {"mode": ("scale", "random_sequences")},
}

# The strength knob of each actuator (STUDY.md §3.5 "alternative strength").
STRENGTH_KNOBS: dict[str, tuple[str, ...]] = {
    "threshold_band": ("low", "high"),
    "gfpo": ("k",),
    "max_variance": ("keep_fraction",),
    "topk_fraction": ("fraction",),
    "advantage_reweight": ("alpha",),
    "per_advantage": ("alpha",),
    "softmax": ("temperature",),
    "difficulty_band": ("focus_weight",),
    "reward_gap": ("temperature", "floor"),
    "dump_ucb": ("temperature", "floor", "c"),
    "tscl": ("temperature", "floor"),
}


def control_generator(seed: int, step: int, salt: str = "") -> torch.Generator:
    """A torch RNG determined by (run seed, step): reruns of a run draw the same random subsets."""
    digest = hashlib.sha256(f"windtunnel-control:{seed}:{step}:{salt}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))


def matched_random(keep: Tensor, batch: StepBatch, structure: str, gen: torch.Generator) -> Tensor:
    """A random keep mask with the same counts as `keep` under `structure` (vectorised; no group loop)."""
    valid = batch.valid
    u = torch.rand(batch.size, generator=gen).to(valid.device)  # CPU generator: same draws on any device
    if structure == "global":
        k = int((keep & valid).sum())
        key = torch.where(valid, u, torch.full_like(u, -1.0))
        out = torch.zeros_like(valid)
        out[torch.sort(key, descending=True, stable=True).indices[:k]] = True
        return out & valid
    layout = signals.group_layout(batch)
    g = batch.group
    kept_per_group = torch.zeros(batch.n_groups, dtype=torch.long, device=g.device)
    kept_per_group.index_add_(0, g[valid], keep[valid].long())
    if structure == "per_group":
        rank = signals.rank_within_group(batch, u, descending=True)
        return valid & (rank >= 0) & (rank < kept_per_group[g])
    if structure == "whole_groups":
        n_kept = int((kept_per_group > 0).sum())
        gu = torch.rand(batch.n_groups, generator=gen).to(g.device)
        gu = torch.where(layout.counts > 0, gu, torch.full_like(gu, -1.0))
        chosen = torch.zeros(batch.n_groups, dtype=torch.bool, device=g.device)
        chosen[torch.sort(gu, descending=True, stable=True).indices[:n_kept]] = True
        return valid & chosen[g]
    raise PolicyConfigError(f"matched_random.structure: got {structure!r}; allowed: "
                            f"{list(CONTROLS['matched_random']['structure'])}")


def matched_update_tokens(keep: Tensor, batch: StepBatch, mode: str, gen: torch.Generator) -> Tensor:
    """(B,) per-sequence weights whose token mass matches the tokens `keep` would train on."""
    length = signals.response_length(batch)
    kept_tokens = float((length * keep.float()).sum())
    valid_tokens = float(length.sum())
    if mode == "scale":
        ratio = kept_tokens / valid_tokens if valid_tokens > 0 else 0.0
        return batch.valid.float() * ratio
    perm = torch.randperm(batch.size, generator=gen).to(length.device)
    before = torch.cumsum(length[perm], 0) - length[perm]
    chosen = torch.zeros(batch.size, dtype=torch.bool, device=length.device)
    chosen[perm] = before < kept_tokens
    return (chosen & batch.valid & (length > 0)).float()


def strength_variant(config: Mapping[str, Any], name: str, **params: Any) -> dict[str, Any]:
    """A named copy of a policy config with strength knob(s) moved, e.g.
    `strength_variant(gfpo_cfg, "gfpo_k2", k=2)`. Only declared knobs may move (others are not strength)."""
    actuator = config.get("actuator", {}).get("name")
    knobs = STRENGTH_KNOBS.get(actuator, ())
    bad = sorted(set(params) - set(knobs))
    if bad:
        raise PolicyConfigError(f"strength variant {name!r}: {bad} is not a strength knob of {actuator!r}; knobs: "
                                f"{list(knobs)}")
    out = copy.deepcopy(dict(config))
    out["name"] = name
    out["actuator"] = {**out["actuator"], "params": {**out["actuator"].get("params", {}), **params}}
    out.pop("search_space", None)
    return out
