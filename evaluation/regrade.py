"""Re-score stored generations under the current graders, without a model or a new generation (issue 39).

An evaluation writes every response it scored into its item log (`<records>.items.jsonl.gz`, beside the
records; a sampled benchmark's row lists each sample's response). When a grader's rules change (its
`GRADER_VERSION` bumps), the scores are stale but the generations are not: `regrade_output` re-grades every
stored response with the grader the suite names for its benchmark, rebuilds each benchmark's figures with the
evaluator's own `score_benchmark` and gates (evaluation/benchmark_health.py), and returns the new item rows and
records. No model is loaded and the generation cache is never read or written, so a regrade adds zero generations
by construction.

Each re-scored row carries the grader version that scored it (`grader_version`); each record's
`harness_version` names it (`grader <name>-v<N>`) and the analysis refuses to compare records scored under two
versions unless told (`analysis.record_checks.check_one_grader`). A record's `eval_hash` names the settings
that produced it, grader versions included (evaluation/settings.py); a regrade keeps a record's hash when no
grader version changed and otherwise derives a new one from the old hash and the new versions
(`regraded_hash`), so regraded and unregraded runs of one campaign are told apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluation.benchmark_health import BenchmarkHealth, gate_failures, score_benchmark
from evaluation import item_log
from evaluation.evaluator import records_path
from evaluation.graders import DEFAULT_TAGS, ThinkTags, grade_batch, grader_version
from evaluation.suite import Gates, Suite
from wtcommon.errors import UserError
from wtcommon.hashing import digest

GRADER_LABEL = re.compile(r"grader (\S+?)(?=;|$)")


class RegradeError(UserError):
    """Stored generations that cannot be re-scored (no item log, a corrupt one, an unknown benchmark): exit 2."""


@dataclass(frozen=True)
class BenchmarkChange:
    """One benchmark's score before and after the regrade (`changed`: items whose score moved)."""

    benchmark: str
    grader_before: str
    grader_after: str
    n_items: int
    accuracy_before: float
    accuracy_after: float
    changed: int
    # (status before, status after, items) for every item whose status moved (issue 49: "no_answer -> ok" is a
    # reflection now credited, "ok -> hedged" a hedge no longer credited, "ok -> truncated" an unclosed block)
    status_changes: tuple[tuple[str, str, int], ...] = ()

    def describe_statuses(self) -> str:
        """"no_answer->ok 3, ok->hedged 1" (most first), or "-" when no status moved."""
        return ", ".join(f"{a}->{b} {n}" for a, b, n in self.status_changes) or "-"

    @property
    def delta(self) -> float:
        return self.accuracy_after - self.accuracy_before


@dataclass
class Regraded:
    """What a regrade would write: the item rows, the health figures and the records, and the changes."""

    items_path: Path
    records_path: Path
    rows: list[dict[str, Any]]
    health: dict[str, BenchmarkHealth]
    records: pd.DataFrame
    changes: list[BenchmarkChange]
    n_generated: int = 0  # no model, no generation cache: always 0, reported so a reader need not take it on trust


def read_item_log(path: Path) -> list[dict[str, Any]]:
    """Every row of an item log; RegradeError naming the file (and line) when it is missing or corrupt."""
    if not path.is_file():
        raise RegradeError(f"{path}: no item log, so no stored generations to re-grade; an evaluation writes it "
                           "beside its records (`campaign eval --out RECORDS`, or a campaign's evaluate stage); "
                           "evaluate the checkpoint first")
    try:
        lines = item_log.read_lines(path)
    except item_log.UnreadableItemLog as e:
        raise RegradeError(f"{path}: not a readable gzip JSONL item log ({e.reason}); re-evaluate the checkpoint") \
            from None
    rows = []
    for line in lines:
        row = line.row
        if line.json_error is not None:
            raise RegradeError(f"{path}: line {line.number}: not valid JSON ({line.json_error}); the item log is "
                               "corrupt: re-evaluate the checkpoint (its generation cache makes that cheap)")
        if row is None or not {"benchmark", "item_id", "response", "gold"} <= set(row):
            raise RegradeError(f"{path}: line {line.number}: an item row needs benchmark, item_id, response and "
                               "gold; re-evaluate the checkpoint")
        rows.append(row)
    if not rows:
        raise RegradeError(f"{path}: the item log holds no items; re-evaluate the checkpoint")
    return rows


def _n_options(rows: list[dict[str, Any]], bid: str, grader: str, data_dir: Path | None) -> list[int | None]:
    """Each row's option count (multiple choice): from the row (logs since issue 39), else the benchmark data."""
    if grader != "multiple_choice":
        return [None] * len(rows)
    if all("n_options" in r for r in rows):
        return [int(r["n_options"]) for r in rows]
    if data_dir is None:
        raise RegradeError(f"{bid}: the item log does not record each item's option count (written before issue "
                           "39); pass --data-dir with the benchmark data it was evaluated on")
    from evaluation.benchmark_data import BenchmarkDataError, read_benchmark

    try:
        df = read_benchmark(Path(data_dir), bid, grader)
    except BenchmarkDataError as e:
        raise RegradeError(str(e)) from e
    by_id = dict(zip(df["item_id"].astype(str), df["n_options"].astype(int), strict=True))
    missing = [str(r["item_id"]) for r in rows if str(r["item_id"]) not in by_id]
    if missing:
        raise RegradeError(f"{bid}: item(s) {missing[:3]} of the log are not in {Path(data_dir) / (bid + '.parquet')}; "
                           "pass the --data-dir the run was evaluated on")
    return [int(by_id[str(r["item_id"])]) for r in rows]


def _new_failures(h: BenchmarkHealth, g: Gates, old: list[dict[str, Any]], reps: int) -> list[str]:
    """The gate failures the regrade causes: grader errors and timeouts, and a parse rate it pushed below the
    gate. The gates the evaluation ran under are not in its log (a campaign may relax them), so a benchmark the
    evaluator scored stays scored unless the new grader is what fails it; truncation is the generations'."""
    outs = [o for r in old for o in (r.get("samples") or [r])]
    parsed_before = float(np.mean([o.get("status") == "ok" for o in outs])) if outs else 0.0
    keep = []
    for f in gate_failures(h, g, len(old) * reps):
        if "truncation rate" in f or ("parse rate" in f and not parsed_before >= g.min_parse_rate):
            continue
        keep.append(f)
    return keep


def _status_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> tuple[tuple[str, str, int], ...]:
    """(before, after, count) of every status transition between the stored and the re-scored responses (each
    sample of a sampled item counts), most frequent first."""
    moved: dict[tuple[str, str], int] = {}
    for a, b in zip(old, new, strict=True):
        for x, y in zip(a.get("samples") or [a], b.get("samples") or [b], strict=True):
            key = (str(x.get("status", "unknown")), str(y.get("status", "unknown")))
            if key[0] != key[1]:
                moved[key] = moved.get(key, 0) + 1
    return tuple((a, b, n) for (a, b), n in sorted(moved.items(), key=lambda kv: (-kv[1], kv[0])))


def regrade_rows(rows: list[dict[str, Any]], suite: Suite, *, data_dir: Path | None = None, processes: int = 2,
                 gates: Gates | None = None) -> tuple[list[dict[str, Any]], dict[str, BenchmarkHealth],
                                                       list[BenchmarkChange]]:
    """Re-grade every stored response of `rows` (one grader call per benchmark, all its samples at once).

    `gates`: apply these health gates in full; None (default): refuse only what the regrade causes (grader
    errors or timeouts, a parse rate pushed below the suite's gate)."""
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_bench.setdefault(str(r["benchmark"]), []).append(r)
    unknown = sorted(set(by_bench) - set(suite.benchmark_ids))
    if unknown:
        raise RegradeError(f"benchmark(s) {unknown} of the item log are not in suite {suite.name!r}; pass the "
                           f"--suite the run was evaluated with (known here: {suite.benchmark_ids})")
    g = gates or suite.gates
    out: list[dict[str, Any]] = []
    health: dict[str, BenchmarkHealth] = {}
    changes: list[BenchmarkChange] = []
    failures: list[str] = []
    for bid in suite.benchmark_ids:
        old = by_bench.get(bid)
        if not old:
            continue
        b = suite.benchmark(bid)
        k = int(old[0].get("n_samples") or 1)
        sampled = any(r.get("samples") for r in old)
        if sampled and any(len(r.get("samples") or []) != k for r in old):
            raise RegradeError(f"{bid}: item rows list different sample counts; the item log is corrupt")
        if (k if sampled else 1) != b.samples:
            raise RegradeError(f"{bid}: the item log holds {k if sampled else 1} sample(s) per item but suite "
                               f"{suite.name!r} decodes {b.samples}: its decoding changed since, so the stored "
                               "generations cannot be re-scored as its records; re-evaluate the checkpoint")
        texts = [s["response"] for r in old for s in r["samples"]] if sampled else [r["response"] for r in old]
        reps = k if sampled else 1
        golds = [str(r["gold"]) for r in old for _ in range(reps)]
        opts = [o for o in _n_options(old, bid, b.grader, data_dir) for _ in range(reps)]
        tags = ThinkTags.parse(str(b.options["think_tags"])) if "think_tags" in b.options else DEFAULT_TAGS
        graded = grade_batch(b.grader, [str(t) for t in texts], golds, opts, processes=processes, tags=tags)
        label = grader_version(b.grader)
        h = BenchmarkHealth(benchmark=bid, task="", n_expected=len(old), n_evaluated=len(old),
                            grader_version=label, max_gen_toks=int(old[0].get("max_gen_toks") or b.max_gen_toks),
                            samples=reps, metric=b.metric_name)
        grid = np.array([x.score for x in graded], dtype=float).reshape(len(old), reps)
        answers = [[x.parsed for x in graded[i * reps:(i + 1) * reps]] for i in range(len(old))]
        new_rows = []
        for i, r in enumerate(old):
            mine = graded[i * reps:(i + 1) * reps]
            nr = {**r, "grader_version": label}
            if sampled:
                nr["samples"] = [{**s, "score": float(x.score), "status": x.status, "parsed": x.parsed}
                                 for s, x in zip(r["samples"], mine, strict=True)]
                st = [x.status for x in mine]
                nr["status"] = ("error" if "error" in st else "timeout" if "timeout" in st else "ok" if "ok" in st
                                else "no_answer")
                nr["parsed"] = mine[0].parsed
            else:
                nr.update(status=mine[0].status, parsed=mine[0].parsed)
            new_rows.append(nr)
        score_benchmark(h, b, new_rows, grid, answers)
        failures += gate_failures(h, g, len(old) * reps) if gates is not None else _new_failures(h, g, old, reps)
        before = float(np.mean([float(r["score"]) for r in old])) * 100.0
        moved = int(sum(not np.isclose(float(a["score"]), float(n["score"])) for a, n in zip(old, new_rows,
                                                                                          strict=True)))
        changes.append(BenchmarkChange(bid, str(old[0].get("grader_version") or "unknown"), label, len(old), before,
                                       h.accuracy, moved, _status_changes(old, new_rows)))
        health[bid] = h
        out.extend(new_rows)
    if failures:
        raise RegradeError(f"{len(failures)} health gate failure(s) under the current graders: " + "; ".join(failures)
                           + "; nothing written")
    return out, health, changes


def regraded_hash(old: str, graders: dict[str, str]) -> str:
    """The `eval_hash` of a record re-scored under `graders` (benchmark -> label): "" stays "" (no settings hash
    was known), else 16 hex digits of the old hash and the new labels."""
    if not old:
        return ""
    return digest({"regraded_from": old, "graders": graders}, spaced=True)


def regrade_records(records: pd.DataFrame, health: dict[str, BenchmarkHealth],
                    changes: list[BenchmarkChange]) -> pd.DataFrame:
    """`records` with each regraded benchmark's figures, grader label and (when a version changed) eval_hash."""
    out = records.copy()
    missing = sorted(set(health) - set(out["benchmark"]))
    if missing:
        raise RegradeError(f"benchmark(s) {missing} are in the item log but not in the records; the two files are "
                           "from different evaluations: re-evaluate the checkpoint")
    uncovered = sorted(set(out["benchmark"].astype(str)) - set(health))
    if uncovered:  # rewriting the records and the health file from a partial log would drop or blank the rest
        raise RegradeError(f"benchmark(s) {uncovered} are in the records but not in the item log: it cannot re-score "
                           "them, and the records and health file are rewritten whole; re-evaluate the checkpoint "
                           "(its generation cache makes that cheap); nothing written")
    version_changed = any(c.grader_before != c.grader_after for c in changes)
    labels = {bid: h.grader_version for bid, h in health.items()}
    for bid, h in health.items():
        sel = out["benchmark"] == bid
        out.loc[sel, "n_correct"] = h.n_correct
        out.loc[sel, "accuracy"] = h.accuracy
        out.loc[sel, "parse_rate"] = h.parse_rate
        if "metrics" in out.columns and h.metrics:
            out.loc[sel, "metrics"] = json.dumps(h.metrics, sort_keys=True)
        out.loc[sel, "harness_version"] = [
            GRADER_LABEL.sub(f"grader {h.grader_version}", v) if GRADER_LABEL.search(v) else f"{v}; grader "
            f"{h.grader_version}" for v in out.loc[sel, "harness_version"].astype(str)]
    if version_changed and "eval_hash" in out.columns:
        out["eval_hash"] = [regraded_hash(str(v), labels) for v in out["eval_hash"].fillna("").astype(str)]
    return out


def regrade_output(records: pd.DataFrame, where: Path, suite: Suite, *, data_dir: Path | None = None,
                   processes: int = 2) -> Regraded:
    """Re-score the evaluation output at `where` (its records file, read by the caller as `records`); nothing
    is written here (the caller writes the records, then `write_regraded` the item log and health file)."""
    rp = records_path(where)
    ip = item_log.items_path_of(rp)
    rows = read_item_log(ip)
    new_rows, health, changes = regrade_rows(rows, suite, data_dir=data_dir, processes=processes)
    _keep_tasks(health, item_log.health_path_of(ip))
    return Regraded(ip, rp, new_rows, health, regrade_records(records, health, changes), changes)


def _keep_tasks(health: dict[str, BenchmarkHealth], path: Path) -> None:
    """The lm-eval task each benchmark was evaluated as, from the health file being replaced: a regrade re-scores
    responses, it does not know the task (it blanked the field)."""
    try:
        old = {str(e.get("benchmark")): e for e in json.loads(path.read_text()) if isinstance(e, dict)}
    except (OSError, ValueError, TypeError):
        return  # no readable health file: nothing to keep
    for bid, h in health.items():
        if old.get(bid, {}).get("task"):
            h.task = str(old[bid]["task"])


def write_regraded(r: Regraded) -> None:
    """Replace the item log and its health file atomically (each file whole or untouched)."""
    item_log.write_item_log(r.items_path, r.rows, r.health.values())


__all__ = ["BenchmarkChange", "GRADER_LABEL", "RegradeError", "Regraded", "read_item_log",
           "regrade_output", "regrade_records", "regrade_rows", "regraded_hash", "write_regraded"]
