"""`campaign audit memorization`: is the base model already holding the benchmark? (evaluation/memorization.py)"""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich import box
from rich.table import Table

from cli.console import out
from cli.errors import as_user_error
from cli.groups import command, subgroup
from cli.options import OutDirOpt
from wtcommon.errors import UserError

DEFAULT_DATA_DIR = Path("data/benchmarks")


def _rate(k: int, n: int) -> str:
    return "-" if not n else f"{k / n:.2f}"


def _ci(lo: float, hi: float) -> str:
    return "-" if math.isnan(lo) else f"{lo:.2f}-{hi:.2f}"


def _table(title: str, summaries: list) -> Table:
    """One row per benchmark, 80 columns wide: probed items, the three rates, two intervals, mean ROUGE-L."""
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for c in ("benchmark", "n", "recall", "95% CI", "exact", "95% CI ", "answer", "ROUGE-L"):
        t.add_column(c, justify="left" if c == "benchmark" else "right", no_wrap=True)
    for s in summaries:
        rouge = "-" if math.isnan(s.mean_rouge_l) else f"{s.mean_rouge_l:.2f}"
        t.add_row(s.benchmark, str(s.n_probed), _rate(s.near, s.n_probed), _ci(*s.intervals["near"]),
                  _rate(s.exact, s.n_probed), _ci(*s.intervals["exact"]), _rate(s.answer, s.n_probed), rouge)
    return t


def _most_recalled(summaries: list, near: float) -> list[str]:
    """A line per benchmark with recalled items: its (up to) three most recalled, with their ROUGE-L."""
    lines = []
    for s in summaries:
        top = [f"{r['item_id']} ({r['rouge_l']:.2f})" for r in s.top[:3] if r["rouge_l"] >= near]
        if top:
            lines.append(f"  {s.benchmark}: {', '.join(top)}")
    return lines


def memorization_cmd(
    model: Path = typer.Option(..., "--model", metavar="DIR", help="HF-format model directory (config.json, weights, "
                               "tokenizer): the base model to probe"),
    suite: str = typer.Option("db12", "--suite", help="suite name (campaigns/suite/<name>.yaml) or path"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir", help="directory of <benchmark>.parquet files "
                                  "(the demo's: <workdir>/data/eval; the fixtures: evaluation/fixtures/db12)"),
    prefix: float = typer.Option(0.6, "--prefix", help="share of each problem's tokens (the model's tokenizer) "
                                 "shown; strictly between 0 and 1"),
    near: float = typer.Option(0.8, "--near", help="ROUGE-L F1 at or above which an item counts as recalled"),
    extra_tokens: int = typer.Option(32, "--extra-tokens", help="tokens generated beyond the true rest's length, "
                                     "room for the answer"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="probe only these benchmark ids (repeatable)"),
    out_dir: OutDirOpt[Path | None] = None,
    cache_dir: Path | None = typer.Option(None, "--cache-dir", metavar="DIR", help="default $WINDTUNNEL_CACHE or "
                                          "~/.cache/windtunnel"),
    batch_size: int = typer.Option(16, "--batch-size", help="HF backend generation batch"),
) -> None:
    """Show the model the first --prefix share of every benchmark problem and score its greedy continuation
    against the true rest (arXiv 2507.10532): per benchmark, the share recalled near-verbatim (ROUGE-L >= --near),
    exactly, and with the gold answer, each with a Clopper-Pearson exact 95% interval, and the most-recalled items.

    --out FOLDER (default results/memorization/<model>-<suite>-p<prefix>) gets memorization.json, memorization.csv
    (per benchmark) and memorization_items.csv (per item). A rerun with the same model, suite, data and prefix
    reads the cache and loads no model."""
    from evaluation.memorization import ProbeSettings, check_model_dir, run_probe, summarise
    from evaluation.memorization_report import write_report
    from evaluation.suite import load_suite

    settings = ProbeSettings(prefix=prefix, extra_tokens=extra_tokens, near=near, batch_size=batch_size)
    settings.check()  # MemorizationError: exit 2, before anything is read or written
    check_model_dir(model)
    with as_user_error():
        s = load_suite(suite)
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: benchmark data directory not found; build it with `campaign data "
                        f"benchmarks --suite {s.name} --out {data_dir}`, or pass the demo's <workdir>/data/eval or "
                        "evaluation/fixtures/db12")
    target = out_dir or Path("results") / "memorization" / f"{model.resolve().name}-{s.name}-p{prefix:g}"
    res = run_probe(model, s, data_dir, settings, benchmarks=benchmark or None, cache_root=cache_dir)
    summaries = summarise(res.rows, settings.near)
    title = (f"memorization: {model.name} on {s.name} {s.version}, first {prefix:g} of each problem's tokens, "
             f"greedy, {'cached' if res.cached else 'generated'}")
    out.print(_table(title, summaries))
    recalled = _most_recalled(summaries, near)
    out.print("most recalled (all 10 per benchmark in memorization.json):" if recalled else
              "most recalled: no item at or above the threshold", highlight=False, soft_wrap=True)
    for line in recalled:
        out.print(line, highlight=False, soft_wrap=True)
    out.print(f"recalled: ROUGE-L F1 >= {near:g} over word tokens; exact: the rest verbatim (up to whitespace); "
              "answer: the gold stated beyond the rest. Intervals: Clopper-Pearson exact 95% over probed items. "
              "A high rate is evidence the model holds the benchmark, not proof; a low one does not clear it.",
              highlight=False, soft_wrap=True)
    if any(x.skipped for x in summaries):
        out.print("skipped: " + "; ".join(f"{x.benchmark}: " + ", ".join(f"{v} {k}" for k, v in x.skipped.items())
                                          for x in summaries if x.skipped), highlight=False, soft_wrap=True)
    for p in write_report(target, res, summaries, settings):
        out.print(f"wrote {p}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Attach `campaign audit memorization` to the shared `audit` group."""
    group = subgroup(app, "audit", "Audits of data and runs.")
    command(group, "memorization", memorization_cmd)


__all__ = ["register"]
