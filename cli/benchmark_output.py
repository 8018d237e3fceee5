"""What `campaign data benchmarks` prints around a build: the plan (each benchmark's source, items, grader and
metric) before, the suite's aggregates (with how many of their benchmarks this build made) after."""

from __future__ import annotations

from pathlib import Path

from cli.console import out
from evaluation.suite import Suite


def print_build_plan(s: Suite, ids: list[str], revs: dict[str, str], sources: Path | None) -> None:
    """One line per benchmark to build: where its rows come from (hub path@revision, a local file or the
    generator), the items the suite expects, its grader and decoding."""
    from evaluation.builders import GENERATED, SOURCES

    out.print(f"suite {s.name} v{s.version}: building {len(ids)} of {len(s.benchmarks)} benchmarks"
              + (" (memorization probe on by default)" if s.memorization_probe else ""), highlight=False,
              markup=False, soft_wrap=True)
    for bid in ids:
        b = s.benchmark(bid)
        if bid in GENERATED:
            src = "generated from its seed"
        elif sources is not None:
            src = str(sources / f"{bid}.jsonl")
        else:
            src = f"{SOURCES[bid]['path']}@{revs.get(bid) or SOURCES[bid].get('revision') or 'main (unpinned)'}"
        out.print(f"  {bid}: {b.n_items} items from {src}; grader {b.grader}, {b.metric_name}", highlight=False,
                  markup=False, soft_wrap=True)


def print_aggregates(s: Suite, ids: list[str]) -> None:
    """The aggregates the records of this suite will be summarised by, each with its members."""
    for a in s.aggregates:
        built = sum(1 for b in a.benchmarks if b in ids)
        out.print(f"aggregate {a.name} ({a.kind}; {built} of {len(a.benchmarks)} benchmarks built here): "
                  f"{', '.join(a.benchmarks)}", highlight=False, markup=False, soft_wrap=True)
