"""Pre-rollout domain mixing: draw each next batch from per-domain pools in the target proportions.

The study's mixer re-ordered prompts that were already rolled out, so its proportions could not change the
data (STUDY.md §3.3, P12). `DomainSampler` picks *which prompts are rolled out*, and logs target and
realised proportions each step so an inert mixer is visible (`is_inert`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from policies.errors import PolicyConfigError


def largest_remainder(p: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to n, as close to p * n as possible (ties to the lower domain index)."""
    raw = p * n
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short > 0:
        order = np.argsort(-(raw - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def carried_counts(p: np.ndarray, n: int, carry: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer counts summing to n for the wanted `p * n + carry`, and the new carry (wanted minus given).

    Carrying each step's rounding remainder into the next makes the cumulative counts track the cumulative
    targets within about one item per domain, so realised proportions converge to the targets over a run and
    a floor is met on average (largest remainder restarted every step gave `static` [22, 21, 21] for 300
    steps at 64 prompts, and a 0.05 floor 3/64 every step). Ties go to the lower index; the carry repays them.
    A negative want (a domain that got more than its share) gets 0 items, never a negative count."""
    want = p * n + carry
    raw = np.maximum(want, 0.0)
    counts = np.floor(raw + 1e-9).astype(np.int64)
    short = n - int(counts.sum())
    frac = raw - counts
    if short > 0:
        counts[np.argsort(-frac, kind="stable")[:short]] += 1
    elif short < 0:  # only after clipping a negative want: take back from the smallest remainders
        order = [d for d in np.argsort(frac, kind="stable") if counts[d] > 0]
        counts[order[:-short]] -= 1
    return counts, want - counts


class DomainSampler:
    """Draw `batch_size` item indices per step from per-domain pools.

    Each domain's pool is walked in a seeded random order without replacement, reshuffled when exhausted
    (one pass = one epoch of that domain). Counts per domain come from `carried_counts`: largest-remainder
    rounding of the proportions plus the remainder carried from earlier steps (part of the checkpointed
    state), so realised proportions converge to the targets; a domain whose pool is empty gets nothing and its
    share goes to the others.
    `item_domains`: (N,) dense domain ids 0..D-1 (D = `n_domains` or max id + 1)."""

    def __init__(self, item_domains: Sequence[int] | np.ndarray, batch_size: int, seed: int,
                 n_domains: int | None = None,
                 names: Sequence[str] | None = None) -> None:
        dom = np.asarray(item_domains, dtype=np.int64).reshape(-1)
        if batch_size < 1:
            raise PolicyConfigError(f"DomainSampler.batch_size: got {batch_size}; must be >= 1")
        if dom.size == 0 or dom.min() < 0:
            raise PolicyConfigError("DomainSampler.item_domains: need at least one item with domain id >= 0")
        self.n_domains = int(n_domains if n_domains is not None else dom.max() + 1)
        if dom.max() >= self.n_domains:
            raise PolicyConfigError(f"DomainSampler.item_domains: id {int(dom.max())} >= n_domains {self.n_domains}")
        self.names = list(names) if names is not None else [str(d) for d in range(self.n_domains)]
        if len(self.names) != self.n_domains:
            raise PolicyConfigError(f"DomainSampler.names: {len(self.names)} names for {self.n_domains} domains")
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.pools = [np.flatnonzero(dom == d) for d in range(self.n_domains)]
        self._order = [self.rng.permutation(p) for p in self.pools]
        self._pos = [0] * self.n_domains
        self.epochs = [0] * self.n_domains
        self.last_diagnostics: dict[str, float] = {}
        self.history: list[np.ndarray] = []  # realised proportions per call
        self.carry = np.zeros(self.n_domains)  # rounding remainder owed to each domain (wanted - given)

    def _take(self, d: int, k: int) -> np.ndarray:
        out = []
        while k > 0:
            rest = self._order[d][self._pos[d]:]
            take = rest[:k]
            out.append(take)
            self._pos[d] += take.size
            k -= take.size
            if self._pos[d] >= self._order[d].size:
                self._order[d] = self.rng.permutation(self.pools[d])
                self._pos[d] = 0
                self.epochs[d] += 1
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def sample(self, proportions: Sequence[float] | np.ndarray | torch.Tensor) -> np.ndarray:
        """Item indices for the next batch (shuffled across domains)."""
        counts = self.counts(proportions)
        idx = np.concatenate([self._take(d, int(c)) for d, c in enumerate(counts) if c > 0])
        return idx[self.rng.permutation(idx.size)]

    def counts(self, proportions: Sequence[float] | np.ndarray | torch.Tensor) -> np.ndarray:
        """(D,) items per domain for the next batch, summing to `batch_size`, recorded in `history` and
        `last_diagnostics`; `sample` takes them from the domains' own orders, a curriculum composed with a mixer
        chooses them itself (`policies.curricula`: the prompts within each domain)."""
        p = proportions.detach().cpu().numpy() if isinstance(proportions, torch.Tensor) else np.asarray(proportions)
        p = p.astype(np.float64).reshape(-1)
        if p.size != self.n_domains or not np.all(np.isfinite(p)) or p.min() < 0 or p.sum() <= 0:
            raise PolicyConfigError(f"DomainSampler.sample: proportions must be {self.n_domains} finite non-negative "
                                    f"numbers, got {p.tolist()}")
        target = p / p.sum()
        avail = np.array([pool.size > 0 for pool in self.pools])
        eff = np.where(avail, target, 0.0)
        eff = eff / eff.sum()
        counts, self.carry = carried_counts(eff, self.batch_size, np.where(avail, self.carry, 0.0))
        realised = counts / counts.sum()
        self.history.append(realised)
        self.last_diagnostics = {
            **{f"target_prop_{n}": float(t) for n, t in zip(self.names, target, strict=True)},
            **{f"realised_prop_{n}": float(r) for n, r in zip(self.names, realised, strict=True)},
        }
        return counts

    def state_dict(self) -> dict:
        """A snapshot (copies, not references) for checkpointing mixing state beside verl's dataloader state."""
        return {"rng": self.rng.bit_generator.state, "order": [o.tolist() for o in self._order], "pos": list(self._pos),
                "epochs": list(self.epochs), "history": [h.tolist() for h in self.history],
                "carry": self.carry.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self._order = [np.asarray(o, dtype=np.int64) for o in state["order"]]
        self._pos, self.epochs = list(state["pos"]), list(state["epochs"])
        self.history = [np.asarray(h).copy() for h in state.get("history", [])]
        # a state saved before the carry existed resumes with nothing owed
        self.carry = np.asarray(state.get("carry", np.zeros(self.n_domains)), dtype=np.float64).copy()


def is_inert(history: Sequence[Sequence[float]] | Sequence[np.ndarray] | np.ndarray, tol: float = 0.02) -> bool:
    """True when realised per-domain proportions (T, D) never moved by more than `tol` from their first
    value: the mixer did not change the data (DESIGN.md rule 7). Fewer than 2 steps is not evidence: False."""
    h = np.asarray(history, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] < 2:
        return False
    return bool(np.nanmax(np.abs(h - h[0])) <= tol)
