"""`campaign` commands for the evaluation area: eval (and --regrade), export-tasks, calibrate, data benchmarks; the
audits of data and graders are cli/audit_commands.py."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cli.console import err, out
from cli.errors import as_user_error
from wtcommon.errors import UserError
from cli.groups import command, subgroup
from cli.options import OutDirOpt, OutFileOpt
from cli.writable import out_dir_callback

if TYPE_CHECKING:
    from evaluation.evaluator import CheckpointEvaluation
    from evaluation.run_meta import RunMeta


DEFAULT_DATA_DIR = Path("data/benchmarks")


def _step_from_path(p: Path) -> int:
    m = re.search(r"(?:global_step|step)[_-]?(\d+)", str(p))
    return int(m.group(1)) if m else 0


def _fmt(x: float, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "NaN"
    return f"{x:.1f}" if pct else f"{x:.2f}"


def _suite_or_fail(name: str, max_gen_toks: int | None):
    from evaluation.suite import load_suite, with_max_gen_toks

    with as_user_error():  # SuiteError, or a bad --max-gen-toks
        return with_max_gen_toks(load_suite(name), max_gen_toks)


def _data_dir_or_fail(data_dir: Path) -> Path:
    if not data_dir.is_dir():
        raise UserError(f"{data_dir}: benchmark data directory not found; build it with `campaign data benchmarks "
                        f"--out "
                        f"{data_dir}` "
                        "or pass --data-dir evaluation/fixtures/db12 for the fixture suite")
    return data_dir


def eval_cmd(
    checkpoint: Path | None = typer.Argument(None, help="HF-format checkpoint directory (not with --regrade)"),
    suite: str = typer.Option("db12", "--suite", help="suite name (campaigns/suite/<name>.yaml) or path"),
    backend: str = typer.Option("hf", "--backend", help="hf (CPU/GPU) or vllm (the gpu extra, or vLLM's CPU build: "
                                "make venv-vllm)"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir", help="directory of <benchmark>.parquet files"),
    out_path: OutFileOpt[Path | None] = None,
    limit: int | None = typer.Option(None, "--limit", min=1, help="first N items per benchmark (smoke runs)"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", callback=out_dir_callback,
                                          help="generation cache (reruns regenerate nothing)"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="evaluate only these benchmark ids (repeatable)"),
    max_gen_toks: int | None = typer.Option(None, "--max-gen-toks", help="override every generation limit"),
    run_id: str | None = typer.Option(None, "--run-id"),
    run_key: str | None = typer.Option(None, "--run-key"),
    campaign: str = typer.Option("adhoc", "--campaign"),
    model: str | None = typer.Option(None, "--model"),
    policy: str = typer.Option("unknown", "--policy"),
    mechanism: str | None = typer.Option(None, "--mechanism"),
    seed: int = typer.Option(0, "--seed"),
    step: int | None = typer.Option(None, "--step", help="default: parsed from 'global_step_N' in the path"),
    regime: str = typer.Option("", "--regime"),
    config_hash: str = typer.Option("", "--config-hash"),
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="HF backend generation batch"),
    vllm_dtype: str = typer.Option("bfloat16", "--vllm-dtype", help=(
        "vLLM backend: the engine's dtype (bfloat16, float16, float32, auto); float32 equals the HF backend's "
        "greedy generations")),
    vllm_eager: bool = typer.Option(False, "--vllm-eager", help="vLLM backend: no graph compilation (CPU, small "
                                    "models: faster start)"),
    regrade: bool = typer.Option(False, "--regrade", help=(
        "re-score the evaluation at --out (its records and the item log beside them) under the current graders: "
        "no model, no new generation; prints each benchmark's score change")),
) -> None:
    """Evaluate one checkpoint on the suite (one model load) and write Records.

    --out FILE gets the records (.parquet or .csv), and the item log goes beside it. With --regrade, --out
    names an existing evaluation whose stored generations are re-scored in place."""
    if regrade:
        for name, given in (("--benchmark", benchmark), ("--limit", limit)):  # it re-scores what is stored, whole
            if given:
                raise UserError(f"{name}: not with --regrade (it re-scores every stored generation of the evaluation "
                                f"at --out, and rewrites its records whole); drop {name}")
        _regrade(_regrade_target(checkpoint, out_path), _suite_or_fail(suite, max_gen_toks),
                 data_dir if data_dir.is_dir() else None)
        return
    if checkpoint is None:
        raise UserError("missing CHECKPOINT: the HF-format checkpoint directory to evaluate (or --regrade --out "
                        "RECORDS to re-score a stored evaluation)")
    from analysis.records import write_records
    from evaluation.backends.vllm import VLLMOptions, VLLMUnavailableError
    from wtcommon.model_dir import model_dir_problem
    from evaluation.evaluator import evaluate_checkpoint

    _check_eval_out(out_path)
    _check_eval_options(checkpoint, backend, seed, step, max_gen_toks)
    s = _suite_or_fail(suite, max_gen_toks)
    _data_dir_or_fail(data_dir)
    if (problem := model_dir_problem(checkpoint, "CHECKPOINT")) is not None:  # before the model loads
        raise UserError(problem)
    meta = _run_meta(checkpoint, run_id=run_id, run_key=run_key, campaign=campaign, model=model, policy=policy,
                     mechanism=mechanism, seed=seed, step=step, regime=regime, config_hash=config_hash)
    try:
        with as_user_error():  # EvaluationError: exit 1; bad records or settings: 2
            ev = evaluate_checkpoint(checkpoint, suite=s, data_dir=data_dir, backend=backend, run_meta=meta,
                                     out=out_path, limit=limit, cache_dir=cache_dir, benchmarks=benchmark or None,
                                     batch_size=batch_size, vllm_options=VLLMOptions.from_mapping(
                                         {"dtype": vllm_dtype, "enforce_eager": vllm_eager}, "--vllm-dtype"))
            if ev.records_path is not None:
                write_records(ev.records, ev.records_path)
    except VLLMUnavailableError as e:  # --backend vllm without the gpu extra: the user's to install (exit 2)
        raise UserError(str(e)) from e
    _print_scores(ev, f"{checkpoint} on {s.name}", out_path)


def _check_eval_out(out_path: Path | None) -> None:
    """--out names a records file (.parquet, .pq or .csv) or a folder (records.parquet inside): a name with another
    suffix that is not an existing folder is a typo for a file, not a folder to create (`ev.txt/`)."""
    if out_path is None or out_path.is_dir() or not out_path.suffix:
        return
    if out_path.suffix.lower() not in (".parquet", ".pq", ".csv"):
        raise UserError(f"--out {out_path}: records are written as .parquet or .csv; name a file with one of those "
                        "suffixes, or a folder (records.parquet goes inside)")


def _regrade_target(checkpoint: Path | None, out_path: Path | None) -> Path:
    """The records --regrade re-scores: --out, and no CHECKPOINT (the generations are stored)."""
    if checkpoint is not None:
        raise UserError(f"--regrade re-scores the stored generations at --out; it takes no CHECKPOINT "
                        f"({checkpoint}): drop it")
    if out_path is None:
        raise UserError("--regrade needs --out RECORDS: the records file of the evaluation to re-score (its item "
                        "log, RECORDS' stem + .items.jsonl.gz, holds the generations)")
    return out_path


def _check_eval_options(checkpoint: Path, backend: str, seed: int, step: int | None,
                        max_gen_toks: int | None) -> None:
    """Bad options and a missing checkpoint are exit 2, before the suite is read or a model loaded."""
    from orchestrator.engine.ranges import check_count, check_seed

    if backend not in ("hf", "vllm"):
        raise UserError(f"--backend {backend!r}: use hf or vllm")
    for problem in (check_seed("--seed", seed), check_count("--step", step, minimum=0),
                    check_count("--max-gen-toks", max_gen_toks)):
        if problem:
            raise UserError(problem)
    if not checkpoint.exists():
        raise UserError(f"{checkpoint}: checkpoint not found")


def _run_meta(checkpoint: Path, *, run_id: str | None, run_key: str | None, campaign: str, model: str | None,
              policy: str, mechanism: str | None, seed: int, step: int | None, regime: str,
              config_hash: str) -> RunMeta:
    """The records' run columns: the options, else what the checkpoint's path and the policy's YAML say."""
    from evaluation.run_meta import RunMeta
    from orchestrator.engine.grid import policy_mechanism

    return RunMeta(run_id=run_id or checkpoint.resolve().name, campaign=campaign, model=model or checkpoint.name,
                   policy=policy, seed=seed, step=_step_from_path(checkpoint) if step is None else step,
                   run_key=run_key or "", mechanism=mechanism or policy_mechanism(policy, Path.cwd()),
                   regime=regime, config_hash=config_hash)


def _print_scores(ev: CheckpointEvaluation, title: str, out_path: Path | None) -> None:
    """One row per benchmark (n, accuracy, parse and truncation rates), then where the files went."""
    t = Table(title=title)
    for c in ("benchmark", "domain", "n", "accuracy", "parse", "trunc"):
        t.add_column(c, justify="left" if c in ("benchmark", "domain") else "right")
    for r in ev.records.itertuples():
        t.add_row(r.benchmark, r.domain, str(r.n_items), _fmt(r.accuracy, True), _fmt(r.parse_rate),
                  _fmt(r.truncation_rate))
    out.print(t)
    if out_path:
        out.print(f"records: {out_path}\nitem log: {ev.items_path}")


def _regrade(records: Path, s, data_dir: Path | None) -> None:
    """`campaign eval --regrade`: re-score, print the change per benchmark, then write (item log, then records)."""
    from analysis.records import read_records, write_records
    from evaluation.evaluator import records_path
    from evaluation.regrade import regrade_output, write_regraded

    rp = records_path(records)
    if not rp.is_file():
        raise UserError(f"{rp}: records not found; --regrade re-scores an existing evaluation (`campaign eval "
                        "CHECKPOINT --out RECORDS` writes one)")
    with as_user_error():  # RecordsError, RegradeError: exit 2, nothing written
        r = regrade_output(read_records(rp, s), rp, s, data_dir=data_dir)
        write_records(r.records, rp)  # validated before anything is replaced; then the item log beside it
        write_regraded(r)
    t = Table(title=f"regrade {rp} on {s.name}")
    for c in ("benchmark", "grader", "n", "before", "after", "change", "items changed"):
        t.add_column(c, justify="left" if c in ("benchmark", "grader") else "right")
    for ch in r.changes:
        grader = ch.grader_after if ch.grader_before == ch.grader_after else f"{ch.grader_before} -> {ch.grader_after}"
        t.add_row(ch.benchmark, grader, str(ch.n_items), _fmt(ch.accuracy_before, True),
                  _fmt(ch.accuracy_after, True), f"{ch.delta:+.1f}", str(ch.changed))
    out.print(t)
    for ch in r.changes:  # what changed, by status: no_answer->ok is a reflection now credited, ok->hedged a hedge
        if ch.status_changes:
            out.print(f"{ch.benchmark} status changes: {ch.describe_statuses()}", highlight=False, soft_wrap=True)
    n_resp = sum(len(x.get("samples") or [x]) for x in r.rows)
    out.print(f"{r.n_generated} new generations: {n_resp} stored responses re-scored, no model loaded\n"
              f"records: {rp}\nitem log: {r.items_path}")


def export_tasks_cmd(
    out_dir: Path = typer.Argument(..., help="directory to write the lm-eval task YAMLs and their data into",
                                   callback=out_dir_callback),
    suite: str = typer.Option("db12", "--suite", help="suite name (campaigns/suite/<name>.yaml) or path"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir", help="directory of <benchmark>.parquet files"),
    max_gen_toks: int | None = typer.Option(None, "--max-gen-toks", min=1,
                                               help="override every generation limit (as `campaign eval`)"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="only these benchmark ids (repeatable)"),
    force: bool = typer.Option(False, "--force", help="replace task files already in OUT_DIR"),
) -> None:
    """Write the suite's lm-eval tasks (YAML + data copy) so plain `lm_eval --include_path OUT_DIR` reproduces
    `campaign eval` (the command to run is written to OUT_DIR/README.md and printed)."""
    from evaluation.tasks.export import export_tasks

    s = _suite_or_fail(suite, max_gen_toks)
    _data_dir_or_fail(data_dir)
    ids = benchmark or s.benchmark_ids
    unknown = sorted(set(ids) - set(s.benchmark_ids))
    if unknown:
        raise UserError(f"--benchmark {unknown}: not in suite {s.name}; known: {s.benchmark_ids}")
    if out_dir.exists() and any(out_dir.glob("*.yaml")) and not force:
        raise UserError(f"{out_dir}: already holds task YAMLs; pass --force to replace them or choose another "
                        f"directory")
    names, cmd = export_tasks(s, data_dir, out_dir, ids)
    out.print(f"wrote {len(names)} tasks to {out_dir} (data copied to {(out_dir / 'data').resolve()})")
    typer.echo(" ".join(cmd))


def calibrate_cmd(
    model: Path = typer.Argument(..., help="HF-format model directory to smoke-test"),
    suite: str = typer.Option("db12", "--suite"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir"),
    n: int = typer.Option(3, "--n", min=1, max=10_000, help="items per benchmark (at most 10,000)"),
    backend: str = typer.Option("hf", "--backend"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="only these benchmark ids (repeatable)"),
    max_gen_toks: int | None = typer.Option(None, "--max-gen-toks", help="override every generation limit"),
) -> None:
    """Pre-campaign smoke test: task support, answer-format alignment, parse and truncation rates."""
    from evaluation.calibrate import calibrate

    if not model.exists():
        raise UserError(f"{model}: model not found")
    s = _suite_or_fail(suite, max_gen_toks)
    _data_dir_or_fail(data_dir)
    df = calibrate(model, suite=s, data_dir=data_dir, n=n, backend=backend, benchmarks=benchmark or None)
    t = Table(title=f"calibrate {model} on {s.name} ({n} items each)")
    for c in ("benchmark", "task", "format", "parse", "trunc", "acc", "verdict", "problem"):
        t.add_column(c)
    for r in df.itertuples():
        t.add_row(r.benchmark, "ok" if r.task_ok else "MISSING", "ok" if r.format_ok else "MISMATCH",
                  _fmt(r.parse_rate), _fmt(r.truncation_rate), _fmt(r.accuracy, True),
                  "[green]pass[/green]" if r.passed else "[red]FAIL[/red]", r.problem)
    out.print(t)
    failed = int((~df["passed"]).sum())
    if failed:
        for r in df[~df["passed"]].itertuples():
            err.print(f"FAIL {r.benchmark}: {r.problem}", highlight=False, soft_wrap=True)
        err.print(f"[red]calibration failed for {failed} of {len(df)} benchmarks[/red]")
        raise typer.Exit(1)
    out.print(f"[green]calibration passed for all {len(df)} benchmarks[/green]")


def data_benchmarks_cmd(
    out_dir: OutDirOpt[Path],
    suite: str = typer.Option("db12", "--suite"),
    only: list[str] = typer.Option([], "--only", help="build only these benchmark ids (repeatable)"),
    revision: list[str] = typer.Option([], "--revision", help="pin a source: ID=SHA (repeatable)"),
    seed: int | None = typer.Option(None, "--seed", min=0, metavar="N",
                                    help="the generated benchmarks' seed (clean_arith), overriding the suite's "
                                         "options.seed: one per campaign makes a set no model has seen"),
    sources: Path | None = typer.Option(None, "--sources", metavar="DIR", help="read each benchmark's source rows "
                                        "from DIR/<id>.jsonl (the hub source's schema) instead of downloading: "
                                        "offline builds, e.g. evaluation/fixtures/post_cutoff"),
) -> None:
    """Download the suite's benchmarks from the HF hub, subset/sample as the study did, write Parquet +
    checksums: --out FOLDER gets one <benchmark>.parquet each and manifest.json. Generated benchmarks
    (clean_arith) are drawn from their seed here, no network needed."""
    from evaluation.benchmark_build import build_benchmarks
    from evaluation.builders import BUILDERS, GENERATED

    s = _suite_or_fail(suite, None)
    ids = only or s.benchmark_ids
    unknown = [b for b in ids if b not in BUILDERS or b not in s.benchmark_ids]
    if unknown:
        raise UserError(f"--only {unknown}: no builder or not in suite {s.name}; known: {sorted(BUILDERS)}")
    revs = {}
    for r in revision:
        if "=" not in r:
            raise UserError(f"--revision {r!r}: expected ID=SHA")
        k, v = r.split("=", 1)
        revs[k] = v
    if seed is not None and not any(b in GENERATED for b in ids):
        raise UserError(f"--seed {seed}: no generated benchmark among {', '.join(ids)} (only {sorted(GENERATED)} "
                        "are drawn from a seed); leave --seed out")
    from cli.benchmark_output import print_aggregates, print_build_plan

    print_build_plan(s, ids, revs, sources)
    man = build_benchmarks(s, ids, out_dir, revs, on_built=lambda bid, n: out.print(f"{bid}: {n} items"), seed=seed,
                           sources_dir=sources)
    out.print(f"manifest: {man}")
    print_aggregates(s, ids)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "eval", eval_cmd)
    command(app, "export-tasks", export_tasks_cmd)
    command(app, "calibrate", calibrate_cmd)
    data_app = subgroup(app, "data", "Build training corpora and evaluation data.")
    command(data_app, "benchmarks", data_benchmarks_cmd)


__all__ = ["register"]
