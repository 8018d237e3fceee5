"""`campaign calibrate`: the smoke test before a campaign (STUDY.md L1).

On a few items per benchmark: (1) the task is generated and indexed by lm-eval, (2) the gold
answer written in the training answer format (`prompts.render_gold`) scores 1 through the
grader — the prompt/answer-format alignment whose absence cost the study a campaign, (3) the
model's parse and truncation rates pass the suite gates. One model load for everything.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd

from evaluation.benchmark_data import read_benchmark
from evaluation.evaluator import EvaluationError, evaluate_checkpoint
from evaluation.graders import grade
from evaluation.prompts import render_gold
from evaluation.run_meta import RunMeta
from evaluation.suite import Gates, Suite, load_suite, with_max_gen_toks


def format_alignment(suite: Suite, data_dir: Path, n: int, benchmark_ids: list[str]) -> dict[str, tuple[bool, str]]:
    """Per benchmark: does the gold, rendered in the training answer format, score 1 on the first n items?"""
    out: dict[str, tuple[bool, str]] = {}
    for bid in benchmark_ids:
        b = suite.benchmark(bid)
        df = read_benchmark(data_dir, bid, b.grader).head(n)
        bad = []
        for item, gold, k in zip(df["item_id"], df["answer"], df["n_options"], strict=True):
            r = grade(b.grader, render_gold(b.grader, gold), gold, n_options=int(k) or None)
            if r.score != 1.0:
                bad.append(f"{item} ({r.status}, parsed {r.parsed!r})")
        out[bid] = (not bad, "; ".join(bad[:3]))
    return out


def calibrate(
    model: Path,
    *,
    suite: str | Path | Suite = "db12",
    data_dir: Path,
    n: int = 3,
    backend: str = "hf",
    benchmarks: list[str] | None = None,
    max_gen_toks: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per benchmark with `task_ok, format_ok, parse_rate, truncation_rate, accuracy, passed, problem`."""
    s = with_max_gen_toks(suite if isinstance(suite, Suite) else load_suite(suite), max_gen_toks)
    ids = benchmarks or s.benchmark_ids
    align = format_alignment(s, Path(data_dir), n, [b for b in ids if b in s.benchmark_ids])
    relaxed = Gates(min_parse_rate=0.0, max_truncation_rate=1.0, require_item_count=s.gates.require_item_count)
    meta = RunMeta(run_id=f"calibrate:{Path(model).name}", campaign="calibrate", model=str(model), policy="none",
                   mechanism="none", seed=0, step=0)
    rows: list[dict[str, Any]] = []
    try:
        ev = evaluate_checkpoint(Path(model), suite=s, data_dir=Path(data_dir), backend=backend, run_meta=meta,
                                 limit=n, benchmarks=ids, gates=relaxed, progress=progress)
        health = {h.benchmark: dataclasses.asdict(h) for h in ev.health}
    except EvaluationError as e:
        if not e.health:
            raise  # data / task / model problems: nothing to tabulate
        health = {h["benchmark"]: h for h in e.health}
    g = s.gates
    for bid in ids:
        h = health.get(bid, {})
        fmt_ok, fmt_problem = align.get(bid, (False, "unknown benchmark"))
        pr, tr = h.get("parse_rate", math.nan), h.get("truncation_rate", math.nan)
        problems = [p for p in h.get("failures", [])]
        if not fmt_ok:
            problems.append(f"gold in training format does not score 1: {fmt_problem}")
        if not pr >= g.min_parse_rate:
            problems.append(f"parse rate {pr:.2f} < {g.min_parse_rate}")
        if not tr <= g.max_truncation_rate:
            problems.append(f"truncation rate {tr:.2f} > {g.max_truncation_rate}")
        rows.append({"benchmark": bid, "task_ok": bool(h.get("task")), "format_ok": fmt_ok,
                     "n": h.get("n_evaluated", 0), "parse_rate": pr, "truncation_rate": tr,
                     "accuracy": h.get("accuracy", math.nan), "passed": not problems and bool(h.get("task")),
                     "problem": "; ".join(problems)})
    return pd.DataFrame(rows)
