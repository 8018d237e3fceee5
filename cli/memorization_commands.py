"""`campaign audit memorization`: is the base model already holding the benchmark? (evaluation/memorization.py)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from cli.console import err, out
from cli.errors import as_user_error
from cli.groups import command, subgroup
from cli.options import OutDirOpt
from cli.writable import out_dir_callback
from wtcommon.errors import UserError

if TYPE_CHECKING:
    from evaluation.memorization import ProbeResult, ProbeSettings

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


def _paper_table(title: str, summaries: list) -> Table:
    """The paper protocol: one row per benchmark and ratio, as arXiv 2507.10532's Table 2 and Fig. 5 report."""
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for c in ("benchmark", "ratio", "n", "ROUGE-L", "EM", "95% CI", "answer", "95% CI "):
        t.add_column(c, justify="left" if c == "benchmark" else "right", no_wrap=True)
    for s in summaries:
        em = "-" if s.exact is None else _rate(s.exact, s.n_probed)
        em_ci = "-" if s.exact is None else _ci(*s.intervals["exact"])
        t.add_row(s.benchmark, f"{s.ratio:g}", str(s.n_probed),
                  "-" if s.mean_rouge_l is None else f"{s.mean_rouge_l:.2f}", em, em_ci,
                  _rate(s.answer, s.n_probed), _ci(*s.intervals["answer"]))
    return t


def _print_windtunnel(title: str, summaries: list, near: float) -> None:
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


def memorization_cmd(
    model: Path = typer.Option(..., "--model", metavar="DIR", help="HF-format model directory (config.json, weights, "
                               "tokenizer): the base model to probe"),
    suite: str = typer.Option("db12", "--suite", help="suite name (campaigns/suite/<name>.yaml) or path"),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, "--data-dir", help="directory of <benchmark>.parquet files "
                                  "(the demo's: <workdir>/data/eval; the fixtures: evaluation/fixtures/db12)"),
    protocol: str = typer.Option("windtunnel", "--protocol", metavar="windtunnel|paper", help="windtunnel: ours "
                                 "(token cut, word-token LCS, verbatim exact); paper: arXiv 2507.10532's released "
                                 "code (character cut, rouge_score ROUGE-L, EM, answer accuracy at 80/60/40/100%)"),
    prefix: list[float] = typer.Option([], "--prefix", help="windtunnel: the share of each problem's tokens shown, "
                                       "strictly between 0 and 1 (default 0.6); paper: the character shares, "
                                       "repeatable (default 0.8 0.6 0.4 1)"),
    near: float = typer.Option(0.8, "--near", help="ROUGE-L F1 at or above which an item counts as recalled"),
    extra_tokens: int = typer.Option(32, "--extra-tokens", help="windtunnel: tokens generated beyond the true "
                                     "rest's length, room for the answer"),
    max_new_tokens: int = typer.Option(4096, "--max-new-tokens", help="paper: tokens generated per prefix (the "
                                       "released code's 4096; capped by the model's context)"),
    benchmark: list[str] = typer.Option([], "--benchmark", help="probe only these benchmark ids (repeatable)"),
    out_dir: OutDirOpt[Path | None] = None,
    cache_dir: Path | None = typer.Option(None, "--cache-dir", metavar="DIR", callback=out_dir_callback,
                                          help="default $WINDTUNNEL_CACHE or "
                                          "~/.cache/windtunnel"),
    batch_size: int = typer.Option(16, "--batch-size", help="HF backend generation batch"),
    force: bool = typer.Option(False, "--force", help="replace the memorization files already in --out"),
) -> None:
    """Show the model the first part of every benchmark problem and score its greedy continuation against the
    true rest (arXiv 2507.10532). windtunnel (default): per benchmark, the share recalled near-verbatim (ROUGE-L
    >= --near), exactly, and with the gold answer, each with a Clopper-Pearson exact 95% interval, and the most-
    recalled items. paper: the paper's own metric per benchmark and ratio (mean ROUGE-L, EM rate, answer accuracy).

    --out FOLDER (default results/memorization/<model>-<suite>-<protocol setting>) gets memorization.json,
    memorization.csv and memorization_items.csv (per item: the problem, the prefix shown, the completion and, for
    paper, the clipped prediction). A rerun with the same model, suite, data and settings reads the cache and
    loads no model."""
    from cli.writable import check_writable, refuse_replacing
    from evaluation.memorization import ProbeSettings, check_model_dir, default_cache_root, run_probe
    from evaluation.memorization_report import CSV_NAME, ITEMS_NAME, JSON_NAME
    from evaluation.suite import load_suite

    if protocol == "paper":
        settings = ProbeSettings(protocol="paper", ratios=tuple(prefix) or (0.8, 0.6, 0.4, 1.0),
                                 max_new_tokens=max_new_tokens, near=near, batch_size=batch_size)
    elif len(prefix) > 1:
        raise UserError(f"--prefix {prefix}: the windtunnel protocol takes one share (e.g. 0.6); several are for "
                        "--protocol paper")
    else:
        settings = ProbeSettings(prefix=prefix[0] if prefix else 0.6, extra_tokens=extra_tokens, near=near,
                                 batch_size=batch_size, protocol=protocol)
    settings.check()  # MemorizationError: exit 2, before anything is read or written
    check_model_dir(model)
    with as_user_error():
        s = load_suite(suite)
    if not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: benchmark data directory not found; build it with `campaign data "
                        f"benchmarks --suite {s.name} --out {data_dir}`, or pass the demo's <workdir>/data/eval or "
                        "evaluation/fixtures/db12")
    tag = f"p{settings.prefix:g}" if protocol != "paper" else "paper"
    target = out_dir or Path("results") / "memorization" / f"{model.resolve().name}-{s.name}-{tag}"
    check_writable(target, "--out")  # before the model is loaded: exit 2, nothing written
    if out_dir is not None:  # the default folder is this probe's own (its name carries the settings)
        refuse_replacing("--out", out_dir, [out_dir / n for n in (JSON_NAME, CSV_NAME, ITEMS_NAME)], force)
    check_writable(Path(cache_dir or default_cache_root()) / "memorization",
                   "--cache-dir" if cache_dir else "the cache ($WINDTUNNEL_CACHE or ~/.cache/windtunnel)")
    res = run_probe(model, s, data_dir, settings, benchmarks=benchmark or None, cache_root=cache_dir)
    if res.rebuilt is not None:
        err.print(f"warning: {res.rebuilt}: not a readable memorization cache entry; probed again and rewrote it",
                  highlight=False, soft_wrap=True, markup=False)
    how = f"greedy, {'cached' if res.cached else 'generated'}"
    if protocol == "paper":
        _report_paper(res, target, f"memorization (paper protocol, arXiv 2507.10532): {model.name} on {s.name} "
                                   f"{s.version}, character cut, {how}")
        return
    _report_windtunnel(res, target, settings, f"memorization: {model.name} on {s.name} {s.version}, first "
                                              f"{settings.prefix:g} of each problem's tokens, {how}")


def _report_windtunnel(res: ProbeResult, target: Path, settings: ProbeSettings, title: str) -> None:
    from evaluation.memorization import summarise
    from evaluation.memorization_report import write_report

    summaries = summarise(res.rows, settings.near)
    _print_windtunnel(title, summaries, settings.near)
    for p in write_report(target, res, summaries, settings):
        out.print(f"wrote {p}", highlight=False, soft_wrap=True)


def _report_paper(res: ProbeResult, target: Path, title: str) -> None:
    from evaluation.memorization_paper_probe import summarise
    from evaluation.memorization_report import write_paper_report

    summaries = summarise(res.rows)
    out.print(_paper_table(title, summaries))
    out.print("ROUGE-L: rouge_score F-measure (Porter stemming, lower-cased, symbols dropped) of the completion "
              "clipped to the target's word count; EM: round(ROUGE-L, 4) == 1; answer: the completion's final "
              "answer graded correct (ratio 1: the whole problem). Intervals: Clopper-Pearson exact 95% over "
              "probed items.", highlight=False, soft_wrap=True)
    skipped = [x for x in summaries if x.skipped]
    if skipped:
        out.print("skipped: " + "; ".join(f"{x.benchmark}@{x.ratio:g}: " + ", ".join(
            f"{v} {k}" for k, v in x.skipped.items()) for x in skipped), highlight=False, soft_wrap=True)
    for p in write_paper_report(target, res):
        out.print(f"wrote {p}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Attach `campaign audit memorization` to the shared `audit` group."""
    group = subgroup(app, "audit", "Audits of data and runs.")
    command(group, "memorization", memorization_cmd)


__all__ = ["register"]
