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
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluation.backends.vllm import VLLMOptions
from evaluation.gates import GateOverrides
from wtcommon.config_fields import ConfigFieldError, MappingConfig
from wtcommon.hashing import digest

if TYPE_CHECKING:  # the suite and graders are imported where used: typing a campaign's options loads neither
    from evaluation.suite import Benchmark

# the `evaluation:` options that decide a score (EVALUATION_KEYS lists them all)
SCORED_OPTIONS = ("backend", "limit", "all_checkpoints")

# every key a campaign's `evaluation:` block may hold
EVALUATION_KEYS = {"backend", "data_dir", "limit", "max_gen_toks", "gates", "fixture_items", "fixture_seed",
                   "validation_suite", "validation_data_dir", "all_checkpoints", "memorization", "vllm"}


@dataclass(frozen=True)
class EvaluationOptions(MappingConfig):
    """A campaign's `evaluation:` block, checked: the evaluator `backend` (hf on CPU, vllm on GPU), where the
    suite's data is (`data_dir`, relative to the work directory; None: `<workdir>/data/eval`), `limit` items
    per benchmark and `max_gen_toks` (None: the suite's), health `gates` overriding the suite's, the demo's
    fixture size and seed, the tuner's validation suite and data, and whether every saved checkpoint is scored
    (`all_checkpoints`), and whether the base models are probed for memorised benchmark items once the campaign
    is recorded (`memorization`: true, or `{protocol: paper}` for arXiv 2507.10532's protocol instead of ours:
    evaluation/memorization.py; it changes no score, so no key). `raw` (the block
    as written) is what `evaluation_key` hashes and spec JSON stores."""

    backend: str = "hf"
    data_dir: str | None = None
    limit: int | None = None
    max_gen_toks: int | None = None
    gates: GateOverrides | None = None
    fixture_items: int = 16
    fixture_seed: int = 42
    validation_suite: str | None = None
    validation_data_dir: str | None = None
    all_checkpoints: bool = False
    memorization: bool = False
    memorization_protocol: str = "windtunnel"
    vllm: VLLMOptions | None = None  # the vLLM engine's free arguments (`{dtype: float32}`), for backend vllm

    @classmethod
    def from_mapping(cls, raw: Any, where: str = "evaluation") -> EvaluationOptions:
        """The typed options of an `evaluation:` mapping; `ConfigFieldError` (a ValueError) names the key."""
        if not isinstance(raw, Mapping):
            raise ConfigFieldError(f"{where}: got {raw!r}; a mapping such as {{limit: 50, backend: hf}}")
        check_evaluation_options(raw)
        gates = None if raw.get("gates") is None else GateOverrides.from_mapping(raw["gates"])
        return cls(raw=raw, backend=raw.get("backend", "hf"), data_dir=raw.get("data_dir"), limit=raw.get("limit"),
                   max_gen_toks=raw.get("max_gen_toks"), gates=gates,
                   fixture_items=raw.get("fixture_items", 16), fixture_seed=raw.get("fixture_seed", 42),
                   validation_suite=raw.get("validation_suite"), validation_data_dir=raw.get("validation_data_dir"),
                   all_checkpoints=raw.get("all_checkpoints", False),
                   memorization=_memorization_on(raw.get("memorization")),
                   memorization_protocol=_memorization_protocol(raw.get("memorization")),
                   vllm=None if raw.get("vllm") is None else VLLMOptions.from_mapping(raw["vllm"]))

    @classmethod
    def of(cls, opts: EvaluationOptions | Mapping[str, Any], where: str = "evaluation") -> EvaluationOptions:
        """`opts` itself when typed, else the typed options of the mapping."""
        return opts if isinstance(opts, EvaluationOptions) else cls.from_mapping(opts, where)

    def with_options(self, **changes: Any) -> EvaluationOptions:
        """These options with some keys set (added to the stored mapping as well, so the key changes with them)."""
        return type(self).from_mapping({**self.raw, **changes})


def check_evaluation_options(v: Mapping[str, Any]) -> None:
    """The `evaluation:` block: known keys, values of the right type and range (`ConfigFieldError`, a
    ValueError, names the key)."""
    unknown = sorted(set(v) - EVALUATION_KEYS)
    if unknown:
        raise ConfigFieldError(f"unknown key(s) {unknown}; allowed: {sorted(EVALUATION_KEYS)}")

    def pos_int(key: str, allow_none: bool) -> None:
        x = v.get(key)
        if x is None and allow_none:
            return
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise ConfigFieldError(f"{key}: got {x!r}; must be a positive integer" + (" or null" if allow_none else ""))

    if v.get("backend", "hf") not in ("hf", "vllm"):
        raise ConfigFieldError(f"backend: got {v.get('backend')!r}; choose hf (CPU, small models) or vllm (GPU)")
    for key in ("limit", "max_gen_toks"):
        if key in v:
            pos_int(key, allow_none=True)
    if "fixture_items" in v:
        pos_int("fixture_items", allow_none=False)
    if "fixture_seed" in v and (isinstance(v["fixture_seed"], bool) or not isinstance(v["fixture_seed"], int)):
        raise ConfigFieldError(f"fixture_seed: got {v['fixture_seed']!r}; give an integer")
    for key in ("data_dir", "validation_data_dir"):
        if key in v and not (isinstance(v[key], str) and v[key].strip()):
            raise ConfigFieldError(f"{key}: got {v[key]!r}; give a directory path (relative to the work directory)")
    if "validation_suite" in v and v["validation_suite"] is not None and not isinstance(v["validation_suite"], str):
        raise ConfigFieldError(f"validation_suite: got {v['validation_suite']!r}; give a suite name")
    if "all_checkpoints" in v and not isinstance(v["all_checkpoints"], bool):
        raise ConfigFieldError(f"all_checkpoints: got {v['all_checkpoints']!r}; true or false")
    if "memorization" in v:
        _check_memorization(v["memorization"])
    if v.get("gates") is not None:
        GateOverrides.from_mapping(v["gates"])
    if v.get("vllm") is not None:
        VLLMOptions.from_mapping(v["vllm"])


MEMORIZATION_PROTOCOLS = ("windtunnel", "paper")


def _check_memorization(m: Any) -> None:
    """`memorization: true | false | {protocol: windtunnel | paper}` (evaluation/memorization.py)."""
    if isinstance(m, bool):
        return
    if not isinstance(m, Mapping) or set(m) - {"protocol"} or m.get("protocol", "windtunnel") not in \
            MEMORIZATION_PROTOCOLS:
        raise ConfigFieldError(f"memorization: got {m!r}; true or false, or a mapping such as {{protocol: paper}} "
                               f"(protocol: one of {list(MEMORIZATION_PROTOCOLS)})")


def _memorization_on(m: Any) -> bool:
    return m is True or isinstance(m, Mapping)  # a mapping asks for the probe (its protocol: windtunnel unless set)


def _memorization_protocol(m: Any) -> str:
    return str(m.get("protocol", "windtunnel")) if isinstance(m, Mapping) else "windtunnel"


def _raw(options: EvaluationOptions | Mapping[str, Any]) -> Mapping[str, Any]:
    return options.raw if isinstance(options, EvaluationOptions) else options


# decoding fields added with sampled decoding (evaluation/sampling.py): left out at their greedy single-pass
# defaults, so the key of a suite that declares none of them is the key it had before they existed
_DECODING_DEFAULTS = {"samples": 1, "seed": 0, "metric": "avg"}


def _benchmark_settings(b: Benchmark) -> dict[str, Any]:
    """A benchmark's fields (id, grader, limits, options, decoding: samples/temperature/top_p/seed/metric)."""
    d = dataclasses.asdict(b)
    return {k: v for k, v in d.items() if not (k in _DECODING_DEFAULTS and v == _DECODING_DEFAULTS[k])}


def evaluation_settings(suite: str, options: EvaluationOptions | Mapping[str, Any]) -> dict[str, Any]:
    """The settings that decide a score, as plain data (what `evaluation_key` hashes)."""
    from evaluation.graders import GRADER_VERSIONS
    from evaluation.suite import load_suite, with_max_gen_toks

    opts = EvaluationOptions.of(options)
    s = with_max_gen_toks(load_suite(suite), opts.max_gen_toks)
    gates = opts.gates.apply(s.gates) if opts.gates is not None else s.gates
    return {
        "suite": s.name,
        "version": s.version,
        "benchmarks": [_benchmark_settings(b) for b in s.benchmarks],
        "graders": {g: GRADER_VERSIONS[g] for g in sorted({b.grader for b in s.benchmarks})},
        "gates": dataclasses.asdict(gates),
        # as written, not typed: an option left out hashes as null, apart from one given at its default
        "options": {k: opts.raw.get(k) for k in SCORED_OPTIONS},
    }


@lru_cache(maxsize=256)
def _key(suite: str, options_json: str) -> str:
    return digest(evaluation_settings(suite, json.loads(options_json)))


def evaluation_key(suite: str, options: EvaluationOptions | Mapping[str, Any]) -> str:
    """16 hex digits naming the spec-side evaluation settings (same settings, same key, on any machine)."""
    return _key(suite, json.dumps(dict(_raw(options)), sort_keys=True, default=str))


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
    return digest({"kind": manifest.get("kind"), "benchmarks": manifest.get("benchmarks")})


def evaluation_hash(key: str, data_dir: Path | None) -> str:
    """16 hex digits naming the settings *and* the data a record was scored with (the records' `eval_hash`)."""
    return digest({"key": key, "data": data_digest(data_dir)})


__all__ = ["EVALUATION_KEYS", "SCORED_OPTIONS", "EvaluationOptions", "check_evaluation_options", "data_digest",
           "evaluation_hash", "evaluation_key", "evaluation_settings"]
