"""One benchmark's figures from its item rows, and the health gates they must pass (DESIGN.md rule 2).

Why a module of its own: the evaluator fills these from a fresh generation pass and the regrade
(evaluation/regrade.py) from a stored item log, with the same functions, so a re-scored log is summarised
and gated exactly as a fresh one; neither needs the other's model or lm-eval machinery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.generation_cache import CachedLM
from evaluation.sampling import benchmark_metrics, item_metrics
from evaluation.suite import Benchmark, Gates

# an item whose grader ran past its budget (evaluation.graders.BUDGET_S) is status `timeout`, scored 0 and
# counted; more than this share of a benchmark's items timing out fails its health gate (the score would be
# the grader's, not the model's)
MAX_GRADER_TIMEOUT_RATE = 0.01


def grader_timeout_gate(bid: str, n_timeouts: int, n_items: int) -> str | None:
    """The health-gate failure for a benchmark whose grader timeouts exceed `MAX_GRADER_TIMEOUT_RATE`, else None."""
    if n_items and n_timeouts / n_items > MAX_GRADER_TIMEOUT_RATE:
        return (f"{bid}: {n_timeouts} of {n_items} item(s) ran past the grader's time budget (status timeout, "
                f"above the gate {MAX_GRADER_TIMEOUT_RATE:.0%}); see the item log")
    return None


@dataclass
class BenchmarkHealth:
    """One benchmark's gate figures and failures, as the health JSON beside the item log lists them."""

    benchmark: str
    task: str
    n_expected: int
    n_evaluated: int = 0
    n_correct: float = math.nan
    accuracy: float = math.nan
    parse_rate: float = math.nan
    truncation_rate: float = math.nan
    n_grader_errors: int = 0
    n_grader_timeouts: int = 0
    grader_version: str = ""
    max_gen_toks: int = 0
    samples: int = 1
    metric: str = "accuracy"
    metrics: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _options_of(doc: dict[str, Any]) -> dict[str, int]:
    """`{"n_options": n}` for a multiple-choice item (what its grader needs to re-grade it from the log), else {}."""
    n = doc.get("n_options")
    return {} if n is None or (isinstance(n, float) and math.isnan(n)) else {"n_options": int(n)}


def benchmark_item_rows(bid: str, name: str, k: int, samples: list[dict[str, Any]], cached: CachedLM,
                        h: BenchmarkHealth, plen: dict[str, int]
                        ) -> tuple[list[dict[str, Any]], np.ndarray, list[list[str | None]]]:
    """The item-log rows of one benchmark (a greedy pass: exactly the old rows; k samples: plus each sample's
    outcome under `samples`), the (items, k) score matrix and the extracted answers."""
    rows: list[dict[str, Any]] = []
    grid = np.zeros((len(samples), k))
    answers: list[list[str | None]] = []
    for n, smp in enumerate(sorted(samples, key=lambda x: x["doc_id"])):
        doc = smp["doc"]
        key = (name, str(smp["doc_id"]))
        if k == 1:
            info = cached.info.get(key, {})
            fin = info.get("finish_reason")
            status = ("error" if smp["grader_error"] else "timeout" if smp["grader_timeout"]
                      else "ok" if smp["parsed_ok"] else "no_answer")
            rows.append({
                "benchmark": bid, "item_id": doc["item_id"], "prompt": smp["arguments"][0][0],
                "response": smp["resps"][0][0], "gold": doc["answer"], "parsed": smp["answer"] or None,
                "score": float(smp["acc"]), "status": status, "finish_reason": fin,
                "response_tokens": info.get("n_tokens"), "prompt_tokens": plen.get(doc["item_id"]),
                "max_gen_toks": h.max_gen_toks, "grader_version": h.grader_version, **_options_of(doc),
            })
            grid[n, 0] = float(smp["acc"])
            answers.append([smp["answer"] or None])
            continue
        infos = cached.sample_info.get(key, [])
        outs = []
        for j, (o, text) in enumerate(zip(smp["outcomes"], smp["resps"][0], strict=True)):
            info = infos[j] if j < len(infos) else {}
            outs.append({"score": float(o["score"]), "status": o["status"], "parsed": o["parsed"],
                         "finish_reason": info.get("finish_reason"), "response_tokens": info.get("n_tokens"),
                         "response": text})
        grid[n] = [o["score"] for o in outs]
        answers.append([o["parsed"] for o in outs])
        st = [o["status"] for o in outs]
        toks = [o["response_tokens"] for o in outs if o["response_tokens"] is not None]
        rows.append({
            "benchmark": bid, "item_id": doc["item_id"], "prompt": smp["arguments"][0][0],
            "response": outs[0]["response"], "gold": doc["answer"], "parsed": outs[0]["parsed"],
            "score": float(np.mean(grid[n])),  # replaced by the benchmark's metric for this item
            "status": ("error" if "error" in st else "timeout" if "timeout" in st else "ok" if "ok" in st
                       else "no_answer"),
            "finish_reason": ("length" if any(o["finish_reason"] == "length" for o in outs)
                              else outs[0]["finish_reason"]),
            "response_tokens": float(np.mean(toks)) if toks else None, "prompt_tokens": plen.get(doc["item_id"]),
            "max_gen_toks": h.max_gen_toks, "grader_version": h.grader_version, **_options_of(doc),
            "n_samples": k, "samples": outs,
        })
    return rows, grid, answers


def score_benchmark(h: BenchmarkHealth, b: Benchmark, rows_b: list[dict[str, Any]], grid: np.ndarray,
                    answers: list[list[str | None]]) -> None:
    """Fill `h`'s figures from one benchmark's item rows and their (items, k) score matrix; each row's `score`
    becomes the benchmark's metric for that item. Shared by the evaluator and the regrade (evaluation/regrade.py),
    so a re-scored log is summarised exactly as a fresh one."""
    outs = [o for r in rows_b for o in (r.get("samples") or [r])]
    per = item_metrics(grid, answers)
    primary = per[b.metric]
    for r, v in zip(rows_b, primary, strict=True):
        r["score"] = float(v)
    if b.samples > 1:
        for i, r in enumerate(rows_b):
            r["metrics"] = {m: float(x[i]) for m, x in per.items()}
        h.metrics = benchmark_metrics(b.id, grid, answers)
    h.n_correct = float(np.sum(primary))
    h.accuracy = 100.0 * h.n_correct / len(rows_b)
    h.parse_rate = float(np.mean([o["status"] == "ok" for o in outs]))
    fins = np.array([np.nan if o["finish_reason"] is None else float(o["finish_reason"] == "length")
                     for o in outs])
    h.truncation_rate = float(np.nanmean(fins)) if not np.all(np.isnan(fins)) else math.nan
    h.n_grader_errors = sum(o["status"] == "error" for o in outs)
    h.n_grader_timeouts = sum(o["status"] == "timeout" for o in outs)


def gate_failures(h: BenchmarkHealth, g: Gates, n_graded: int) -> list[str]:
    """The health-gate failures of one benchmark's figures (DESIGN.md rule 2), `n_graded` samples graded."""
    bid = h.benchmark
    failures = []
    timeout_failure = grader_timeout_gate(bid, h.n_grader_timeouts, n_graded)
    if timeout_failure:
        failures.append(timeout_failure)
    if h.n_grader_errors:
        failures.append(f"{bid}: {h.n_grader_errors} grader error(s) (bad gold or grader crash); see the item log")
    if not h.parse_rate >= g.min_parse_rate:  # NaN fails too
        failures.append(f"{bid}: parse rate {h.parse_rate:.3f} below the gate {g.min_parse_rate}")
    if math.isnan(h.truncation_rate):
        failures.append(f"{bid}: truncation rate unknown (no finish reasons recorded)")
    elif h.truncation_rate > g.max_truncation_rate:
        failures.append(f"{bid}: truncation rate {h.truncation_rate:.3f} above the gate {g.max_truncation_rate} "
                        f"(max_gen_toks {h.max_gen_toks})")
    return failures
