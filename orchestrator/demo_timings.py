"""Where `campaign demo`'s time goes (`campaign demo --timings`): the demo process's own parts, timed where they
run, and the campaign's stages, read back from the ledger's attempts (each stage is a Ray job with its own
start and end there).

Why a breakdown and not one number: the demo is the newcomer's first result, and it is cut by the part that
dominates; stages overlap (two at a time on two cores), so a stage row gives its count, sum and mean, and
the campaign row the wall time they took together.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.engine.ledger.base import Attempt


@dataclass
class Part:
    name: str
    wall_s: float
    note: str = ""


@dataclass
class DemoTimings:
    """Parts in the order they were recorded; `total` is the demo's wall time from its start."""

    t0: float = field(default_factory=time.time)
    parts: list[Part] = field(default_factory=list)

    def add(self, name: str, wall_s: float, note: str = "") -> None:
        self.parts.append(Part(name, float(wall_s), note))

    @contextmanager
    def part(self, name: str, note: str = "") -> Iterator[None]:
        t = time.time()
        try:
            yield
        finally:
            self.add(name, time.time() - t, note)

    def add_stages(self, attempts: list[Attempt]) -> None:
        """One row per stage kind (train, evaluate) from the ledger's attempts, and the campaign's wall time
        from the first attempt's start to the last one's end."""
        done = [a for a in attempts if a.ended_at is not None]
        for stage in dict.fromkeys(a.stage for a in done):
            walls = [a.duration_s or 0.0 for a in done if a.stage == stage]
            jobs = f"{len(walls)} job" + ("s" if len(walls) > 1 else "")
            self.add(f"{stage} stages", sum(walls), f"{jobs}, mean {sum(walls) / len(walls):.1f} s, longest "
                     f"{max(walls):.1f} s; summed (they run two at a time)")
        if done:
            span = max(float(a.ended_at or 0.0) for a in done) - min(a.started_at for a in done)
            self.add("campaign: first stage start → last stage end", span, "wall time of every stage together")

    def lines(self) -> list[str]:
        """The breakdown as aligned text lines, ending with the demo's total."""
        width = max([len(p.name) for p in self.parts] + [5])
        out = [f"{p.name:<{width}}  {p.wall_s:7.1f} s" + (f"  ({p.note})" if p.note else "") for p in self.parts]
        out.append(f"{'total':<{width}}  {time.time() - self.t0:7.1f} s  (the demo's wall time; the venv before it "
                   "is not counted)")
        return out
