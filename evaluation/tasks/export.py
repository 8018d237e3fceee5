"""Export the suite's lm-eval tasks with a copy of their data, so plain `lm_eval --include_path DIR` reproduces
`campaign eval` outside Windtunnel: what `campaign export-tasks` writes (the tasks are evaluation/tasks/build.py's,
the grading evaluation/tasks/functions.py's)."""

from __future__ import annotations

import shutil
from pathlib import Path

from evaluation.benchmark_data import BenchmarkDataError, read_benchmark
from evaluation.suite import Suite
from evaluation.tasks.build import write_task_dir
from wtcommon.errors import UserError


def export_command(task_dir: Path, tasks: list[str], checkpoint: str = "CHECKPOINT", batch_size: int = 32,
                   output_path: str = "OUT") -> list[str]:
    """The `lm_eval` argv that reproduces `campaign eval` on exported tasks: the HF backend in float32 on CPU
    (as the evaluator), the chat template applied, per-sample logs kept."""
    return ["lm_eval", "--model", "hf", "--model_args", f"pretrained={checkpoint},dtype=float32",
            "--include_path", str(task_dir), "--tasks", ",".join(tasks), "--apply_chat_template",
            "--batch_size", str(batch_size), "--device", "cpu", "--output_path", output_path, "--log_samples"]


def export_tasks(suite: Suite, data_dir: Path, out_dir: Path, ids: list[str]) -> tuple[dict[str, str], list[str]]:
    """Write benchmarks `ids`' task YAMLs into `out_dir`, their data (and manifest) into `out_dir/data`, and a
    README.md with the `lm_eval` command; returns (task name by benchmark, that command). Every benchmark file
    is checked as the evaluator checks it before anything is written (`UserError`, exit 2, naming it)."""
    for bid in ids:
        try:
            read_benchmark(data_dir, bid, suite.benchmark(bid).grader)
        except BenchmarkDataError as e:
            raise UserError(f"benchmark {bid}: {e}") from e
    data_out = (out_dir / "data").resolve()
    data_out.mkdir(parents=True, exist_ok=True)
    for bid in ids:
        shutil.copy2(data_dir / f"{bid}.parquet", data_out / f"{bid}.parquet")
    if (data_dir / "manifest.json").exists():
        shutil.copy2(data_dir / "manifest.json", data_out / "manifest.json")
    names = write_task_dir(suite, data_out, out_dir, ids)
    cmd = export_command(out_dir.resolve(), list(names.values()))
    sampled = [f"{b} ({suite.benchmark(b).samples} samples, temperature {suite.benchmark(b).temperature})"
               for b in ids if not suite.benchmark(b).decoding.greedy]
    note = ("" if not sampled else
            "\n\nSampled benchmarks (`repeats: k`, a `take_first_k` filter; `acc` is avg@k, `outcomes` lists each "
            f"sample): {', '.join(sampled)}. lm-eval seeds its generator once per run, `campaign eval` once per "
            "item, so their samples (not their configuration) differ.")
    (out_dir / "README.md").write_text(
        f"# lm-eval tasks of the Windtunnel suite {suite.name}\n\nGreedy generation unless noted, graded by "
        "Windtunnel's graders (`evaluation.tasks.functions`, so the windtunnel package must be installed). "
        "Reproduce `campaign eval CHECKPOINT` with:\n\n```bash\n" + " ".join(cmd) + "\n```\n" + note + "\n")
    return names, cmd
