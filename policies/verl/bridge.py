"""Pure conversions between verl/TransferQueue data and `StepBatch` (no Ray, no trainer state), so the
trainer subclass stays thin and these are testable on plain tensors."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from policies.batch import StepBatch, dense_ids
from policies.errors import PolicyConfigError


def to_list(value: Any) -> list:
    """A TensorDict non-tensor entry (NonTensorStack / ndarray / list) as a Python list."""
    if hasattr(value, "tolist"):
        out = value.tolist()
    else:
        out = list(value)
    return list(out)


def build_step_batch(
    padded: Mapping[str, Tensor],
    uids: Sequence[str],
    tags: Sequence[Mapping[str, Any]],
    *,
    domains: Sequence[str] | None = None,
    domain_names: Sequence[str] | None = None,
) -> StepBatch:
    """`padded` holds right-padded (B, L) `advantages`, `response_mask`, `rm_scores` (reward on the last
    token) and optionally `old_log_probs`. Group ids are dense from the uid strings; rows tagged
    `is_padding` (added by `_balance_batch`, copies of the first real row) are marked padding."""
    mask = padded["response_mask"]
    is_padding = torch.tensor([bool(t.get("is_padding", False)) for t in tags], dtype=torch.bool)
    rewards = (padded["rm_scores"].float() * mask.float()).sum(-1)
    dom = None
    if domains is not None:
        names = list(domain_names or [])
        index = {n: i for i, n in enumerate(names)}
        bad = sorted({str(d) for d, p in zip(domains, is_padding.tolist(), strict=True) if not p
                      and str(d) not in index})
        if bad:
            raise PolicyConfigError(f"windtunnel: rollout domain(s) {bad} not in the policy's domains {names}; "
                                    "fix +windtunnel.domains or the dataset's domain column")
        dom = torch.tensor([index.get(str(d), 0) for d in domains], dtype=torch.long)
    return StepBatch(
        advantages=padded["advantages"].float(),
        rewards=rewards,
        response_mask=mask,
        group=dense_ids([str(u) for u in uids]),
        old_log_probs=padded.get("old_log_probs"),
        domain=dom,
        is_padding=is_padding,
    )


def rolled_out_prompts(uids: Sequence[Any], domains: Sequence[Any], is_padding: Sequence[bool], names: Sequence[str],
                       prefix: str = "") -> dict[str, float]:
    """Prompts per domain in a rolled-out batch: distinct `uid`s (one per prompt group) among non-padding
    rows, as `<prefix>rolled_out_prompts_<domain>`. Read from what verl rolled out, not from the sampler."""
    keep = ~np.asarray(is_padding, dtype=bool)
    u = np.asarray([str(x) for x in uids], dtype=object)[keep]
    d = np.asarray([str(x) for x in domains], dtype=object)[keep]
    _, first = np.unique(u, return_index=True)
    counts = {str(n): 0 for n in names}
    counts.update({str(n): int(c) for n, c in zip(*np.unique(d[first], return_counts=True), strict=True)})
    return {f"{prefix}rolled_out_prompts_{n}": float(c) for n, c in counts.items()}
