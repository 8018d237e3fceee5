"""The memorization probe: does the base model already hold a benchmark? (`campaign audit memorization`)

The contamination audit (evaluation/contamination.py) compares training prompts with benchmark items; it cannot
see a benchmark the model read in pretraining. Following arXiv 2507.10532 (Qwen2.5-Math-7B completes 54.6% of
MATH-500 problems near-verbatim from their first 60%, 0% of LiveMathBench's), each item's problem text (the prompt
without our answer instruction) is cut after the first `prefix` share of its tokens *in the model's own tokenizer*
(rounded down; items of fewer than 2 tokens cannot be cut and are skipped), the prefix is decoded back to text and
fed raw (no chat template: what a base model saw in pretraining), and the greedy continuation is scored against
the true rest (evaluation/memorization_scores.py: exact, ROUGE-L, answer). That is the `windtunnel` protocol,
ours; the `paper` protocol reproduces the released code of arXiv 2507.10532 instead (a character cut at 80/60/40%
and the whole problem, rouge_score ROUGE-L, its EM, the graded answer: evaluation/memorization_paper.py and
memorization_paper_probe.py), so a model's numbers can be put beside the paper's Table 2.

Generation goes through the evaluator's HF backend (TrackedHFLM, one model load) and its generation store
(evaluation/generation_cache.py), so an interrupted probe resumes. The scored items are cached by the model's
content hash (evaluation/checkpoint_hash.py), the suite's name and version, the benchmark files' sha256, the
prefix and the generation budget: a rerun with the same inputs loads no model at all.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evaluation.benchmark_data import read_benchmark, read_manifest, verify_checksum
from evaluation.intervals import METHOD, clopper_pearson
from evaluation.memorization_scores import problem_text, score_continuation
from evaluation.suite import Suite
from wtcommon.atomic import atomic_write_text
from wtcommon.errors import RunFailed, UserError
from wtcommon.hashing import digest as key_digest

PROBE_VERSION = 1  # bump when splitting, prompting or scoring changes (invalidates the cache)
PAPER_VERSION = 1  # the same, for the paper protocol (evaluation/memorization_paper.py)
PREFIX_UNIT = "tokens of the model's own tokenizer (floor(prefix x tokens); the prefix is decoded back to text)"
PROTOCOLS = ("windtunnel", "paper")
TOP_K = 10


class MemorizationError(UserError):
    """Bad input to the probe (an option, the model directory, the benchmark data); nothing was written."""


@dataclass(frozen=True)
class ProbeSettings:
    """`protocol`: `windtunnel` (ours: token cut, word-token LCS, verbatim exact) or `paper` (arXiv 2507.10532's
    released code: evaluation/memorization_paper.py). windtunnel: `prefix`, the share of each problem's tokens
    shown; `extra_tokens`, generated beyond the length of the true rest, so a model that recalls the problem may
    go on to its answer; `near`, the ROUGE-L at or above which an item counts as recalled near-verbatim (a summary
    threshold: it is not part of the cache key). paper: `ratios`, the character shares shown (1.0: the whole
    problem, answer accuracy only), `max_new_tokens` generated (the released code's 4096, capped by the
    model's context)."""

    prefix: float = 0.6
    extra_tokens: int = 32
    near: float = 0.8
    batch_size: int = 16
    protocol: str = "windtunnel"
    ratios: tuple[float, ...] = (0.8, 0.6, 0.4, 1.0)
    max_new_tokens: int = 4096

    def check(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise MemorizationError(f"--protocol {self.protocol!r}: choose windtunnel (ours) or paper (arXiv "
                                    "2507.10532's released code)")
        if self.protocol == "paper":
            self._check_paper()
            return
        if not 0.0 < self.prefix < 1.0:
            raise MemorizationError(f"--prefix {self.prefix:g}: must be strictly between 0 and 1 (the share of each "
                                    "problem's tokens shown to the model), e.g. 0.6")
        if not 0.0 < self.near <= 1.0:
            raise MemorizationError(f"--near {self.near:g}: must be in (0, 1] (the ROUGE-L F1 counted as recalled); "
                                    "e.g. 0.8")
        if self.extra_tokens < 0:
            raise MemorizationError(f"--extra-tokens {self.extra_tokens}: must be 0 or more")
        if self.batch_size < 1:
            raise MemorizationError(f"--batch-size {self.batch_size}: must be 1 or more")

    def _check_paper(self) -> None:
        bad = [r for r in self.ratios if not 0.0 < r <= 1.0]
        if bad or not self.ratios or len(set(self.ratios)) != len(self.ratios):
            raise MemorizationError(f"--prefix {list(self.ratios)}: the paper protocol's ratios are distinct shares "
                                    "of each problem's characters in (0, 1], e.g. 0.8 0.6 0.4 1 (its default)")
        if self.max_new_tokens < 1:
            raise MemorizationError(f"--max-new-tokens {self.max_new_tokens}: must be 1 or more (the paper: 4096)")
        if self.batch_size < 1:
            raise MemorizationError(f"--batch-size {self.batch_size}: must be 1 or more")


@dataclass(frozen=True)
class ProbeItem:
    benchmark: str
    item_id: str
    grader: str
    problem: str
    gold: str
    n_options: int = 0


@dataclass
class BenchmarkRecall:
    """One benchmark's rates over its probed items, each with its interval (`METHOD`), and its most-recalled
    items (highest ROUGE-L first)."""

    benchmark: str
    n_items: int
    n_probed: int
    skipped: dict[str, int]
    exact: int
    near: int
    answer: int
    mean_rouge_l: float
    intervals: dict[str, tuple[float, float]]
    top: list[dict[str, Any]] = field(default_factory=list)

    def rate(self, what: str) -> float:
        k = {"exact": self.exact, "near": self.near, "answer": self.answer}[what]
        return k / self.n_probed if self.n_probed else float("nan")


@dataclass
class ProbeResult:
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    cached: bool
    path: Path
    rebuilt: Path | None = None  # a cache entry that could not be read, probed again and rewritten


def check_model_dir(model: Path) -> Path:
    """An HF-format directory (config.json, readable weights, a tokenizer), else a MemorizationError naming --model
    and the fix (wtcommon/model_dir.py)."""
    from wtcommon.model_dir import model_dir_problem

    if (problem := model_dir_problem(model, "--model")) is not None:
        raise MemorizationError(problem)
    return model


def read_probe_items(suite: Suite, data_dir: Path, benchmarks: list[str] | None = None
                     ) -> tuple[list[ProbeItem], dict[str, str]]:
    """Every item of the suite's benchmarks (or `benchmarks`) with its problem text, and each file's sha256
    (checked against the manifest when there is one). A benchmark with no problem text at all is an error."""
    ids = benchmarks or suite.benchmark_ids
    unknown = sorted(set(ids) - set(suite.benchmark_ids))
    if unknown:
        raise MemorizationError(f"--benchmark {unknown}: not in suite {suite.name}; known: {suite.benchmark_ids}")
    manifest = read_manifest(data_dir)
    items: list[ProbeItem] = []
    digests: dict[str, str] = {}
    for bid in ids:
        b = suite.benchmark(bid)
        df = read_benchmark(data_dir, bid, b.grader)  # BenchmarkDataError (exit 2) names the file
        digests[bid] = verify_checksum(data_dir, bid, manifest)
        mine = [ProbeItem(bid, str(r.item_id), b.grader, problem_text(str(r.prompt)), str(r.answer),
                          int(r.n_options)) for r in df.itertuples()]
        if not any(it.problem for it in mine):
            raise MemorizationError(
                f"{Path(data_dir) / f'{bid}.parquet'}: no problem text: every item's `prompt` is empty once the "
                "answer instruction is removed, and the probe continues the problem statement; rebuild the file "
                "with `campaign data benchmarks` or leave the benchmark out with --benchmark")
        items += mine
    return items, digests


def cache_key(model_hash: str, suite: Suite, digests: dict[str, str], settings: ProbeSettings) -> dict[str, Any]:
    """What the scored items depend on (and nothing else: `near` and the batch size do not change them); the
    windtunnel protocol's key is the one it had before the paper protocol existed."""
    if settings.protocol == "paper":
        return {"probe_version": PAPER_VERSION, "protocol": "paper", "model": model_hash, "suite": suite.name,
                "suite_version": suite.version, "data": dict(sorted(digests.items())),
                "ratios": list(settings.ratios), "max_new_tokens": settings.max_new_tokens}
    return {"probe_version": PROBE_VERSION, "model": model_hash, "suite": suite.name, "suite_version": suite.version,
            "data": dict(sorted(digests.items())), "prefix": settings.prefix, "extra_tokens": settings.extra_tokens}


def default_cache_root() -> Path:
    return Path(os.environ.get("WINDTUNNEL_CACHE") or Path.home() / ".cache" / "windtunnel")


def _budget(n_suffix: int, extra: int) -> int:
    """Tokens to generate: the true rest's length rounded up to 16 (few distinct values, so lm-eval's batches by
    generation settings stay large), plus `extra` for the answer."""
    return 16 * math.ceil(n_suffix / 16) + extra


def _split(tokenizer: Any, problem: str, prefix: float) -> tuple[str, str, int, int] | None:
    ids = tokenizer(problem, add_special_tokens=False)["input_ids"]
    k = int(prefix * len(ids))
    if k < 1 or k >= len(ids):
        return None
    dec = lambda part: tokenizer.decode(part, skip_special_tokens=False, clean_up_tokenization_spaces=False)  # noqa: E731
    return dec(ids[:k]), dec(ids[k:]), k, len(ids) - k


def _load_lm(model: Path, batch_size: int) -> Any:
    from evaluation.backends.hf import TrackedHFLM

    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return TrackedHFLM(pretrained=str(model), device=dev, dtype="float32" if dev == "cpu" else "auto",
                           batch_size=batch_size, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise RunFailed(f"--model {model}: the HF backend could not load it ({type(e).__name__}: {e})") from e


def _plan(items: list[ProbeItem], lm: Any, settings: ProbeSettings) -> tuple[list[dict[str, Any]], list[Any]]:
    """One row per item (split, or skipped with its reason) and the generation requests of the split ones."""
    from lm_eval.api.instance import Instance

    rows: list[dict[str, Any]] = []
    requests: list[Any] = []
    for it in items:
        row: dict[str, Any] = {**asdict(it), "skipped": None}
        cut = _split(lm.tokenizer, it.problem, settings.prefix) if it.problem else None
        if cut is None:
            rows.append({**row, "skipped": "too short to split"})
            continue
        prefix, reference, k, n_rest = cut
        budget = _budget(n_rest, settings.extra_tokens)
        if k + budget > lm.max_length:
            rows.append({**row, "skipped": "longer than the model's context"})
            continue
        rows.append({**row, "prefix": prefix, "reference": reference, "n_prefix_tokens": k, "n_rest_tokens": n_rest})
        kwargs = {"until": [], "max_gen_toks": budget, "do_sample": False, "temperature": 0.0}
        requests.append(Instance("generate_until", {}, (prefix, kwargs), len(requests),
                                 (f"memorization/{it.benchmark}", it.item_id, 1)))
    return rows, requests


def _check_store(path: Path) -> None:
    """A MemorizationError naming the file to delete when an existing generation store is not SQLite (read-only:
    checked before the model loads, it writes nothing)."""
    import sqlite3

    if not path.is_file():
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise MemorizationError(f"{path}: the probe's generation cache is not a readable SQLite database ({e}); "
                                "delete it (it only saves regenerating) and run again") from None


def _generate(model: Path, model_hash: str, items: list[ProbeItem], settings: ProbeSettings, store: Path,
              on_progress: Callable[[int, int], None] | None) -> list[dict[str, Any]]:
    from evaluation.generation_cache import CachedLM, GenerationStore

    from evaluation import memorization_paper_probe as paper

    _check_store(store)  # before the model loads: a corrupt store is exit 2
    lm = _load_lm(model, settings.batch_size)
    rows, requests = (paper.plan if settings.protocol == "paper" else _plan)(items, lm, settings)
    gen_store = GenerationStore(store)
    try:
        texts = CachedLM(lm, gen_store, model_hash, on_progress=on_progress).generate_until(requests)
    finally:
        gen_store.close()
    if settings.protocol == "paper":
        paper.score(rows, texts)
        return rows
    it = iter(texts)
    for row in rows:
        if row["skipped"] is None:
            row["continuation"] = next(it)
            s = score_continuation(row["continuation"], row["reference"], row["gold"], row["grader"])
            row.update(exact=s.exact, rouge_l=s.rouge_l, answer=s.answer)
    return rows


def run_probe(model: Path, suite: Suite, data_dir: Path, settings: ProbeSettings, *,
              benchmarks: list[str] | None = None, cache_root: Path | None = None,
              on_progress: Callable[[int, int], None] | None = None) -> ProbeResult:
    """Probe every item (module docstring); from the cache when the same inputs were probed before."""
    from evaluation.checkpoint_hash import checkpoint_hash

    settings.check()
    check_model_dir(model)
    items, digests = read_probe_items(suite, data_dir, benchmarks)
    try:
        model_hash = checkpoint_hash(model)
    except FileNotFoundError as e:
        raise MemorizationError(f"--model {model}: {e}") from e
    key = cache_key(model_hash, suite, digests, settings)
    digest = key_digest(key, 24)
    root = Path(cache_root or default_cache_root()) / "memorization"
    path = root / f"{digest}.json"
    rebuilt = None
    if path.is_file():
        body = _read_cached(path)
        if body is not None:
            return ProbeResult(body["rows"], body["meta"], cached=True, path=path)
        rebuilt = path
    rows = _generate(model, model_hash, items, settings, root / "generations.sqlite", on_progress)
    unit = PREFIX_UNIT if settings.protocol != "paper" else "characters, moved forward to a boundary character"
    meta = {**key, "protocol": settings.protocol, "model_path": str(model), "prefix_unit": unit,
            "decoding": "greedy, raw text (no chat template)", "cache_key": digest}
    atomic_write_text(path, json.dumps({"meta": meta, "rows": rows}, ensure_ascii=False) + "\n")
    return ProbeResult(rows, meta, cached=False, path=path, rebuilt=rebuilt)


def _read_cached(path: Path) -> dict[str, Any] | None:
    """A cached probe, or None (it is probed again and the file rewritten: `ProbeResult.rebuilt`) when the file
    is not one: a half-copied or hand-edited cache must not end in a traceback."""
    try:
        body = json.loads(path.read_text())
        if isinstance(body, dict) and isinstance(body.get("rows"), list) and isinstance(body.get("meta"), dict):
            return body
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    return None


def _top(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("item_id", "rouge_l", "exact", "answer", "prefix", "reference", "continuation")
    ranked = sorted(rows, key=lambda r: (-r["rouge_l"], not r["exact"], not r["answer"], r["item_id"]))
    return [{k: r[k] for k in keep} for r in ranked[:TOP_K]]


def summarise(rows: list[dict[str, Any]], near: float) -> list[BenchmarkRecall]:
    """Per benchmark, in the order the rows came: counts, mean ROUGE-L, intervals and the most-recalled items."""
    out: list[BenchmarkRecall] = []
    for bid in dict.fromkeys(r["benchmark"] for r in rows):
        mine = [r for r in rows if r["benchmark"] == bid]
        probed = [r for r in mine if r["skipped"] is None]
        skipped: dict[str, int] = {}
        for r in mine:
            if r["skipped"] is not None:
                skipped[r["skipped"]] = skipped.get(r["skipped"], 0) + 1
        k = {"exact": sum(bool(r["exact"]) for r in probed), "near": sum(r["rouge_l"] >= near for r in probed),
             "answer": sum(bool(r["answer"]) for r in probed)}
        mean = sum(r["rouge_l"] for r in probed) / len(probed) if probed else float("nan")
        out.append(BenchmarkRecall(bid, len(mine), len(probed), skipped, k["exact"], k["near"], k["answer"], mean,
                                   {w: clopper_pearson(c, len(probed)) for w, c in k.items()}, _top(probed)))
    return out


DEFINITIONS = {
    "prefix": PREFIX_UNIT,
    "exact": "the continuation's first len(rest) word tokens (\\w+ runs and single symbols) equal the rest's",
    "rouge_l": "ROUGE-L F1 of those tokens and the rest's, LCS computed by evaluation/memorization_scores.py "
               "(no library)",
    "near": "share of probed items with ROUGE-L >= the `near` threshold (exact items included)",
    "answer": "the continuation states the gold answer more often than the true rest does",
    "interval": METHOD + ", over probed items",
}


__all__ = ["BenchmarkRecall", "DEFINITIONS", "MemorizationError", "ProbeItem", "ProbeResult", "ProbeSettings",
           "check_model_dir", "read_probe_items", "run_probe", "summarise"]
