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


_HASH_BASE = np.uint64(1_000_003)


def content_hash(tokens: Tensor) -> np.ndarray:
    """(B,) uint64 polynomial hash of each row's token ids; `tokens` (B, L) long, padded with -1 (pads add
    nothing, so a row's hash does not depend on how wide the batch was padded)."""
    t = tokens.detach().cpu().numpy().astype(np.int64) + 1  # pad -1 -> 0
    powers = np.cumprod(np.full(t.shape[1], _HASH_BASE, dtype=np.uint64), dtype=np.uint64)  # wraps mod 2^64
    with np.errstate(over="ignore"):
        return (t.astype(np.uint64) * powers[None, :]).sum(axis=1, dtype=np.uint64)


def canonical_order(prompts: Tensor, responses: Tensor, group: Tensor, is_padding: Tensor) -> Tensor:
    """A permutation of the batch rows fixed by their content: by prompt, group, padding last, then response.

    Why: verl's async agent loop hands back a group's samples in the order they finished, which moves with the
    machine's load. GRPO does not care (samples are exchangeable), but a policy that breaks ties by position
    (GFPO keeping k of n samples of equal score, matched-random controls) would keep different samples of the
    same rollouts from run to run. Applying the policy in this order makes its choice a function of content."""
    keys = (content_hash(responses), (responses >= 0).sum(-1).cpu().numpy(), is_padding.cpu().numpy(),
            group.cpu().numpy(), content_hash(prompts))
    return torch.as_tensor(np.lexsort(keys), dtype=torch.long)  # the last key is the primary one


def take(sb: StepBatch, idx: Tensor) -> StepBatch:
    """The batch's rows in the order `idx` (group ids re-densified in that order)."""
    return StepBatch(
        advantages=sb.advantages[idx], rewards=sb.rewards[idx], response_mask=sb.response_mask[idx],
        group=dense_ids(sb.group[idx].cpu().numpy()),
        old_log_probs=sb.old_log_probs[idx] if sb.old_log_probs is not None else None,
        domain=sb.domain[idx] if sb.domain is not None else None,
        is_padding=sb.is_padding[idx] if sb.is_padding is not None else None,
    )


def apply_in_canonical_order(policy: Any, sb: StepBatch, prompts: Tensor, responses: Tensor, step: int) -> Any:
    """`policy.apply(sb, step)` with the rows in `canonical_order`, its weights and advantages put back in the
    batch's own order: the same rollouts get the same weights however the batch was ordered."""
    assert sb.is_padding is not None  # filled by StepBatch.__post_init__
    perm = canonical_order(prompts, responses, sb.group, sb.is_padding).to(sb.advantages.device)
    res = policy.apply(take(sb, perm), step=step)
    inv = torch.argsort(perm)
    if res.weights is not None:
        res.weights = res.weights[inv]
    if res.advantages is not None:
        res.advantages = res.advantages[inv]
    return res


def rollout_correctness(uids: Sequence[Any], is_padding: Sequence[bool], uid_prompt: dict[str, int],
                        extra_fields: Sequence[Any] | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """(prompt ids (P,), correctness (P, K), read from `acc`) of a rolled-out batch for a curriculum update.

    Rows are grouped by their prompt group `uid` (mapped to the pool index the curriculum proposed), padding rows
    dropped; correctness is each rollout's `reward_extra_info["acc"]` (False when the row has none, and the
    flag says whether every row had one). Groups of unequal size are a trainer bug (named)."""
    keep = ~np.asarray(is_padding, dtype=bool)
    u = np.asarray([str(x) for x in uids], dtype=object)[keep]
    rows = [e for e, k in zip(extra_fields, keep, strict=True) if k] if extra_fields is not None else []
    infos = [(r.get("reward_extra_info") or {}) if isinstance(r, dict) else {} for r in rows]
    has = bool(infos) and all("acc" in i for i in infos)
    acc = np.array([float(bool(i.get("acc", False))) for i in infos], dtype=np.float64)
    unknown = sorted(set(u) - set(uid_prompt))
    if unknown:
        raise PolicyConfigError(f"windtunnel: curriculum: rollouts of prompt group(s) {unknown[:3]} that this "
                                "step's fetch did not propose")
    groups, inv, counts = np.unique(u, return_inverse=True, return_counts=True)
    if counts.size and counts.min() != counts.max():
        raise PolicyConfigError(f"windtunnel: curriculum: prompt groups of unequal sizes {sorted(set(counts))}")
    order = np.argsort(inv, kind="stable")
    k = int(counts[0]) if counts.size else 0
    correct = acc[order].reshape(groups.size, k) if has else np.zeros((groups.size, k))
    ids = np.array([uid_prompt[g] for g in groups], dtype=np.int64)
    return ids, correct, has
