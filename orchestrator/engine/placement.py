"""Where runs fit: per-node GPU arithmetic shared by preflight and the scheduler.

A run holds `gpus_per_node` GPUs on each of `nnodes` distinct nodes (orchestrator.engine.grid.run_gpus). Ray grants
exactly that shape (a job's entrypoint GPUs on one node; a STRICT_SPREAD placement group across nodes), so
the scheduler admits a run only when the nodes it sees have room for that shape, never when only the
cluster's total would. Pure functions of lists of GPU counts: tested as such, used with the declared cluster
(`compute.nodes × compute.gpus_per_node`) or the live one (`Executor.nodes()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """One node as Ray accounts it: total and free GPUs (logical), CPUs; `alive` False for a dead node."""

    node_id: str
    gpus: float
    free_gpus: float
    cpus: float = 0.0
    free_cpus: float = 0.0
    alive: bool = True


def fits(node_gpus: Sequence[float], per_node: int, nnodes: int) -> bool:
    """Whether `nnodes` distinct nodes each have at least `per_node` GPUs."""
    return sum(1 for g in node_gpus if g >= per_node) >= nnodes


def place(free: Sequence[float], per_node: int, nnodes: int) -> list[int] | None:
    """Indices of `nnodes` distinct nodes with `per_node` free GPUs each, or None.

    Best fit (the fullest nodes that still fit first), so whole nodes stay free for runs that need them."""
    cands = sorted((f, i) for i, f in enumerate(free) if f >= per_node)
    if len(cands) < nnodes:
        return None
    return sorted(i for _, i in cands[:nnodes])


def take(free: list[float], per_node: int, nnodes: int) -> bool:
    """`place` and, when it fits, subtract the run's GPUs from `free` in place."""
    idx = place(free, per_node, nnodes)
    if idx is None:
        return False
    for i in idx:
        free[i] -= per_node
    return True


def declared_nodes(nodes: int, gpus_per_node: int) -> list[Node]:
    """The cluster a campaign declares (`compute.nodes × compute.gpus_per_node`), all free."""
    return [Node(f"declared-{i}", float(gpus_per_node), float(gpus_per_node)) for i in range(nodes)]


def shape(per_node: int, nnodes: int) -> str:
    return f"{nnodes} node(s) × {per_node} GPU(s)" if nnodes > 1 else f"{per_node} GPU(s) on one node"


def describe(nodes: Sequence[Node]) -> str:
    """`3 alive nodes with 4, 4, 8 GPUs`: the live cluster in a message."""
    alive = [n for n in nodes if n.alive]
    return f"{len(alive)} alive node(s) with {', '.join(f'{n.gpus:g}' for n in alive) or 'no'} GPU(s)"
