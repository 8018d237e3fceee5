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

from evaluation.benchmark_data import validate_items, write_benchmark, write_manifest
from typing import Any

from evaluation.builders import BUILDERS, GENERATED, BuildError, download_rows, local_rows
from evaluation.suite import Benchmark, Suite
from wtcommon.errors import RunFailed, UserError


def _generated(suite: Suite, b: Benchmark, seed: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    options = {**b.options, **({"seed": seed} if seed is not None else {})}
    try:
        return GENERATED[b.id](b.n_items, options)
    except ValueError as e:  # a bad seed in the suite: the user's to fix (exit 2)
        raise UserError(f"{suite.path}: benchmark {b.id}: {e}") from e


def build_benchmarks(suite: Suite, ids: list[str], out_dir: Path, revisions: dict[str, str] | None = None,
                     on_built: Callable[[str, int], None] | None = None, seed: int | None = None,
                     sources_dir: Path | None = None) -> Path:
    """Build benchmarks `ids` of `suite` into `out_dir` (one <id>.parquet each, `revisions` pinning sources by id,
    `seed` overriding the generated benchmarks' seed, `sources_dir` reading `<id>.jsonl` source rows there
    instead of the hub), calling `on_built(id, n_items)` after each; returns the manifest's path. Every benchmark
    is built before any file is written: a bad row leaves nothing behind."""
    built, sources = {}, {}
    for bid in ids:
        b = suite.benchmark(bid)
        df, sources[bid] = _build_one(suite, b, revisions, seed, sources_dir)
        if len(df) != b.n_items:
            msg = f"{bid}: built {len(df)} items, the suite expects {b.n_items}"
            if sources_dir is not None and bid not in GENERATED:
                raise UserError(f"{msg} ({sources_dir}/{bid}.jsonl holds a different number of rows)")
            raise RunFailed(f"{msg} (source revision changed?)")
        built[bid] = validate_items(df.reset_index(drop=True), f"{bid} (being built)", b.grader)
    for bid, df in built.items():
        write_benchmark(df, out_dir, bid, suite.benchmark(bid).grader)
        if on_built is not None:
            on_built(bid, len(df))
    return write_manifest(out_dir, ids, kind="benchmarks", sources=sources)


def _build_one(suite: Suite, b: Benchmark, revisions: dict[str, str] | None, seed: int | None,
               sources_dir: Path | None) -> tuple[Any, dict[str, Any]]:
    """One benchmark's items and provenance. A bad row of a local source file is the user's to fix (exit 2); of a
    download, the source changed under the builder (exit 1)."""
    if sources_dir is not None and b.id not in GENERATED:
        rows, prov = local_rows(sources_dir, b.id)  # BuildError: a UserError, exit 2
        try:
            return BUILDERS[b.id](rows), prov
        except BuildError as e:
            raise BuildError(f"{prov['path']}: {e}") from e
    rows, prov = _generated(suite, b, seed) if b.id in GENERATED else ([], {})
    try:
        if b.id not in GENERATED:
            rows, prov = download_rows(b.id, (revisions or {}).get(b.id))
        return BUILDERS[b.id](rows), prov
    except BuildError as e:  # the source changed under the builder: the build failed (exit 1)
        raise RunFailed(str(e)) from e
    except Exception as e:  # the hub, the network, a gated set: any of them
        raise RunFailed(f"{b.id}: download failed ({type(e).__name__}: {e}); gated sets (GPQA) need "
                        "`huggingface-cli login`") from e
