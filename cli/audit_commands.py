"""`campaign audit contamination|graders`: training prompts against benchmark items, and the graders against a
generated adversarial suite and the other verifiers (split from cli/eval_commands.py, which evaluates)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from cli.console import err, out
from cli.eval_commands import DEFAULT_DATA_DIR, _data_dir_or_fail, _suite_or_fail
from cli.groups import command, subgroup
from cli.options import OutFileOpt
from cli.writable import refuse_replacing
from wtcommon.errors import UserError

if TYPE_CHECKING:
    from evaluation.grader_audit.agreement import Generation
    from evaluation.grader_audit.suite import ClassResult


def contamination_cmd(
    train: Path = typer.Option(..., "--train", help="training Parquet (verl schema: a `prompt` column)"),
    suite: str = typer.Option("db12", "--suite"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir"),
    out_path: OutFileOpt[Path | None] = None,
    threshold: float = typer.Option(0.5, "--threshold", help="13-gram Jaccard above which two texts match"),
    fail_on_match: bool = typer.Option(False, "--fail-on-match", help="exit 1 when any item matches"),
    force: bool = typer.Option(False, "--force", help="replace an existing --out file"),
) -> None:
    """Exact, normalised and 13-gram-Jaccard matches between training prompts and benchmark items.

    --out FILE gets every match as CSV (an existing file is replaced only with --force)."""
    import time

    from evaluation.contamination import audit, bench_items_frame, read_train_prompts, summarise

    if out_path is not None:
        refuse_replacing("--out", out_path, [out_path] if out_path.is_file() else [], force)
    s = _suite_or_fail(suite, None)
    _data_dir_or_fail(data_dir)
    if not 0.0 < threshold < 1.0:
        raise UserError(f"--threshold {threshold}: must be between 0 and 1")
    texts = read_train_prompts(train)  # AuditError, BenchmarkDataError: exit 2
    items = bench_items_frame(data_dir, s.benchmark_ids)
    t0 = time.perf_counter()
    matches = audit(texts, items, threshold=threshold)
    secs = time.perf_counter() - t0
    summary = summarise(matches, items)
    t = Table(title=f"contamination: {train.name} ({len(texts)} prompts) vs {s.name} ({len(items)} items), "
                    f"{secs:.1f} s")
    for c in ("benchmark", "n_items", "exact", "normalised", "ngram", "contaminated"):
        t.add_column(c, justify="left" if c == "benchmark" else "right")
    for r in summary.itertuples():
        t.add_row(r.benchmark,
                  *(str(getattr(r, c)) for c in ("n_items", "exact", "normalised", "ngram", "contaminated")))
    out.print(t)
    if out_path:
        from wtcommon.atomic import atomic_path

        with atomic_path(out_path) as tmp:
            matches.to_csv(tmp, index=False)
        out.print(f"matches: {out_path}")
    if fail_on_match and len(matches):
        err.print(f"[red]{summary['contaminated'].sum()} benchmark items match training prompts[/red]")
        raise typer.Exit(1)


def graders_audit_cmd(
    family: list[str] = typer.Option([], "--family", help="only these grader families (repeatable): math, "
                                     "multiple_choice, knights_knaves, zebra_logic"),
    n: int = typer.Option(25, "--n", min=1, max=10_000, help="generated examples per class (at most 10,000)"),
    campaign: str | None = typer.Option(None, "--campaign", help="also re-grade this campaign's stored generations"),
    workdir: Path = typer.Option(Path("."), "--workdir", help="the campaign's work directory"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="only these benchmark ids (repeatable)"),
    out_path: OutFileOpt[Path | None] = None,
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of tables"),
    force: bool = typer.Option(False, "--force", help="replace an existing --out file"),
) -> None:
    """Audit the graders: a generated adversarial suite per family (exploit, false-negative and reflection-refusal
    rates), and with
    --campaign the agreement of our grades with verl's and lm-eval's verifiers on the stored generations.

    --out FILE gets the disagreeing samples as JSON lines (default
    <workdir>/results/<campaign>/grader_disagreements.jsonl)."""
    from evaluation.grader_audit.strategies import FAMILIES
    from evaluation.grader_audit.suite import family_rates, run_suite

    unknown = sorted(set(family) - set(FAMILIES))
    if unknown:
        raise UserError(f"--family {unknown}: unknown grader family; use one of {list(FAMILIES)}")
    if out_path is not None:  # the default file is the campaign's own, rewritten by each audit
        refuse_replacing("--out", out_path, [out_path] if out_path.is_file() else [], force)
    stored = _stored_generations(campaign, workdir, benchmark, out_path)
    results = run_suite(family or None, n=n)
    rates = family_rates(results)
    failing = [r for r in results if r.wrong]
    rows: list[dict] = []
    diffs: list[dict] = []
    if stored is not None:
        from evaluation.grader_audit.agreement import agreement

        rows, diffs = agreement(stored.generations, benchmark or None)
        _write_disagreements(stored.target, diffs)
    if as_json:
        _print_audit_json(rates, failing, rows, len(diffs))
        return
    _print_suite_rates(rates, failing, n)
    if stored is not None:
        _print_agreement(stored, rows)


@dataclass(frozen=True)
class _StoredGenerations:
    """A campaign's stored generations (`audit graders --campaign`): the item logs read, their generations, and
    the file the disagreements go to."""

    campaign: str
    logs: list[Path]
    generations: list[Generation]
    target: Path


def _stored_generations(campaign: str | None, workdir: Path, benchmark: list[str],
                        out_path: Path | None) -> _StoredGenerations | None:
    """The campaign's stored generations (None without --campaign); an unknown --benchmark is exit 2."""
    if campaign is None:
        if benchmark:
            raise UserError("--benchmark selects stored generations: pass --campaign NAME --workdir W too")
        if workdir != Path("."):
            raise UserError(f"--workdir {workdir}: read only with --campaign NAME (whose stored generations to "
                            "re-grade); without it the audit grades generated responses and reads no work dir")
        return None
    from orchestrator.engine.spec_fields import check_name

    try:
        check_name(campaign, "--campaign")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    from evaluation.grader_audit.agreement import item_logs, read_generations
    from evaluation.suite import load_suite
    from orchestrator.engine.paths import campaign_runs, results_file

    logs = item_logs(campaign_runs(workdir, campaign))
    gens = [g for log in logs for g in read_generations(log)]
    known = sorted(set(load_suite("db12").benchmark_ids) | {g.benchmark for g in gens})
    bad = sorted(set(benchmark) - set(known))
    if bad:
        raise UserError(f"--benchmark {bad}: unknown benchmark; use one of {known}")
    target = out_path or results_file(workdir, campaign, "grader_disagreements.jsonl")
    from cli.writable import check_writable

    check_writable(target, "--out", "file")  # before the generated suite runs: exit 2, nothing written
    return _StoredGenerations(campaign, logs, gens, target)


def _write_disagreements(target: Path, diffs: list[dict]) -> None:
    """The disagreeing samples as JSON lines, written atomically (the folder created when missing)."""
    import json

    from wtcommon.atomic import atomic_write_text

    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in diffs))


def _print_audit_json(rates: list[dict[str, object]], failing: list[ClassResult], rows: list[dict],
                      n_disagreements: int) -> None:
    """--json: the family rates, every failing class and the agreement rows as one object."""
    import json

    typer.echo(json.dumps({"families": rates, "failing_classes": [
        {"family": r.family, "class": r.cls, "expect": r.expect, "n": r.n, "wrong": r.wrong,
         "example": r.example.response if r.example else None} for r in failing],
        "agreement": rows, "disagreements": n_disagreements}, default=str))


def _print_suite_rates(rates: list[dict[str, object]], failing: list[ClassResult], n: int) -> None:
    """The generated suite's FP/FN/reflection-refusal rates per family, then every failing class with an example."""
    t = Table(title=f"generated grader suite, {n} per class (zebra_logic: the multiple_choice grader); exploits: "
                    "an exploit or hedge credited; FN: an equivalent form refused; refused: reflections refused (an "
                    "interim answer retracted before one final answer, not credited)", box=box.SIMPLE_HEAD,
              pad_edge=False)
    for c in ("family", "exploits", "rate", "FN", "rate ", "refused", "rate  "):
        t.add_column(c, justify="left" if c == "family" else "right", no_wrap=True)
    for fr in rates:
        t.add_row(str(fr["family"]), f"{fr['false_positives']}/{fr['exploit_n']}", f"{fr['fp_rate']:.3f}",
                  f"{fr['false_negatives']}/{fr['credit_n']}", f"{fr['fn_rate']:.3f}",
                  f"{fr['reflections_refused']}/{fr['reflect_n']}", f"{fr['refusal_rate']:.3f}")
    out.print(t)
    kinds = {"deny": "exploit", "credit": "false negative", "reflect": "reflection refused"}
    for fc in failing:  # every one, with its example (a short list: the suite is expected to be clean)
        ex = fc.example.response if fc.example else ""
        out.print(f"{kinds[fc.expect]} {fc.family}/{fc.cls}: {fc.wrong}/{fc.n}, e.g. {ex[:160]!r}", highlight=False,
                  soft_wrap=True)


def _print_agreement(stored: _StoredGenerations, rows: list[dict]) -> None:
    """Our grades' disagreements with the other verifiers per benchmark, with the interval's meaning."""
    a = Table(title=f"disagreements on {stored.campaign}'s stored generations ({len(stored.logs)} item logs)",
              box=box.SIMPLE_HEAD, pad_edge=False)
    for c in ("benchmark", "verifier", "responses", "items", "95% items"):
        a.add_column(c, justify="left" if c in ("benchmark", "verifier") else "right", no_wrap=True)
    for ar in rows:
        ci = "-" if not ar["n"] else f"{ar['ci_low']:.2f}-{ar['ci_high']:.2f}"
        a.add_row(ar["benchmark"], ar["verifier"], "-" if not ar["n"] else f"{ar['disagree']}/{ar['n']}",
                  "-" if not ar["n"] else f"{ar['items_disagree']}/{ar['items']}", ci)
    out.print(a)
    out.print("interval: Clopper-Pearson exact 95% of the share of items with a disagreement (the runs answer "
              "the same items, so items, not responses, are the independent draws); coverage >= 95% at every "
              "rate and n by construction (simulated: benchmarks/binomial_coverage.py); at n items the smallest "
              "nonzero share is 1/n", highlight=False, soft_wrap=True)
    out.print(f"disagreements: {stored.target}")


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    audit_app = subgroup(app, "audit", "Audits of data and runs.")
    command(audit_app, "contamination", contamination_cmd)
    command(audit_app, "graders", graders_audit_cmd)


__all__ = ["register"]
