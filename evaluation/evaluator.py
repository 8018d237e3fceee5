"""`evaluate_checkpoint`: one model load, all suite benchmarks, health gates, Records out.

Flow: validate the data files (schema, gold letters, checksums, item counts) before loading a
model; generate the lm-eval task YAMLs for this data dir; build the backend model once and wrap
it in the generation cache; one `simple_evaluate` over every task; then per benchmark check the
health gates of DESIGN.md rule 2 (item count, metric keys present, parse rate, truncation rate,
grader errors). Per-item logs are written (gzip JSONL) even when a gate fails, so the failure can
be read; Records are written only when every gate passes. A failing gate raises
`EvaluationError` naming the benchmark and the number; nothing is ever scored as a silent zero.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evaluation import item_log
from evaluation.benchmark_data import (BenchmarkDataError, read_benchmark, read_manifest,
                                       verify_checksum)
from evaluation.benchmark_health import BenchmarkHealth, benchmark_item_rows, gate_failures, score_benchmark
from evaluation.checkpoint_hash import checkpoint_hash
from evaluation.generation_cache import CachedLM, GenerationStore
from evaluation.graders import grader_version
from evaluation.run_meta import RunMeta
from evaluation.backends.vllm import VLLMOptions
from evaluation.gates import GateOverrides, Gates
from evaluation.suite import Suite, load_suite, with_max_gen_toks
from evaluation.tasks.build import write_task_dir
from wtcommon.errors import UserError, WindtunnelError

EVALUATOR_VERSION = "1"
METRIC_KEYS = ("acc,none", "parsed_ok,none", "grader_error,none", "grader_timeout,none")


class EvaluationError(WindtunnelError, RuntimeError):
    """A benchmark cannot be scored (bad data, unknown task, failed health gate). Never a zero."""

    def __init__(self, message: str, health: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.health = health or []


def _read_checked(s: Suite, bid: str, data_dir: Path, manifest: dict[str, Any] | None, *, limit: int | None,
                  require_item_count: bool) -> pd.DataFrame:
    """One benchmark's items after the schema, checksum and item-count checks (EvaluationError names the fix)."""
    b = s.benchmark(bid)
    try:
        df = read_benchmark(data_dir, bid, b.grader)
        verify_checksum(data_dir, bid, manifest)
    except BenchmarkDataError as e:
        raise EvaluationError(f"benchmark {bid}: {e}") from e
    fixture = bool(manifest and manifest.get("kind") == "fixture")
    expected = len(df) if fixture else b.n_items
    if require_item_count and limit is None and len(df) != expected:
        hint = ("rebuild the data (`campaign data benchmarks`)" if manifest is not None else
                "no manifest.json in the data dir: a small fixture set must say so (`campaign data synthetic` "
                "writes one, or `evaluation.benchmark_data.write_manifest(dir, ids, kind='fixture')`)")
        raise EvaluationError(f"benchmark {bid}: {data_dir / (bid + '.parquet')} has {len(df)} items, the suite "
                              f"expects {b.n_items}; {hint}")
    return df


def check_benchmark_data(suite: Suite, data_dir: Path, *, limit: int | None = None,
                         require_item_count: bool = True) -> list[str]:
    """Every problem with a suite's evaluation data, one line each (empty: the evaluate stage can read it).

    The same checks `evaluate_checkpoint` makes before loading a model, so a campaign can run them
    before training (preflight) instead of discovering them after."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        return [f"{data_dir}: evaluation data directory not found; write fixtures with `campaign data synthetic "
                "--out DIR` (they go to DIR/eval) or the real data with `campaign data benchmarks`, then pass "
                "--data-dir to submit (or set evaluation.data_dir)"]
    manifest = read_manifest(data_dir)
    problems = []
    for bid in suite.benchmark_ids:
        try:
            _read_checked(suite, bid, data_dir, manifest, limit=limit, require_item_count=require_item_count)
        except EvaluationError as e:
            problems.append(str(e))
    return problems


class HealthGateError(EvaluationError):
    """The model's outputs failed a health gate (parse rate, truncation rate, grader errors): a property of
    the checkpoint, not of the configuration or the data; retrying the evaluation gives the same result."""

    def __init__(self, failures: list[str], checkpoint: Path, items_path: Path | None,
                 health: list[dict[str, Any]] | None = None):
        self.failures, self.items_path = list(failures), items_path
        where = f" (item log: {items_path})" if items_path else ""
        super().__init__(f"{len(failures)} health gate failure(s): " + "; ".join(failures)
                         + f" — checkpoint {checkpoint}{where}", health=health)


@dataclass(frozen=True)
class CheckpointEvaluation:
    """What one `evaluate_checkpoint` produced: the records (one row per benchmark, written by the caller to
    `records_path`) and, beside them as typed fields rather than `DataFrame.attrs` (which pandas drops on most
    operations), each benchmark's gate figures, the item log, and how many responses were generated or cached."""

    records: pd.DataFrame
    health: tuple[BenchmarkHealth, ...]
    items_path: Path | None
    records_path: Path | None
    n_generated: int
    n_cached: int
    checkpoint_hash: str


def _suite(suite: str | Path | Suite) -> Suite:
    return suite if isinstance(suite, Suite) else load_suite(suite)


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _prompt_lengths(tokenizer: Any, prompts: list[str]) -> list[int]:
    """Token counts of the chat-templated prompts exactly as the backend will see them."""
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts]
    return [len(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def _build_model(backend: str, checkpoint: Path, *, longest: int, max_gen: int, batch_size: int, device: str | None,
                 job_dir: Path, vllm_options: VLLMOptions | None):
    if backend == "hf":
        from evaluation.backends.hf import TrackedHFLM

        dev = device or _default_device()
        lm = TrackedHFLM(pretrained=str(checkpoint), device=dev, dtype="float32" if dev == "cpu" else "auto",
                         batch_size=batch_size, trust_remote_code=False)
        if longest + max_gen > lm.max_length:
            raise EvaluationError(
                f"{checkpoint}: longest prompt ({longest} tokens) + generation limit ({max_gen}) exceeds the model's "
                f"max length {lm.max_length}; prompts would be left-truncated silently. Lower max_gen_toks in the "
                "suite "
                "or use a longer-context model")
        return lm
    if backend == "vllm":
        from evaluation.backends.vllm import build_vllm_args, make_vllm

        args = build_vllm_args(checkpoint, longest_prompt_tokens=longest, max_gen_toks=max_gen, job_dir=job_dir,
                               **dataclasses.asdict(vllm_options or VLLMOptions()))
        return make_vllm(args)
    raise EvaluationError(f"unknown backend {backend!r}; use 'hf' or 'vllm'")


def records_path(out: str | Path) -> Path:
    """`out` itself if it names a `.parquet`/`.pq`/`.csv` records file, else `<out>/records.parquet`."""
    out = Path(out)
    return out if out.suffix.lower() in (".parquet", ".pq", ".csv") else out / "records.parquet"


def evaluate_checkpoint(
    checkpoint: Path,
    *,
    suite: str | Path | Suite = "db12",
    data_dir: Path,
    backend: str = "hf",
    run_meta: RunMeta,
    out: Path | None = None,
    limit: int | None = None,
    cache_dir: Path | None = None,
    benchmarks: list[str] | None = None,
    gates: Gates | GateOverrides | None = None,
    max_gen_toks: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    progress: bool = True,
    vllm_options: VLLMOptions | None = None,
) -> CheckpointEvaluation:
    """Evaluate one checkpoint on the suite: one Record per benchmark (the caller writes them) and its health.

    `benchmarks` restricts to a subset; `gates` replaces the suite's gates (`Gates`) or some of them
    (`GateOverrides`); `vllm_options` sets the vLLM engine's free arguments; `max_gen_toks` replaces every
    generation limit (small-context models).
    `out` names where the caller will write the records (`records_path(out)`: a `.parquet`/`.csv` file, or
    a directory for `<out>/records.parquet`); the item log and health JSON are written beside it here.
    Evaluation returns results and the stage writes records, so `evaluation` never imports `analysis`.
    """
    s, g = _suite_and_gates(suite, gates, max_gen_toks)
    out = records_path(out) if out is not None else None
    meta = run_meta
    checkpoint = Path(checkpoint)
    data_dir = Path(data_dir)
    ids = _checked_ids(s, benchmarks, limit, checkpoint)

    # 1. data, before any model load: schema, gold letters, checksums, item counts
    frames, health, fixture = _read_data(s, ids, data_dir, limit, g)
    ckpt_hash = checkpoint_hash(checkpoint)
    gen = _generate(s, ids, checkpoint, data_dir, frames, health, ckpt_hash, backend=backend, limit=limit,
                    cache_dir=cache_dir, batch_size=batch_size, device=device, progress=progress,
                    vllm_options=vllm_options)

    # 2. per-benchmark figures, item logs and gates
    item_rows = _score(s, gen, frames, health, g)
    items_path = _write_item_log(out, cache_dir, ckpt_hash, item_rows, health)
    health_list = [asdict(h) for h in health.values()]
    failures = [f for h in health.values() for f in h.failures]
    if failures:
        raise HealthGateError(failures, checkpoint, items_path, health=health_list)

    return CheckpointEvaluation(
        records=_records(s, ids, meta, health, backend=backend, fixture=fixture, limit=limit),
        health=tuple(health.values()), items_path=items_path, records_path=out,
        n_generated=gen.cached.n_generated, n_cached=gen.cached.n_cached, checkpoint_hash=ckpt_hash)


def _suite_and_gates(suite: str | Path | Suite, gates: Gates | GateOverrides | None,
                     max_gen_toks: int | None) -> tuple[Suite, Gates]:
    """The suite (with `max_gen_toks` applied) and its gates: `gates` itself, or the suite's with overrides."""
    s = with_max_gen_toks(_suite(suite), max_gen_toks)
    if isinstance(gates, GateOverrides):
        return s, gates.apply(s.gates)
    return s, gates or s.gates


def _checked_ids(s: Suite, benchmarks: list[str] | None, limit: int | None, checkpoint: Path) -> list[str]:
    """The benchmarks to evaluate, after the checks that need no data (limit, known ids, the checkpoint exists)."""
    if limit is not None and limit <= 0:
        raise UserError(f"limit must be a positive integer, got {limit}")
    ids = list(benchmarks) if benchmarks is not None else s.benchmark_ids
    unknown = [b for b in ids if b not in s.benchmark_ids]
    if unknown:
        raise EvaluationError(f"unknown benchmark/task {unknown} for suite {s.name!r} ({s.path}); known: "
                              f"{s.benchmark_ids}")
    if not checkpoint.exists():
        raise EvaluationError(f"{checkpoint}: checkpoint not found")
    return ids


def _read_data(s: Suite, ids: list[str], data_dir: Path, limit: int | None,
               g: Gates) -> tuple[dict[str, pd.DataFrame], dict[str, BenchmarkHealth], bool]:
    """(items per benchmark, each benchmark's empty figures, whether the data is a fixture set), checked."""
    manifest = read_manifest(data_dir)
    fixture = bool(manifest and manifest.get("kind") == "fixture")
    frames: dict[str, pd.DataFrame] = {}
    health: dict[str, BenchmarkHealth] = {}
    for bid in ids:
        b = s.benchmark(bid)
        df = _read_checked(s, bid, data_dir, manifest, limit=limit, require_item_count=g.require_item_count)
        expected = len(df) if fixture else b.n_items
        n_exp = min(limit, len(df)) if limit else expected
        frames[bid] = df.iloc[:n_exp] if limit else df
        health[bid] = BenchmarkHealth(benchmark=bid, task="", n_expected=n_exp, max_gen_toks=b.max_gen_toks,
                                      grader_version=grader_version(b.grader), samples=b.samples,
                                      metric=b.metric_name)
    return frames, health, fixture


@dataclass
class _Generation:
    """What the one lm-eval pass produced: task names per benchmark, its results, the cache that served it and
    each benchmark's prompt lengths (tokens)."""

    names: dict[str, str]
    results: Any
    cached: CachedLM
    lengths: dict[str, list[int]]


def _generate(s: Suite, ids: list[str], checkpoint: Path, data_dir: Path, frames: dict[str, pd.DataFrame],
              health: dict[str, BenchmarkHealth], ckpt_hash: str, *, backend: str, limit: int | None,
              cache_dir: Path | None, batch_size: int, device: str | None, progress: bool,
              vllm_options: VLLMOptions | None) -> _Generation:
    """One model load and one `simple_evaluate` over every task, through the generation cache; lm-eval's own
    failures become EvaluationError (reported, never scored)."""
    lengths = _lengths(checkpoint, frames)
    longest = max(max(v) for v in lengths.values())
    max_gen = max(s.benchmark(b).max_gen_toks for b in ids)

    import logging

    import lm_eval
    from lm_eval.tasks import TaskManager

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with tempfile.TemporaryDirectory(prefix="wt_eval_") as tmp:
        tmpdir = Path(tmp)
        names = write_task_dir(s, data_dir, tmpdir / "tasks", ids)
        tm = TaskManager(include_path=str(tmpdir / "tasks"), include_defaults=False, verbosity="ERROR")
        missing = [n for n in names.values() if n not in tm.all_tasks]
        if missing:
            raise EvaluationError(f"lm-eval did not index task(s) {missing} from {tmpdir / 'tasks'} (a YAML failed to "
                                  "parse)")
        for bid, name in names.items():
            health[bid].task = name

        lm = _build_model(backend, checkpoint, longest=longest, max_gen=max_gen, batch_size=batch_size, device=device,
                          job_dir=(cache_dir or tmpdir), vllm_options=vllm_options)
        store = GenerationStore(Path(cache_dir) / "generations.sqlite" if cache_dir else None)
        console = Console(stderr=True)
        with Progress(TextColumn("[bold]generating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True, disable=not progress) as bar:
            ptask = bar.add_task("gen", total=None)
            from wtcommon.phase import set_phase

            def on_progress(d: int, t: int) -> None:
                bar.update(ptask, completed=d, total=t)
                set_phase(f"evaluating: {d} of {t} generations ({len(ids)} benchmarks)", done=d, total=t)

            seeds = {names[b]: s.benchmark(b).seed for b in ids if not s.benchmark(b).decoding.greedy}
            cached = CachedLM(lm, store, ckpt_hash, chunk_size=max(batch_size * 4, 16), on_progress=on_progress,
                              seeds=seeds)
            try:
                results = lm_eval.simple_evaluate(
                    model=cached, tasks=list(names.values()), task_manager=tm, apply_chat_template=True,
                    log_samples=True, bootstrap_iters=0, limit=limit, verbosity="ERROR",
                )
            except EvaluationError:
                raise
            except Exception as e:  # lm-eval aborts on data/grader exceptions: report, do not score
                raise EvaluationError(f"lm-eval failed while evaluating {checkpoint}: {type(e).__name__}: {e}") from e
            finally:
                store.close()
    return _Generation(names, results, cached, lengths)


def _lengths(checkpoint: Path, frames: dict[str, pd.DataFrame]) -> dict[str, list[int]]:
    """Each benchmark's prompt lengths in the checkpoint's tokens (the model's context must hold the longest)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(checkpoint))
    except Exception as e:
        raise EvaluationError(f"{checkpoint}: cannot load the tokenizer ({e})") from e
    return {bid: _prompt_lengths(tok, df["prompt"].tolist()) for bid, df in frames.items()}


def _score(s: Suite, gen: _Generation, frames: dict[str, pd.DataFrame], health: dict[str, BenchmarkHealth],
           g: Gates) -> list[dict[str, Any]]:
    """Each benchmark's figures and gate failures into `health` from lm-eval's results; the item-log rows."""
    results = gen.results
    item_rows: list[dict[str, Any]] = []
    for bid, name in gen.names.items():
        h = health[bid]
        res = (results or {}).get("results", {}).get(name)
        if res is None:
            h.failures.append(f"{bid}: no result from lm-eval for task {name}")
            continue
        for key in METRIC_KEYS:
            if key not in res:
                h.failures.append(f"{bid}: metric key {key!r} missing from lm-eval results")
        n_eff = int(results["n-samples"][name]["effective"])
        h.n_evaluated = n_eff
        if n_eff != h.n_expected:
            h.failures.append(f"{bid}: {n_eff} items evaluated, expected {h.n_expected}")
        samples = results.get("samples", {}).get(name, [])
        b = s.benchmark(bid)
        rows_b, grid, answers = benchmark_item_rows(bid, name, b.samples, samples, gen.cached, h,
                                                    dict(zip(frames[bid]["item_id"], gen.lengths[bid], strict=True)))
        if len(samples) != n_eff:
            h.failures.append(f"{bid}: {len(samples)} logged samples for {n_eff} evaluated items")
        if rows_b:
            score_benchmark(h, b, rows_b, grid, answers)
            item_rows.extend(rows_b)
        h.failures.extend(gate_failures(h, g, len(samples) * b.samples))
    return item_rows


def _write_item_log(out: Path | None, cache_dir: Path | None, ckpt_hash: str, item_rows: list[dict[str, Any]],
                    health: dict[str, BenchmarkHealth]) -> Path | None:
    """The item log and health JSON beside the records (else in the cache dir), written even when a gate fails so
    the failure can be read; the item log's path, or None when there is nowhere to write."""
    base = None
    if out is not None:
        base = Path(out)
    elif cache_dir is not None:
        base = Path(cache_dir) / "items" / f"{ckpt_hash[:16]}.parquet"
    if base is None:
        return None
    items_path = item_log.items_path_of(base)
    item_log.write_item_log(items_path, item_rows, health.values())
    return items_path


def _records(s: Suite, ids: list[str], meta: RunMeta, health: dict[str, BenchmarkHealth], *, backend: str,
             fixture: bool, limit: int | None) -> pd.DataFrame:
    """One Record per benchmark, naming the suite, harness, grader and decoding that produced it."""
    import lm_eval

    harness = f"lm-eval {lm_eval.__version__}; windtunnel-eval {EVALUATOR_VERSION}; backend {backend}"
    rows = []
    for bid in ids:
        h = health[bid]
        b = s.benchmark(bid)
        rows.append({
            **{k: v for k, v in meta.columns().items() if k not in ("config_hash", "eval_hash")},
            "benchmark": bid, "domain": b.domain, "n_items": int(h.n_evaluated), "n_correct": h.n_correct,
            "accuracy": h.accuracy, "parse_rate": h.parse_rate, "truncation_rate": h.truncation_rate,
            "suite_version": (f"{s.name}-{s.version}" + ("+fixture" if fixture else "")
                              + (f"+limit{limit}" if limit else "")),
            "harness_version": (f"{harness}; grader {h.grader_version}; max_gen_toks {b.max_gen_toks}"
                                + ("" if b.decoding.greedy else f"; samples {b.samples} temperature {b.temperature} "
                                   f"top_p {b.top_p} seed {b.seed}")),
            "config_hash": meta.config_hash, "eval_hash": meta.eval_hash,
            "metric": h.metric, "metrics": json.dumps(h.metrics, sort_keys=True) if h.metrics else "",
        })
    return pd.DataFrame(rows)
