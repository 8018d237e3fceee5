"""`campaign demo`: the whole data flow on CPU — local Ray, ledger, training, evaluation, records,
MLflow, analysis — on `campaigns/demo.yaml`, and the paired-comparison tables at the end.

Where the demo must stop it raises `CampaignError` (message and exit code), as the campaign loop does."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from analysis.schema import DEFAULT_AA_PAIR
from evaluation import item_log
from orchestrator.campaign import CampaignError, drive
from orchestrator.demo_timings import DemoTimings
from orchestrator.engine.paths import campaign_runs, runs_root
from orchestrator.progress import status_matrix
from wtcommon.atomic import unwritable
from orchestrator.tracking import default_uri

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec
    from orchestrator.session import Session
    from orchestrator.engine.spec import CampaignSpec


SCREEN_ROWS = 15  # decided comparisons listed on the terminal; the rest are counted (all: --all or the report)


def print_analysis(records: Path, *, out: Console, suite: str = "db12", n_resamples: int = 2000,
                   items_dir: Path | None = None, show_all: bool = False,
                   aa_pair: tuple[str, str] = DEFAULT_AA_PAIR) -> None:
    """The answer of a records file in one terminal screen: the verdict counts of the suite's first aggregate,
    the decided comparisons (up to SCREEN_ROWS) and the small-n note once; `show_all` prints every table
    (per configuration and paired, every aggregate) instead. With the runs' item logs (`items_dir`), the
    comparisons use the seed + item CI too; `aa_pair` is the campaign's A/A pair. A records file that cannot be
    read is a CampaignError (exit 2)."""
    from analysis.comparisons import SMALL_N_NOTE, paired_comparisons
    from analysis.records import read_records
    from analysis.schema import RecordsError
    from analysis.table_formats import _wrap, fit_table
    from analysis.tables import TABLE_NAMES, build_tables, paired_table
    from evaluation.suite import load_suite
    from wtcommon.terminal import terminal_width

    s = load_suite(suite)
    try:
        df = read_records(records, suite=s)
    except RecordsError as exc:
        raise CampaignError(str(exc)) from None
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise CampaignError(f"{records}: cannot read records ({exc}); pass a records CSV/Parquet") from None
    items = None
    if items_dir is not None and any(Path(items_dir).rglob(item_log.GLOB)):
        from analysis.items import read_items_dir

        try:
            items = read_items_dir(items_dir)
        except RecordsError as exc:
            out.print(f"_item logs not used: {exc}_", markup=False, highlight=False, soft_wrap=True)
    say = lambda text: out.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    width = terminal_width(out.file)  # the terminal's; 120 when not a terminal
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paired = paired_comparisons(df, s, n_resamples=n_resamples, items=items, aa_pair=aa_pair)
        names = [n for n in TABLE_NAMES if n != "paired"] if show_all else ["verdicts"]
        tables, broken = [], []
        for name in names:  # one at a time: a table that cannot be built is reported, not fatal
            try:
                tables += [t for t in build_tables(df, s, [name], paired=paired, n_resamples=n_resamples)
                           if not t.display.empty or name == "verdicts"]
            except Exception as exc:
                broken.append(f"{name}: {type(exc).__name__}: {exc}")
    out.print(f"[bold]{records}[/]: {df['run_id'].nunique()} runs, {len(df)} records", highlight=False,
              soft_wrap=True)
    if show_all:
        for t in tables:
            say(fit_table(t, width)[0])
        for metric in s.aggregate_names:
            say(fit_table(paired_table(paired.table, metric), width)[0])
    else:
        _print_verdicts(tables, say, SMALL_N_NOTE, records, width)
    for b in broken:
        say(f"_table not built: {b}_")
    if paired.dropped:
        say(_wrap(f"_dropped: {len(paired.dropped)} (e.g. {paired.dropped[0]})_", width))
    for msg in list(dict.fromkeys(str(w.message) for w in caught))[:2]:  # each warning once
        say(_wrap(f"_warning: {msg}_", width))


def _print_verdicts(tables: list, say, small_n: str, records: Path, width: int) -> None:
    """The verdict counts, the decided comparisons (better/worse/equivalent; SCREEN_ROWS at most) and the
    small-n note, fitted to the terminal."""
    from analysis.table_formats import _md, _wrap, fit_columns

    v = next((t for t in tables if t.name == "verdicts"), None)
    if v is None:
        return
    if v.data.empty:
        say("no method-vs-reference comparison: the records hold no policy whose reference is present")
        return
    say(_wrap(f"verdicts: {v.lead}", width))
    # decided comparisons first, then the undecided with the largest |Δ|, SCREEN_ROWS rows in all
    order = v.data.assign(_u=v.data["verdict"].eq("undecided"), _a=-v.data["mean_diff"].abs().fillna(0))
    idx = order.sort_values(["_u", "_a"], kind="stable").index[:SCREEN_ROWS]
    disp = v.display.loc[idx]
    key = [c for c in ("policy", "vs", "Δ mean [t 95% CI]", "verdict", "model", "campaign", "n", "regime", "step")
           if c in disp.columns]
    shown, hidden = fit_columns(disp, key, width)
    say(_md(shown))
    hidden = [c for c in hidden if c in key]
    n_decided = int(v.data["verdict"].ne("undecided").sum())
    rest = len(v.data) - len(idx)
    say(("decided comparisons first, then the largest |Δ| of the undecided" if n_decided
         else "none decided at this n; largest |Δ| first")
        + (f"; {rest} more comparisons not listed" if rest > 0 else "")
        + (f"; columns left out: {', '.join(hidden)}" if hidden else ""))
    say(_wrap(small_n, width))
    say(_wrap(f"every comparison and table: campaign verdicts {records}; campaign tables {records} --all "
              f"(or this command with --all)", width))


def write_report(records: Path, workdir: Path, *, out: Console, err: Console, suite: str = "db12",
                 n_resamples: int = 2000, aa_pair: tuple[str, str] = DEFAULT_AA_PAIR) -> Path | None:
    """`<workdir>/report.html`: the analysis report with the intervention evidence of every run
    (flagged policies listed before any score comparison) and training curves; its figures also as
    SVG/PDF/PNG in `<workdir>/figures/`. A report that cannot be built is
    reported, not fatal: the records and tables above stand on their own."""
    from analysis.intervention import InterventionError, runs_from_dir
    from analysis.records import read_records
    from analysis.report import build_report_with_evidence

    try:
        df = read_records(records, suite=suite)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path, flags = build_report_with_evidence(df, workdir / "report.html", suite=suite,
                                                     runs=runs_from_dir(df, runs_root(workdir)),
                                                     n_resamples=n_resamples,
                                                     figures_dir=workdir / "figures", aa_pair=aa_pair)
    except (InterventionError, ValueError, KeyError) as exc:
        err.print(f"report not written: {exc}", markup=False, highlight=False)
        return None
    for r in flags[flags["flag"] != ""].itertuples():
        out.print(f"[bold yellow]flagged[/] {r.policy}: {r.flag} ({r.reason})", highlight=False, soft_wrap=True)
    out.print(f"report: {path}", highlight=False, soft_wrap=True)
    return path


def prepare_data(workdir: Path, spec: Any) -> Path:
    """Evaluation fixtures for the demo (benchmark-data schema) from the training area's generator."""
    from evaluation.benchmark_data import write_manifest
    from training.synthetic import write_eval_fixtures

    data_dir = workdir / "data" / "eval"
    if not (data_dir / "manifest.json").exists():
        opts = spec.evaluation_options
        paths = write_eval_fixtures(data_dir, seed=opts.fixture_seed, n_items=opts.fixture_items, suite=spec.suite)
        # declares the set as small fixtures, so item counts below the suite's are not a gate failure
        write_manifest(data_dir, sorted(paths), kind="fixture")
    return data_dir


class BaseModelBuild(threading.Thread):
    """Builds and warms up the campaign's tiny base models in the demo process, in the background, while the Ray
    head starts and the first stage jobs start up (their processes import torch, then wait on the model's lock,
    and find it cached): the single-threaded warm-up no longer holds one core while the other waits."""

    def __init__(self, runs: list[Any]) -> None:
        super().__init__(name="base-model-build", daemon=True)
        seen: dict[str, Any] = {}
        for r in runs:  # the local and verl backends build a builtin model with the recipe's warm-up
            if r.backend in ("local", "verl") and str(r.model_cfg.path).startswith("builtin:"):
                seen.setdefault(f"{r.model}/{r.recipe_name}", r)
        self.todo = list(seen.values())
        self.parts: list[tuple[str, float, str]] = []  # (name, wall s, note)
        self.error: BaseException | None = None

    def run(self) -> None:
        from transformers.utils import logging as hf_logging

        from training import warmup

        hf_logging.disable_progress_bar()  # "Writing model shards" bars per save: the demo's lines say the state
        try:
            for r in self.todo:
                cached = (warmup.base_model_dir(r.model_cfg, r.recipe_cfg) / "completed.json").exists()
                t = time.time()
                path = warmup.base_model(r.model_cfg, r.recipe_cfg)
                if cached:
                    self.parts.append((f"base model {r.model}: cached", time.time() - t, str(path)))
                    continue
                bt = warmup.build_timings(path)
                steps = int(dict(r.recipe_cfg.warmup).get("steps", 0))
                self.parts.append((f"base model {r.model}: build", bt.get("build_s", 0.0), "tokenizer + random init"))
                self.parts.append((f"base model {r.model}: warm-up", bt.get("warmup_s", 0.0),
                                   f"{steps} supervised steps, one thread; overlaps the head start"))
        except BaseException as exc:  # the train stage builds it again and reports the error in its run
            self.error = exc


def run_demo(workdir: Path, campaign_file: Path, overrides: list[str], *, out: Console, err: Console,
             keep_ray: bool = False, show_all: bool = False, timings: bool = False) -> Path:
    """Plan, check, submit and drive the demo campaign in `workdir`, then print its analysis and write its
    report: the records file. Stops the work directory's local Ray head at the end unless `keep_ray`;
    `timings` prints where the demo's time went (`DemoTimings`)."""
    from orchestrator.cluster.local_head import stop_head
    from orchestrator.engine.ledger.states import RunState
    from orchestrator.session import Session
    from orchestrator.leftovers import Snapshot, mark_session

    tm = DemoTimings()
    before, marker = Snapshot(), mark_session("WT_DEMO_SESSION")
    workdir = Path(workdir).resolve()
    spec, runs = _plan_demo(campaign_file, overrides, workdir, out=out, tm=tm)
    sess = Session(workdir=workdir)
    try:
        counts = _drive_demo(sess, spec, runs, workdir, out=out, err=err, tm=tm)
        if show_all:
            out.print(status_matrix(sess, spec.name))
        records = _collect_demo(sess, spec, workdir, counts, out=out, err=err, tm=tm)
        _analyse_demo(sess, spec, records, workdir, out=out, err=err, tm=tm, show_all=show_all)
        if timings:
            out.print("[bold]where the demo's time went[/] (wall seconds)", highlight=False)
            for line in tm.lines():
                out.print(line, markup=False, highlight=False, soft_wrap=True)
        out.print(f"[bold]demo finished in {time.time() - tm.t0:.0f} s[/]")
        if counts.get(RunState.failed):
            raise CampaignError(f"{counts[RunState.failed]} run(s) failed", 1)
        return records
    finally:
        sess.close()
        if not keep_ray:
            stop_head(workdir)
            _say_leftovers(before.leftovers(marker), out=out, err=err)


def _say_leftovers(found: list[str], *, out: Console, err: Console) -> None:
    """What the demo left on the machine once its head stopped: nothing, or each /dev/shm entry and process."""
    if not found:
        out.print("left behind: nothing (no new /dev/shm entry, no process of the demo's)", highlight=False)
        return
    err.print(f"[yellow]warning:[/] the demo left {len(found)} thing(s) behind:", highlight=False)
    for line in found:
        err.print(f"  {line}", markup=False, highlight=False)


def _plan_demo(campaign_file: Path, overrides: list[str], workdir: Path, *, out: Console,
               tm: DemoTimings) -> tuple[CampaignSpec, list[RunSpec]]:
    """Plan the campaign, write its evaluation fixtures and run `campaign submit`'s preflight: before any compute."""
    from orchestrator.session import plan
    from orchestrator.engine.spec import SpecError

    with tm.part("plan, preflight, evaluation fixtures"):
        try:
            spec, runs = plan(campaign_file, overrides, data_root=workdir / "data")
        except SpecError as exc:
            raise CampaignError(str(exc)) from None
        out.print(f"[bold]demo[/]: {len(runs)} runs ({', '.join(dict.fromkeys(r.policy.name for r in runs))} × "
                  f"seeds {sorted({r.seed for r in runs})}) in {workdir}", highlight=False)
        if not workdir.is_dir() and (why := unwritable(workdir)) is not None:
            raise CampaignError(f"--workdir {workdir}: cannot create the work directory there: {why}")
        workdir.mkdir(parents=True, exist_ok=True)
        data_dir = prepare_data(workdir, spec)
        from orchestrator.preflight import Context, preflight

        try:  # the same checks as `campaign submit`, before any compute
            preflight(spec, runs, Context(data_dir=data_dir))
        except SpecError as exc:
            raise CampaignError(str(exc)) from None
    return spec, runs


def _drive_demo(sess: Session, spec: CampaignSpec, runs: list[RunSpec], workdir: Path, *, out: Console,
                err: Console, tm: DemoTimings) -> dict[str, int]:
    """Submit the runs and drive them to the end on the local head, the base models built alongside; the
    run counts by state."""
    diff = sess.submit(spec, runs)
    events = workdir / "logs" / f"{spec.name}.events.log"
    events.parent.mkdir(parents=True, exist_ok=True)
    out.print(f"ledger: {len(diff.new)} new, {len(diff.unchanged)} unchanged; starting local Ray… (each run's "
              f"stages: {events})", highlight=False, soft_wrap=True)
    build = BaseModelBuild(runs)
    build.start()
    with tm.part("Ray head start", "while the base model builds"):
        sess.executor  # noqa: B018 - the work directory's local head (or the recorded cluster), started now
    with tm.part("campaign: submit → every run recorded"):
        counts = drive(sess, spec.name, console=err, events=events)
    build.join()
    for name, wall, note in build.parts:
        tm.add(name, wall, note)
    if build.error is not None:
        err.print(f"warning: the base model was not built ahead ({type(build.error).__name__}: {build.error}); "
                  "the train stages built it", markup=False, highlight=False)
    tm.add_stages(sess.ledger.attempts(spec.name))
    return counts


def _collect_demo(sess: Session, spec: CampaignSpec, workdir: Path, counts: dict[str, int], *, out: Console,
                  err: Console, tm: DemoTimings) -> Path:
    """The campaign's records file, each failed run said on `err`; a CampaignError when no run was recorded."""
    from orchestrator.engine.ledger.states import RunState
    from orchestrator.session import RecordsMissing

    with tm.part("records: collected from the runs"):
        try:
            records = sess.collect_records(spec.name)
        except RecordsMissing as exc:
            raise CampaignError(str(exc)) from None
    if counts.get(RunState.failed):
        for r in sess.ledger.runs(spec.name, [RunState.failed]):
            err.print(f"failed {r.run_id} ({r.stage}): {r.reason}", highlight=False)
    if records is None:
        raise CampaignError("no run was recorded; see `campaign status demo --workdir " + str(workdir) + "`", 1)
    out.print(f"records: {records}\nMLflow: mlflow ui --backend-store-uri {default_uri(workdir)}",
              highlight=False, soft_wrap=True)  # one line: the command is copied as printed
    return records


def _analyse_demo(sess: Session, spec: CampaignSpec, records: Path, workdir: Path, *, out: Console, err: Console,
                  tm: DemoTimings, show_all: bool) -> None:
    """Print the records' analysis, write the report and attach it to the campaign's MLflow parent run."""
    with tm.part("analysis: paired comparisons and tables"):
        print_analysis(records, out=out, suite=spec.suite, items_dir=campaign_runs(workdir, spec.name),
                       show_all=show_all, aa_pair=spec.aa_pair)
    with tm.part("report: HTML, figures, MLflow attachment"):
        report = write_report(records, workdir, out=out, err=err, suite=spec.suite, aa_pair=spec.aa_pair)
        if report is not None:
            try:  # the campaign's MLflow parent run carries the report next to its verdicts
                sess.tracker(spec.name).attach_report(report)
            except Exception as exc:  # tracking is a view: the report on disk stands on its own
                err.print(f"warning: report not attached to MLflow: {type(exc).__name__}: {exc}", markup=False)
