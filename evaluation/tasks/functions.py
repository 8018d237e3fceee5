"""The `!function` hooks of the generated lm-eval tasks: local data loading and our graders.

Each task's `process_results` grades with `evaluation.graders` (the same code as the training
reward) and returns per-item metrics that lm-eval logs per sample and averages per task:
`acc` (score), `parsed_ok` (an answer was extracted), `grader_error` and `grader_timeout`
(counted by the evaluator's health gates, never folded silently into a 0), and `answer` (the
extracted answer text, logged per item; aggregated as a count).
"""

from __future__ import annotations

from typing import Any

from evaluation.graders import GradeResult, grade


def load_benchmark(benchmark_file: str, benchmark_grader: str | None = None, **_: Any):
    """`custom_dataset` hook: the benchmark-data Parquet as a `DatasetDict` with one `test` split."""
    from pathlib import Path

    import datasets

    from evaluation.benchmark_data import read_benchmark

    p = Path(benchmark_file)
    df = read_benchmark(p.parent, p.stem, benchmark_grader)
    return datasets.DatasetDict({"test": datasets.Dataset.from_pandas(df, preserve_index=False)})


def doc_to_text(doc: dict[str, Any]) -> str:
    return doc["prompt"]


def doc_to_target(doc: dict[str, Any]) -> str:
    return doc["answer"]


def _metrics(res: GradeResult) -> dict[str, Any]:
    return {
        "acc": float(res.score),
        "parsed_ok": 1.0 if res.status == "ok" else 0.0,
        "grader_error": 1.0 if res.status == "error" else 0.0,
        "grader_timeout": 1.0 if res.status == "timeout" else 0.0,
        "answer": res.parsed if res.parsed is not None else "",
    }


def process_math(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    return _metrics(grade("math", results[0], doc["answer"]))


def process_multiple_choice(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    return _metrics(grade("multiple_choice", results[0], doc["answer"], n_options=int(doc["n_options"])))


def process_knights_knaves(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    return _metrics(grade("knights_knaves", results[0], doc["answer"]))


def count_answers(items: list[str]) -> float:
    """Aggregation for the per-item `answer` text: how many items had one."""
    return float(sum(1 for a in items if a))
