"""The `!function` hooks of the generated lm-eval tasks: local data loading and our graders.

Each task's `process_results` grades with `evaluation.graders` (the same code as the training
reward) and returns per-item metrics that lm-eval logs per sample and averages per task:
`acc` (score), `parsed_ok` (an answer was extracted), `grader_error` and `grader_timeout`
(counted by the evaluator's health gates, never folded silently into a 0), and `answer` (the
extracted answer text, logged per item; aggregated as a count). With `repeats: k` (sampled decoding) the
filter hands all k generations to `process_results`: `acc`, `parsed_ok`, `grader_error` and `grader_timeout` are
then means over the k samples (acc = avg@k), `answer` is the first sample's, and `outcomes` lists every
sample's score, status and extracted answer (the evaluator's pass@j and maj@k read it).
"""

from __future__ import annotations

from typing import Any

from evaluation.graders import DEFAULT_TAGS, GradeResult, ThinkTags, grade


def load_benchmark(benchmark_file: str, benchmark_grader: str | None = None, think_tags: str | None = None,
                   **_: Any):
    """`custom_dataset` hook: the benchmark-data Parquet as a `DatasetDict` with one `test` split; a suite's
    `options.think_tags` becomes each row's `think_tags`, which the grading hooks read."""
    from pathlib import Path

    import datasets

    from evaluation.benchmark_data import read_benchmark

    p = Path(benchmark_file)
    df = read_benchmark(p.parent, p.stem, benchmark_grader)
    if think_tags is not None:
        df = df.assign(think_tags=str(think_tags))
    return datasets.DatasetDict({"test": datasets.Dataset.from_pandas(df, preserve_index=False)})


def doc_to_text(doc: dict[str, Any]) -> str:
    return doc["prompt"]


def doc_to_target(doc: dict[str, Any]) -> str:
    return doc["answer"]


def _metrics(grades: list[GradeResult]) -> dict[str, Any]:
    k = len(grades)
    return {
        "acc": sum(float(r.score) for r in grades) / k,
        "parsed_ok": sum(r.status == "ok" for r in grades) / k,
        "grader_error": sum(r.status == "error" for r in grades) / k,
        "grader_timeout": sum(r.status == "timeout" for r in grades) / k,
        "answer": grades[0].parsed if grades[0].parsed is not None else "",
        "outcomes": [{"score": float(r.score), "status": r.status, "parsed": r.parsed} for r in grades],
    }


def _responses(results: list[Any]) -> list[str]:
    """The k generations of one item: a list under the `take_first_k` filter, one string under `take_first`."""
    first = results[0]
    return list(first) if isinstance(first, (list, tuple)) else [first]


def _tags(doc: dict[str, Any]) -> ThinkTags | None:
    """The reasoning-block tags of the item's model/suite: a `think_tags` field of the benchmark row ("OPEN,CLOSE",
    "CLOSE" or "none"), else the default `<think>…</think>` (lm-eval's `think_end_token`, per item)."""
    spec = doc.get("think_tags")
    return DEFAULT_TAGS if spec is None else ThinkTags.parse(str(spec))


def process_math(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    return _metrics([grade("math", r, doc["answer"], tags=_tags(doc)) for r in _responses(results)])


def process_multiple_choice(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    n = int(doc["n_options"])
    return _metrics([grade("multiple_choice", r, doc["answer"], n_options=n, tags=_tags(doc))
                     for r in _responses(results)])


def process_knights_knaves(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    return _metrics([grade("knights_knaves", r, doc["answer"], tags=_tags(doc)) for r in _responses(results)])


def count_answers(items: list[str]) -> float:
    """Aggregation for the per-item `answer` text: how many items had one."""
    return float(sum(1 for a in items if a))


def count_outcomes(items: list[list[dict[str, Any]]]) -> float:
    """Aggregation for the per-item `outcomes` lists: how many samples were graded."""
    return float(sum(len(x) for x in items))
