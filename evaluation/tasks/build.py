"""Generate one lm-eval task YAML per suite benchmark, at run time, into a directory.

Why generated: the data directory and the suite's generation limits are only known at run time,
and lm-eval resolves `!function` relative to the YAML file, so each run writes the YAMLs plus a
one-line shim module into a temp dir and loads them with
`TaskManager(include_path=dir, include_defaults=False)` (fast, and no built-in task can shadow ours).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from evaluation.suite import Benchmark, Suite

SHIM = "wt_task_functions.py"
# explicit stop strings: without `until` lm-eval stops at "\n\n" and cuts chains of thought (STUDY.md §5.4)
UNTIL = ["<|im_end|>", "<|endoftext|>", "</s>"]
METRICS = [
    {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
    {"metric": "parsed_ok", "aggregation": "mean", "higher_is_better": True},
    {"metric": "grader_error", "aggregation": "mean", "higher_is_better": False},
    {"metric": "grader_timeout", "aggregation": "mean", "higher_is_better": False},
]


def task_name(suite: Suite, benchmark_id: str) -> str:
    return f"wt_{suite.name}_{benchmark_id}"


def generation_kwargs(b: Benchmark) -> dict:
    """lm-eval `generation_kwargs` of a benchmark: greedy exactly as before, or sampling at its temperature/top_p."""
    gen = {"until": list(b.options.get("until", UNTIL)), "do_sample": False, "temperature": 0.0,
           "max_gen_toks": int(b.max_gen_toks)}
    if not b.decoding.greedy:
        gen.update(do_sample=True, temperature=float(b.temperature), top_p=float(b.top_p))
    return gen


def task_config(suite: Suite, b: Benchmark, data_dir: Path) -> dict:
    """One task: `repeats: k` and a `take_first_k` filter (named `none`, so metric keys stay `acc,none`) hand all
    k generations of an item to `process_results`; a single pass keeps lm-eval's default filter."""
    gen = generation_kwargs(b)
    sampled = {}
    if b.samples > 1:
        sampled = {"repeats": int(b.samples),
                   "filter_list": [{"name": "none", "filter": [{"function": "take_first_k", "k": int(b.samples)}]}]}
    return {
        "task": task_name(suite, b.id),
        "dataset_path": None,
        "dataset_kwargs": {"benchmark_file": str((Path(data_dir) / f"{b.id}.parquet").resolve()),
                           "benchmark_grader": b.grader,
                           # the model's reasoning-block tags (issue 49), only when the suite sets them
                           **({"think_tags": str(b.options["think_tags"])} if "think_tags" in b.options else {})},
        "test_split": "test",
        "training_split": None,
        "validation_split": None,
        "fewshot_split": None,
        "output_type": "generate_until",
        "num_fewshot": 0,
        "generation_kwargs": gen,
        **sampled,
        "metadata": {"version": suite.version, "suite": suite.name, "benchmark": b.id, "grader": b.grader,
                     **({"decoding": b.decoding.as_dict()} if not b.decoding.greedy else {})},
    }


def _dump(cfg: dict, grader: str) -> str:
    # `!function` tags are not plain YAML: append them as text after a safe dump of the rest
    body = yaml.safe_dump(cfg, sort_keys=False)
    fn = SHIM.removesuffix(".py")
    extra = (
        f"custom_dataset: !function {fn}.load_benchmark\n"
        f"doc_to_text: !function {fn}.doc_to_text\n"
        f"doc_to_target: !function {fn}.doc_to_target\n"
        f"process_results: !function {fn}.process_{grader}\n"
        "metric_list:\n"
        + "".join(
            f"  - metric: {m['metric']}\n    aggregation: {m['aggregation']}\n    higher_is_better: "
            f"{str(m['higher_is_better']).lower()}\n"
            for m in METRICS)
        + f"  - metric: answer\n    aggregation: !function {fn}.count_answers\n    higher_is_better: true\n"
        + f"  - metric: outcomes\n    aggregation: !function {fn}.count_outcomes\n    higher_is_better: true\n"
    )
    return body + extra


def write_task_dir(suite: Suite, data_dir: Path, out_dir: Path,
                   benchmark_ids: list[str] | None = None) -> dict[str, str]:
    """Write `<out_dir>/<task>.yaml` for each benchmark plus the shim; returns benchmark id -> task name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SHIM).write_text("from evaluation.tasks.functions import *  # noqa: F401,F403\n"
                                "from evaluation.tasks.functions import (count_answers, doc_to_target, doc_to_text,\n"
                                "    count_outcomes, load_benchmark, process_knights_knaves, process_math,\n"
                                "    process_multiple_choice)\n")
    names: dict[str, str] = {}
    for b in suite.benchmarks:
        if benchmark_ids is not None and b.id not in benchmark_ids:
            continue
        name = task_name(suite, b.id)
        (out_dir / f"{name}.yaml").write_text(_dump(task_config(suite, b, data_dir), b.grader))
        names[b.id] = name
    return names
