"""How a curriculum composes with a mixer, shared by both trainers (the local GRPO loop and verl's
`windtunnel_sync`): the mixer sets how many prompts each domain gets (`DomainSampler.counts`), then the
curriculum picks that many within each domain (`propose(allowed=domain)`); without a mixer it picks the whole
batch. Here, not in `training`, because the verl trainer lives in `policies.verl` (below `training`)."""

from __future__ import annotations

from typing import Any

import numpy as np


# Diagnostics that count prompts: summed over a mixer's per-domain calls. `mean_*` keys are averaged weighted by
# each call's prompts; any other key is the rule's state (e.g. greso's p_easy) and keeps the last call's value.
COUNT_DIAGNOSTICS = frozenset({"proposed", "skipped", "fallback_uniform", "replayed", "retested",
                               "filled_from_parked", "candidates"})


def merge_diagnostics(calls: list[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """One step's curriculum diagnostics from its per-domain calls ((prompts asked, diagnostics) each)."""
    out: dict[str, float] = {}
    total = sum(n for n, _ in calls)
    for n, diag in calls:
        for k, v in diag.items():
            if k in COUNT_DIAGNOSTICS:
                out[k] = out.get(k, 0.0) + float(v)
            elif k.startswith("mean_"):
                out[k] = out.get(k, 0.0) + float(v) * n / total
            else:
                out[k] = float(v)
    return out


def curriculum_batch(curriculum: Any, step: int, counts: np.ndarray | None, pool_domain: np.ndarray) -> np.ndarray:
    """The step's prompt ids from the curriculum: the whole batch, or `counts[d]` within each domain d."""
    if counts is None:
        return np.asarray(curriculum.propose(step), dtype=np.int64)
    parts: list[np.ndarray] = []
    calls: list[tuple[int, dict[str, float]]] = []
    for d, c in enumerate(np.asarray(counts, dtype=np.int64)):
        if c <= 0:
            continue
        parts.append(np.asarray(curriculum.propose(step, allowed=pool_domain == d, n=int(c)), dtype=np.int64))
        calls.append((int(c), dict(curriculum.last_diagnostics)))
    curriculum.last_diagnostics = merge_diagnostics(calls)
    return np.concatenate(parts)
