"""Evaluation generations: which evaluation settings produced a score, as a hash.

A run's checkpoints do not depend on how it is evaluated, so the evaluation settings are not part of its
`run_key`: changing a gate or a generation limit must not retrain. But a record must say which settings
produced it, and a changed setting must re-evaluate the runs already scored. Two hashes:

- `evaluation_key(suite, options)`: everything that decides a score and is known from the campaign spec —
  the suite's name, version and every benchmark's decoding fields (after the `max_gen_toks` override), the
  grader versions, the effective health gates, the evaluator backend, `limit`, `all_checkpoints`. The
  orchestrator compares it at submit time (`N to re-evaluate`) and the evaluate stage's manifest carries it.
- `evaluation_hash(key, data_dir)`: the key plus the benchmark data's manifest (checksums of what was scored),
  known only where the data is; every record carries it (`eval_hash`), and analysis refuses to compare
  records of two hashes unless told to.

The data directory's path, fixture sizes and validation options are left out: the data's content is in the
manifest, and the rest does not change a score.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from evaluation.graders import GRADER_VERSIONS
from evaluation.suite import Benchmark, Gates, load_suite, with_max_gen_toks

# the `evaluation:` options that decide a score (orchestrator.spec.EVALUATION_KEYS lists them all)
SCORED_OPTIONS = ("backend", "limit", "all_checkpoints")


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:16]


# decoding fields added with sampled decoding (evaluation/sampling.py): left out at their greedy single-pass
# defaults, so the key of a suite that declares none of them is the key it had before they existed
_DECODING_DEFAULTS = {"samples": 1, "seed": 0, "metric": "avg"}


def _benchmark_settings(b: Benchmark) -> dict[str, Any]:
    """A benchmark's fields (id, grader, limits, options, decoding: samples/temperature/top_p/seed/metric)."""
    d = dataclasses.asdict(b)
    return {k: v for k, v in d.items() if not (k in _DECODING_DEFAULTS and v == _DECODING_DEFAULTS[k])}


def evaluation_settings(suite: str, options: dict[str, Any]) -> dict[str, Any]:
    """The settings that decide a score, as plain data (what `evaluation_key` hashes)."""
    s = with_max_gen_toks(load_suite(suite), options.get("max_gen_toks"))
    gates = dataclasses.replace(s.gates, **(options.get("gates") or {}))
    return {
        "suite": s.name,
        "version": s.version,
        "benchmarks": [_benchmark_settings(b) for b in s.benchmarks],
        "graders": {g: GRADER_VERSIONS[g] for g in sorted({b.grader for b in s.benchmarks})},
        "gates": dataclasses.asdict(gates) if isinstance(gates, Gates) else dict(gates),
        "options": {k: options.get(k) for k in SCORED_OPTIONS},
    }


@lru_cache(maxsize=256)
def _key(suite: str, options_json: str) -> str:
    return _digest(evaluation_settings(suite, json.loads(options_json)))


def evaluation_key(suite: str, options: dict[str, Any]) -> str:
    """16 hex digits naming the spec-side evaluation settings (same settings, same key, on any machine)."""
    return _key(suite, json.dumps(options, sort_keys=True, default=str))


def data_digest(data_dir: Path | None) -> str:
    """The benchmark data's manifest digest (its benchmarks' checksums and row counts), or "" without one."""
    if data_dir is None:
        return ""
    p = Path(data_dir) / "manifest.json"
    if not p.is_file():
        return ""
    try:
        manifest = json.loads(p.read_text())
    except ValueError:
        return ""
    return _digest({"kind": manifest.get("kind"), "benchmarks": manifest.get("benchmarks")})


def evaluation_hash(key: str, data_dir: Path | None) -> str:
    """16 hex digits naming the settings *and* the data a record was scored with (the records' `eval_hash`)."""
    return _digest({"key": key, "data": data_digest(data_dir)})


__all__ = ["SCORED_OPTIONS", "data_digest", "evaluation_hash", "evaluation_key", "evaluation_settings"]
