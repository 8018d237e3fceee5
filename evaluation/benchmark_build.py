"""Build the suite's benchmark data from the HF hub: download each source at its pinned revision, subset or sample
it as the study did (evaluation/builders.py), check the item count the suite declares, write Parquet and the
sha256 manifest (evaluation/benchmark_data.py). What `campaign data benchmarks` runs.

A download or build that fails is `RunFailed` (exit 1): the source changed or the hub refused, not the user's
input; the message names the benchmark. A generated benchmark (`GENERATED`: the clean arithmetic set) needs no
network: its rows come from its generator, seeded by the suite's `options.seed` or by `seed` (a campaign's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evaluation.benchmark_data import write_benchmark, write_manifest
from typing import Any

from evaluation.builders import BUILDERS, GENERATED, BuildError, download_rows
from evaluation.suite import Benchmark, Suite
from wtcommon.errors import RunFailed, UserError


def _generated(suite: Suite, b: Benchmark, seed: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    options = {**b.options, **({"seed": seed} if seed is not None else {})}
    try:
        return GENERATED[b.id](b.n_items, options)
    except ValueError as e:  # a bad seed in the suite: the user's to fix (exit 2)
        raise UserError(f"{suite.path}: benchmark {b.id}: {e}") from e


def build_benchmarks(suite: Suite, ids: list[str], out_dir: Path, revisions: dict[str, str] | None = None,
                     on_built: Callable[[str, int], None] | None = None, seed: int | None = None) -> Path:
    """Build benchmarks `ids` of `suite` into `out_dir` (one <id>.parquet each, `revisions` pinning sources by id,
    `seed` overriding the generated benchmarks' seed), calling `on_built(id, n_items)` after each; returns the
    manifest's path."""
    sources = {}
    for bid in ids:
        b = suite.benchmark(bid)
        generated = _generated(suite, b, seed) if bid in GENERATED else None
        try:
            rows, prov = generated or download_rows(bid, (revisions or {}).get(bid))
            df = BUILDERS[bid](rows)
        except BuildError as e:  # the source changed under the builder: the build failed (exit 1)
            raise RunFailed(str(e)) from e
        except Exception as e:  # the hub, the network, a gated set: any of them
            raise RunFailed(f"{bid}: download failed ({type(e).__name__}: {e}); gated sets (GPQA) need "
                            "`huggingface-cli login`") from e
        if len(df) != b.n_items:
            raise RunFailed(f"{bid}: built {len(df)} items, the suite expects {b.n_items} (source revision changed?)")
        write_benchmark(df, out_dir, bid, b.grader)
        sources[bid] = prov
        if on_built is not None:
            on_built(bid, len(df))
    return write_manifest(out_dir, ids, kind="benchmarks", sources=sources)
