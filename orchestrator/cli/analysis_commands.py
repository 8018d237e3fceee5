"""`campaign tables|compare|sensitivity|report`: the analysis layer on a records file.

Heavy imports (pandas, scipy, matplotlib) happen inside the commands so `campaign --help` stays
fast. Malformed records exit 2 with one line per problem (file, row, column) and write nothing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from orchestrator.cli.console import err, fail as _fail


RecordsArg = Annotated[Path, typer.Argument(help="records: long .parquet/.csv or the wide released CSV")]
SuiteOpt = Annotated[str, typer.Option("--suite", help="suite name (campaigns/suite/<name>.yaml) or path")]
CampaignOpt = Annotated[Optional[str], typer.Option("--campaign", help="only this campaign")]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help="only this model")]


def _load(records: Path, suite: str, campaign: str | None = None, model: str | None = None):  # noqa: ANN202
    """Suite + validated records, filtered; every user error becomes exit 2 with a located message."""
    from analysis.records import RecordsError, read_records
    from evaluation.suite import SuiteError, load_suite

    try:
        s = load_suite(suite)
    except SuiteError as e:
        _fail(str(e))
    try:
        df = read_records(records, s)
    except RecordsError as e:
        _fail(str(e))
    for col, val in (("campaign", campaign), ("model", model)):
        if val is not None and not (df[col] == val).any():
            _fail(f"{records}: no records with {col} {val!r}; present: {', '.join(sorted(df[col].unique()))}")
        if val is not None:
            df = df[df[col] == val]
    return s, df


def _clean(v):  # noqa: ANN001, ANN202
    """JSON-safe scalar: NaN/inf -> null, numpy -> Python."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


_COUNTS = {"n", "seeds_needed", "seeds_needed_lo", "seeds_needed_hi", "step", "seed"}


def _rows(df) -> list[dict]:  # noqa: ANN001
    """DataFrame rows as JSON-safe dicts; count columns as integers (null when missing)."""
    out = []
    for r in df.to_dict(orient="records"):
        row = {k: _clean(v) for k, v in r.items()}
        for k in _COUNTS & row.keys():
            if isinstance(row[k], float):
                row[k] = int(row[k])
        out.append(row)
    return out


def _parse_map(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        pol, sep, ref = it.partition("=")
        if not sep or not pol.strip() or not ref.strip():
            _fail(f"--reference-map {it!r}: expected POLICY=REFERENCE, e.g. --reference-map reward_gap=static")
        out[pol.strip()] = ref.strip()
    return out


def tables(
    records: RecordsArg,
    table: Annotated[str, typer.Option("--table", help="table name or 'all'")] = "all",
    fmt: Annotated[str, typer.Option("--format", help="md | latex | csv")] = "md",
    suite: SuiteOpt = "db12",
    metric: Annotated[Optional[str], typer.Option("--aggregate", help="metric of the paired table")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="write <name>.<ext> per table into this folder")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=100, help="bootstrap resamples")] = 10_000,
) -> None:
    """Print the study's tables regenerated from RECORDS (Markdown, LaTeX or CSV)."""
    from analysis.tables import FORMATS, TABLE_NAMES

    if fmt not in FORMATS:
        _fail(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    names = list(TABLE_NAMES) if table == "all" else [t.strip() for t in table.split(",")]
    bad = [n for n in names if n not in TABLE_NAMES]
    if bad:
        _fail(f"--table {', '.join(bad)}: unknown; choose from all, {', '.join(TABLE_NAMES)}")
    s, df = _load(records, suite)
    if metric is not None and metric not in s.aggregate_names + list(s.domains) + s.benchmark_ids:
        _fail(f"--aggregate {metric!r}: not an aggregate, domain or benchmark of suite {s.name!r} "
              f"(aggregates: {', '.join(s.aggregate_names)})")
    import warnings

    from analysis.atomic import atomic_write_text
    from analysis.tables import build_tables, render_table, render_tables

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = build_tables(df, s, names, metric=metric, n_resamples=resamples)
    if out is not None:
        ext = {"md": "md", "latex": "tex", "csv": "csv"}[fmt]
        for t in built:
            atomic_write_text(out / f"{t.name}.{ext}", render_table(t, fmt))
        err.print(f"wrote {len(built)} tables to {out}", markup=False)
        return
    typer.echo(render_tables(built, fmt))


def compare(
    records: RecordsArg,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    aggregate: Annotated[Optional[str], typer.Option("--aggregate", help="one aggregate (default: all)")] = None,
    margin: Annotated[Optional[float], typer.Option("--margin", help="TOST equivalence margin (points)")] = None,
    effect: Annotated[float, typer.Option("--effect", help="effect (points) for the seeds-needed column")] = 1.0,
    detail: Annotated[bool, typer.Option("--detail", help="also per-domain and per-benchmark rows")] = False,
    reference_map: Annotated[Optional[list[str]], typer.Option(
        "--reference-map", help="POLICY=REFERENCE, overrides baseline/static (repeatable)")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=100, help="bootstrap resamples")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="bootstrap/permutation generator seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output (stable keys)")] = False,
    suite: SuiteOpt = "db12",
) -> None:
    """Seed-paired comparison of every policy with its campaign-local reference."""
    refs = _parse_map(reference_map)
    if margin is not None and margin <= 0:
        _fail(f"--margin {margin}: must be > 0 (points)")
    s, df = _load(records, suite, campaign, model)
    if aggregate is not None and aggregate not in s.aggregate_names:
        _fail(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    import warnings

    from analysis.paired import SMALL_N_NOTE, paired_comparisons
    from analysis.tables import paired_table, render_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, margin=margin, effect=effect,
                                 n_resamples=resamples, seed=seed)
    t = res.table
    aggs = [aggregate] if aggregate else s.aggregate_names
    keep = t["metric"].isin(aggs) | (detail & t["metric_type"].isin(["domain", "benchmark"]))
    t = t[keep]
    if as_json:
        typer.echo(json.dumps({
            "suite": s.name, "aggregates": aggs, "margin": margin, "effect": effect, "n_resamples": resamples,
            "seed": seed, "sd": "sample (n-1)", "family": "campaign/model/regime/step x metric",
            "small_n": SMALL_N_NOTE,
            "comparisons": _rows(t), "dropped": res.dropped}, indent=1))
        return
    for m in aggs + (list(s.domains) if detail else []):
        typer.echo(render_table(paired_table(t, m), "md"))
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


def sensitivity(
    records: RecordsArg,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    aggregate: Annotated[Optional[str], typer.Option("--aggregate", help="aggregate for seed-resampling ranks")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=100, help="seed bootstrap resamples")] = 2000,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output (stable keys)")] = False,
    suite: SuiteOpt = "db12",
) -> None:
    """Ranking sensitivity: aggregate-vs-aggregate rank correlations, leave-one-benchmark-out, seed bootstrap."""
    s, df = _load(records, suite, campaign, model)
    if aggregate is not None and aggregate not in s.aggregate_names:
        _fail(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    import pandas as pd

    from analysis.aggregates import run_table
    from analysis.sensitivity import sensitivity_report
    from analysis.tables import _md

    rep = sensitivity_report(run_table(df, s), s, stability_aggregate=aggregate, n_resamples=resamples)
    if as_json:
        typer.echo(json.dumps(rep, indent=1, default=_clean))
        return
    scopes = [rep["pooled"]] + rep["groups"]
    for sc in scopes:
        name = ("all configurations (pooled)" if sc["scope"] == "all" else
                "/".join(str(sc[k]) for k in ("campaign", "model", "regime", "step") if sc.get(k) not in ("", None)))
        typer.echo(f"## {name} ({sc['n_configs']} configurations)\n")
        typer.echo(_md(pd.DataFrame(sc["aggregate_correlations"]).round(3)) + "\n")
        lobo = pd.DataFrame(sc["leave_one_out"])
        if not lobo.empty:
            worst = lobo.sort_values("spearman").groupby("aggregate", sort=False).head(1)
            typer.echo("leave-one-benchmark-out, lowest Spearman per aggregate:\n")
            typer.echo(_md(worst.round(3)) + "\n")
        st = sc["seed_stability"]
        typer.echo(f"seed bootstrap ({st['aggregate']}, {st['n_resamples']} resamples), "
                   f"mean Kendall tau with the full ranking: {st['mean_kendall_tau']}\n")
        cfg = pd.DataFrame(st["configs"])
        if not cfg.empty:
            show = [c for c in ("campaign", "model", "regime", "policy", "n_seeds", "mean", "rank", "mean_rank",
                                "rank_lo", "rank_hi", "p_top1") if c in cfg]
            typer.echo(_md(cfg[show].round(3)) + "\n")


def report(
    records: RecordsArg,
    out: Annotated[Path, typer.Option("--out", help="HTML file to write (atomic)")],
    suite: SuiteOpt = "db12",
    resamples: Annotated[int, typer.Option("--resamples", min=100, help="bootstrap resamples")] = 10_000,
    runs_dir: Annotated[Optional[Path], typer.Option(
        "--runs-dir", help="the runs' folder (<workdir>/runs): adds each run's intervention evidence and compute; "
                           "flagged policies are listed before any score comparison")] = None,
    looks: Annotated[Optional[Path], typer.Option(
        "--looks", help="interim looks of a sequential campaign (default: sequential_looks.csv next to the "
                        "records, when present): their adjusted intervals are shown first")] = None,
) -> None:
    """Write one self-contained HTML report (tables, forest plot, domain trade-off, rank heat map)."""
    s, df = _load(records, suite)
    import warnings

    from analysis.report import build_report
    from analysis.sequential import SequentialError, looks_section_html, read_looks_file

    looks_path = looks or (Path(records).parent / "sequential_looks.csv")
    lead = []
    if looks is not None or looks_path.is_file():
        try:
            lead = [looks_section_html(read_looks_file(looks_path))]
        except SequentialError as exc:
            _fail(str(exc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if runs_dir is None:
            path = build_report(df, out, suite=s, n_resamples=resamples, lead_sections=lead)
        else:
            from analysis.intervention import InterventionError, build_report_with_evidence, runs_from_dir

            try:
                path, flags = build_report_with_evidence(df, out, suite=s, runs=runs_from_dir(df, runs_dir),
                                                         n_resamples=resamples, lead_sections=lead)
            except InterventionError as exc:
                _fail(str(exc))
            for r in flags[flags["flag"] != ""].itertuples():
                err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.flag}: {r.reason}", markup=False)
    err.print(f"wrote {path}", markup=False)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    app.command("tables")(tables)
    app.command("compare")(compare)
    app.command("sensitivity")(sensitivity)
    app.command("report")(report)
