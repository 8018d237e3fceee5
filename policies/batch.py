"""`StepBatch`: the signals of one training step as plain tensors.

Built once per step from the host framework (verl's TransferQueue or the local backend), so scorers
and actuators never touch framework objects and can be tested on hand-made tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from policies.errors import PolicyConfigError


def dense_ids(labels: Sequence[object] | np.ndarray) -> Tensor:
    """Map arbitrary hashable labels (e.g. verl uid strings) to dense ids 0..G-1 in first-seen order."""
    _, first, inverse = np.unique(np.asarray(labels, dtype=object).astype(str), return_index=True, return_inverse=True)
    # np.unique sorts labels; renumber by first occurrence so ids follow batch order.
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return torch.as_tensor(order[inverse.reshape(-1)], dtype=torch.long)


@dataclass
class StepBatch:
    """One training step. Shapes: B sequences, L response tokens.

    advantages (B, L) float; rewards (B,) float (summed sequence reward); response_mask (B, L) bool/float;
    old_log_probs (B, L) float or None (needed only by token-probability scorers); group (B,) long, dense
    0..G-1 (one id per prompt); domain (B,) long, dense 0..D-1 (defaults to all 0); is_padding (B,) bool
    (rows added by verl's batch balancing: they never get weight and never enter statistics).
    """

    advantages: Tensor
    rewards: Tensor
    response_mask: Tensor
    group: Tensor
    old_log_probs: Tensor | None = None
    domain: Tensor | None = None
    is_padding: Tensor | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        adv = self.advantages
        if adv.dim() != 2:
            raise PolicyConfigError(f"StepBatch.advantages: expected shape (B, L), got {tuple(adv.shape)}")
        b, n_tok = adv.shape
        dev = adv.device  # every (B,) tensor lives with the (B, L) ones (CPU or GPU)
        self.rewards = torch.as_tensor(self.rewards).reshape(-1).to(dev, torch.float32)
        self.group = torch.as_tensor(self.group).reshape(-1).to(dev, torch.long)
        if self.domain is None:
            self.domain = torch.zeros(b, dtype=torch.long, device=dev)
        self.domain = torch.as_tensor(self.domain).reshape(-1).to(dev, torch.long)
        if self.is_padding is None:
            self.is_padding = torch.zeros(b, dtype=torch.bool, device=dev)
        self.is_padding = torch.as_tensor(self.is_padding).reshape(-1).to(dev, torch.bool)
        checks = {
            "rewards": (self.rewards, (b,)),
            "response_mask": (self.response_mask, (b, n_tok)),
            "group": (self.group, (b,)),
            "domain": (self.domain, (b,)),
            "is_padding": (self.is_padding, (b,)),
        }
        if self.old_log_probs is not None:
            checks["old_log_probs"] = (self.old_log_probs, (b, n_tok))
        for name, (t, shape) in checks.items():
            if tuple(t.shape) != shape:
                raise PolicyConfigError(f"StepBatch.{name}: expected shape {shape}, got {tuple(t.shape)}")
        if b:
            g = self.group
            if int(g.min()) < 0:
                raise PolicyConfigError("StepBatch.group: ids must be dense 0..G-1 (use policies.batch.dense_ids)")
            present = torch.zeros(int(g.max()) + 1, dtype=torch.bool, device=dev)
            present[g] = True
            if not bool(present.all()):
                raise PolicyConfigError("StepBatch.group: ids must be dense 0..G-1 (use policies.batch.dense_ids)")
            if int(self.domain.min()) < 0:
                raise PolicyConfigError("StepBatch.domain: ids must be >= 0")

    # ---- derived views (cached: several scorers read them) -------------------------------------
    @property
    def size(self) -> int:
        return int(self.advantages.shape[0])

    @property
    def n_groups(self) -> int:
        return int(self.group.max()) + 1 if self.size else 0

    @property
    def mask(self) -> Tensor:
        """Float (B, L) mask of tokens that can carry gradient (padding rows zeroed)."""
        if "mask" not in self._cache:
            m = self.response_mask.to(torch.float32)
            pad = self.padding
            if bool(pad.any()):
                m = m * (~pad).to(torch.float32)[:, None]
            self._cache["mask"] = m
        return self._cache["mask"]

    @property
    def valid(self) -> Tensor:
        """(B,) bool: real (non-padding) rows."""
        return ~self.padding

    @property
    def padding(self) -> Tensor:
        """(B,) bool `is_padding`, typed as set: `__post_init__` fills a missing one with all False."""
        assert self.is_padding is not None
        return self.is_padding

    @property
    def domains(self) -> Tensor:
        """(B,) long `domain`, typed as set: `__post_init__` fills a missing one with all 0."""
        assert self.domain is not None
        return self.domain

    @classmethod
    def from_padded(
        cls,
        *,
        advantages: Tensor,
        response_mask: Tensor,
        uids: Sequence[object],
        rewards: Tensor | None = None,
        token_level_rewards: Tensor | None = None,
        old_log_probs: Tensor | None = None,
        domains: Sequence[object] | Tensor | None = None,
        domain_names: Sequence[str] | None = None,
        is_padding: Sequence[bool] | Tensor | None = None,
    ) -> StepBatch:
        """Build from right-padded framework tensors: uid strings become dense group ids; sequence rewards
        are the sum of token-level rewards when only those are given; domain names map through
        `domain_names` (unknown names raise, naming them)."""
        if rewards is None:
            if token_level_rewards is None:
                raise PolicyConfigError("StepBatch.from_padded: give rewards (B,) or token_level_rewards (B, L)")
            rewards = (token_level_rewards.float() * response_mask.float()).sum(-1)
        dom: Tensor | None
        if domains is None:
            dom = None
        elif isinstance(domains, Tensor):
            dom = domains.long()
        elif domain_names is not None:
            index = {n: i for i, n in enumerate(domain_names)}
            unknown = sorted({str(d) for d in domains} - set(index))
            if unknown:
                raise PolicyConfigError(f"StepBatch.domain: unknown domain(s) {unknown}; known: {list(domain_names)}")
            dom = torch.as_tensor([index[str(d)] for d in domains], dtype=torch.long)
        else:
            dom = torch.as_tensor(np.asarray(domains, dtype=np.int64))
        pad = None if is_padding is None else torch.as_tensor(np.asarray(is_padding, dtype=bool))
        return cls(
            advantages=advantages.float(),
            rewards=rewards,
            response_mask=response_mask,
            group=dense_ids(uids),
            old_log_probs=old_log_probs,
            domain=dom,
            is_padding=pad,
        )
