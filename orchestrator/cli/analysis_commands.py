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


_COUNTS = {"n", "seeds_needed", "seeds_needed_lo", "seeds_needed_hi", "step", "seed", "seeds_to_decide",
           "seeds_to_decide_lo", "seeds_to_decide_hi"}


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


def _require_pairs(res, records: Path) -> None:  # noqa: ANN001
    """Exit 2 with the reasons (which reference is missing at which step, which scores are NaN) when no
    method-vs-reference pair could be formed: nothing to compare is a user error, not a traceback."""
    t = res.table
    ok = t["kind"].eq("effect") & t["mean_diff"].astype(float).notna() if len(t) else None
    if ok is not None and bool(ok.any()):
        return
    why = "; ".join(res.dropped[:8]) + (f"; ... {len(res.dropped) - 8} more" if len(res.dropped) > 8 else "")
    _fail(f"{records}: no method-vs-reference pair could be formed (a policy and its reference, select/reweight -> "
          f"baseline, mix -> static, at the same campaign/model/regime/step and seed with finite scores)"
          + (f": {why}" if why else ": the records hold no policy whose reference is present")
          + "; add the reference's runs or pass --reference-map POLICY=REFERENCE")


def _check_out(out: Path, inputs: list[Path | None], force: bool, what: str = "--out") -> None:
    """--out never equals an input and never replaces an existing file unless --force."""
    target = out.resolve()
    for p in inputs:
        if p is not None and Path(p).exists() and Path(p).resolve() == target:
            _fail(f"{what} {out}: is an input of this command ({p}); write the output to another path")
    if out.is_dir():
        _fail(f"{what} {out}: is a directory; give a file path such as {out / 'report.html'}")
    if out.exists() and not force:
        _fail(f"{what} {out}: exists; pass --force to replace it, or choose another path")
    if not out.parent.is_dir() and out.parent.exists():
        _fail(f"{what} {out}: {out.parent} is not a folder; choose another path")


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
    resamples: Annotated[int, typer.Option("--resamples", min=100, max=1_000_000, help="bootstrap resamples")] = 10_000,
    margin: Annotated[float, typer.Option("--margin", help="equivalence margin of the verdict table (points)")] = 1.0,
    force: Annotated[bool, typer.Option("--force", help="replace existing table files in --out")] = False,
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
    if not margin > 0:
        _fail(f"--margin {margin}: must be > 0 (points)")
    ext = {"md": "md", "latex": "tex", "csv": "csv"}[fmt]
    if out is not None:
        if out.exists() and not out.is_dir():
            _fail(f"--out {out}: is a file; --out takes a folder (one <table>.{ext} per table)")
        for n in names:
            _check_out(out / f"{n}.{ext}", [records], force)
    import warnings

    from analysis.atomic import atomic_write_text
    from analysis.paired import paired_comparisons
    from analysis.tables import build_tables, render_table, render_tables

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paired = paired_comparisons(df, s, n_resamples=resamples)
        if set(names) & {"paired", "verdicts", "random_effects"}:
            _require_pairs(paired, records)
        built = build_tables(df, s, names, metric=metric, n_resamples=resamples, paired=paired, margin=margin)
    if out is not None:
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
    resamples: Annotated[int, typer.Option("--resamples", min=100, max=1_000_000, help="bootstrap resamples")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="bootstrap/permutation generator seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output (stable keys)")] = False,
    suite: SuiteOpt = "db12",
    items: Annotated[Optional[Path], typer.Option(
        "--items", help="folder with the runs' *.items.jsonl.gz item logs (beside their records): adds the "
                        "seed + item two-way clustered CI")] = None,
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

    item_df = None
    if items is not None:
        from analysis.items import read_items_dir
        from analysis.schema import RecordsError

        try:
            item_df = read_items_dir(items)
        except RecordsError as e:
            _fail(str(e))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, margin=margin, effect=effect,
                                 n_resamples=resamples, seed=seed, items=item_df)
    _require_pairs(res, records)
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
    if item_df is not None:
        import pandas as pd

        from analysis.aggregates import run_table
        from analysis.items import BREAKDOWN, comparison_breakdown
        from analysis.tables import _md

        bd = comparison_breakdown(item_df, run_table(df, s), res.table)
        if not bd.empty:
            typer.echo("## Outcome breakdown from the item logs (Δ share of all items, points, method − reference)\n")
            show = pd.DataFrame({"comparison": bd["policy"] + " vs " + bd["reference"],
                                 **{f"Δ {c.replace('_', ' ')}": bd[f"{c}_delta"].round(2) for c in BREAKDOWN}})
            typer.echo(_md(show.astype(str)) + "\n\n_wrong = parsed answer graded wrong; parse failure = no answer "
                       "extracted; truncated = hit the generation limit (any status)_\n")
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


def sensitivity(
    records: RecordsArg,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    aggregate: Annotated[Optional[str], typer.Option("--aggregate", help="aggregate for seed-resampling ranks")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=100, max=1_000_000, help="seed bootstrap resamples")] = 2000,
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
    margin: Annotated[float, typer.Option("--margin", help="equivalence margin of the verdict table (points)")] = 1.0,
    force: Annotated[bool, typer.Option("--force", help="replace an existing --out file")] = False,
    items: Annotated[Optional[Path], typer.Option(
        "--items", help="folder with the runs' *.items.jsonl.gz item logs: the paired table gets the seed + item CI")] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=100, max=1_000_000, help="bootstrap resamples")] = 10_000,
    runs_dir: Annotated[Optional[Path], typer.Option(
        "--runs-dir", help="the runs' folder (<workdir>/runs): adds each run's intervention evidence and compute; "
                           "flagged policies are listed before any score comparison")] = None,
    looks: Annotated[Optional[Path], typer.Option(
        "--looks", help="interim looks of a sequential campaign (default: sequential_looks.csv next to the "
                        "records, when present): their adjusted intervals are shown first")] = None,
    figures: Annotated[Optional[Path], typer.Option(
        "--figures", help="also write every figure into this folder as <name>.svg, .pdf and .png (200 dpi)")] = None,
) -> None:
    """Write one self-contained HTML report (verdicts, within-group sensitivity, figures, tables)."""
    if not margin > 0:
        _fail(f"--margin {margin}: must be > 0 (points)")
    _check_out(out, [records, looks], force)
    if figures is not None:
        if figures.exists() and not figures.is_dir():
            _fail(f"--figures {figures}: is a file; --figures takes a folder (one <figure>.svg/.pdf/.png each)")
        if figures.is_dir() and any(figures.glob("*.svg")) and not force:
            _fail(f"--figures {figures}: already holds figures; pass --force to replace them, or choose another folder")
    s, df = _load(records, suite)
    import warnings

    from analysis.paired import paired_comparisons as _pc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _require_pairs(_pc(df, s, n_resamples=100), records)
    item_df = None
    if items is not None:
        from analysis.items import read_items_dir
        from analysis.schema import RecordsError

        try:
            item_df = read_items_dir(items)
        except RecordsError as e:
            _fail(str(e))
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
            path = build_report(df, out, suite=s, n_resamples=resamples, lead_sections=lead, margin=margin,
                                items=item_df, figures_dir=figures)
        else:
            from analysis.intervention import InterventionError, build_report_with_evidence, runs_from_dir

            try:
                path, flags = build_report_with_evidence(df, out, suite=s, runs=runs_from_dir(df, runs_dir),
                                                         n_resamples=resamples, lead_sections=lead,
                                                         margin=margin, items=item_df, figures_dir=figures)
            except InterventionError as exc:
                _fail(str(exc))
            for r in flags[flags["flag"] != ""].itertuples():
                err.print(f"flagged {r.policy} ({r.campaign}/{r.model}): {r.flag}: {r.reason}", markup=False)
    err.print(f"wrote {path}" + (f" and its figures (svg, pdf, png) in {figures}" if figures is not None else ""),
              markup=False)


def verdicts(
    records: RecordsArg,
    margin: Annotated[float, typer.Option("--margin", help="equivalence margin ±M (points); also the effect "
                                          "the seeds-to-decide column is powered for")] = 1.0,
    aggregate: Annotated[Optional[str], typer.Option("--aggregate", help="default: the suite's first aggregate")] = None,
    campaign: CampaignOpt = None,
    model: ModelOpt = None,
    alpha: Annotated[float, typer.Option("--alpha", help="family-wise error rate of each family (Holm)")] = 0.05,
    reference_map: Annotated[Optional[list[str]], typer.Option(
        "--reference-map", help="POLICY=REFERENCE, overrides baseline/static (repeatable)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output (stable keys)")] = False,
    suite: SuiteOpt = "db12",
) -> None:
    """One verdict per method-vs-reference comparison: better / worse / equivalent within ±M / undecided."""
    refs = _parse_map(reference_map)
    if not margin > 0:
        _fail(f"--margin {margin}: must be > 0 (points)")
    if not 0 < alpha < 1:
        _fail(f"--alpha {alpha}: must be in (0, 1)")
    s, df = _load(records, suite, campaign, model)
    if aggregate is not None and aggregate not in s.aggregate_names:
        _fail(f"--aggregate {aggregate!r}: suite {s.name!r} declares {', '.join(s.aggregate_names)}")
    import warnings

    from analysis.paired import SMALL_N_NOTE, paired_comparisons
    from analysis.tables import render_table, verdicts_table
    from analysis.verdicts import verdict_counts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(df, s, reference_map=refs, aggregates=[aggregate] if aggregate else None, n_resamples=200)
    _require_pairs(res, records)
    t = verdicts_table(res.table, aggregate or s.aggregate_names[0], margin, alpha)
    if as_json:
        typer.echo(json.dumps({"suite": s.name, "aggregate": aggregate or s.aggregate_names[0], "margin": margin,
                               "alpha": alpha, "method": t.note, "small_n": SMALL_N_NOTE,
                               "counts": verdict_counts(t.data), "verdicts": _rows(t.data),
                               "dropped": res.dropped}, indent=1))
        return
    typer.echo(render_table(t, "md"))
    for msg in res.dropped:
        err.print(f"warning: {msg}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    app.command("tables")(tables)
    app.command("compare")(compare)
    app.command("sensitivity")(sensitivity)
    app.command("report")(report)
    app.command("verdicts")(verdicts)
