"""MLflow tracking: the one module that writes MLflow (training CLI, local backend, orchestrator).

Why one module: one tag key (`RUN_KEY_TAG`), one param-value limit (`PARAM_LIMIT`), one URI
default (`default_uri`), so a run written by `campaign train` and one written by a campaign are
found the same way. One experiment per campaign, one MLflow run per grid cell, found again by its
`run_key` tag *before* any create, so neither a resumed campaign nor a crash between `create_run`
and the ledger update makes a duplicate.

Campaigns: with the embedded SQLite store only one process may write ("database is locked"), so
stage jobs never write MLflow; the orchestrator holding the campaign's driver lease does, through
`CampaignTracker.sync()` after every scheduler poll: a cell's run is created when its first attempt
starts (start time = that attempt's start), training metrics are streamed from the job's metrics
files as lines appear (`metrics.jsonl`, or verl's per-launch files, whose metrics nest under `data`: each is
logged as `train/<name as the backend wrote it>`, e.g. `train/actor/grad_norm`; the byte offsets ingested so far
are a tag on the run, so a restarted orchestrator continues where the last one stopped), and a terminal ledger state
ends the run with
its status (recorded → FINISHED with per-benchmark scores and the suite's aggregates such as DB-12
per checkpoint step, failed → FAILED, cancelled/superseded → KILLED) at the time the ledger recorded it.

A campaign also has one parent run (`<campaign> · campaign`, tagged `windtunnel.campaign_run`): every cell's run is
nested under it (`mlflow.parentRunId`), and when nothing is pending it ends with the campaign's verdicts (counts as
metrics, decided claims as tags, the table as `verdicts.csv`), its records and, when one is written, the report.

All helpers take an explicit tracking URI and use `MlflowClient`, never the fluent global state.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Mapping

from orchestrator.ledger.base import LeaseLost
from orchestrator.ledger.states import RunState
from wtcommon.metrics import read_metrics_jsonl, training_metrics_files

if TYPE_CHECKING:
    from orchestrator.grid import RunSpec
    from orchestrator.ledger import Ledger
    from orchestrator.ledger.base import RunRow
    from training.backend import TrainRequest, TrainResult

RUN_KEY_TAG = "windtunnel.run_key"
OFFSET_TAG = "windtunnel.metrics_offsets"  # {metrics file name: bytes already logged}, JSON
PARAM_LIMIT = 6000  # MLflow's limit on a param value's length
MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per call


def default_uri(workdir: str | Path) -> str:
    """`sqlite:///<workdir>/mlflow.db` (absolute), the embedded default store."""
    from orchestrator.workdir import Workdir

    return Workdir(Path(workdir)).mlflow_uri


_READY: set[str] = set()  # sqlite stores known to be complete in this process


def _ensure_sqlite_store(uri: str) -> None:
    """Create a missing SQLite store whole, or not at all.

    MLflow builds a fresh store in place: `create_all`, then some 60 alembic migrations over several
    seconds. An orchestrator SIGKILLed in between leaves a file whose tables exist but whose schema is
    mid-migration, and every later open fails with "out-of-date database schema": the campaign's
    tracking is dead for good. So the store is built in a private temporary file and linked into place
    (`os.link` never replaces a store another process finished first)."""
    if uri in _READY or not uri.startswith("sqlite:///"):
        return
    path = Path(uri[len("sqlite:///"):])
    if not path.exists() and path.parent.is_dir():
        import uuid

        import sqlalchemy
        from mlflow.store.db import utils as db_utils  # what SqlAlchemyStore runs on an empty database

        from wtcommon.quiet import quiet_libraries

        quiet_libraries()

        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.init")
        engine = sqlalchemy.create_engine(f"sqlite:///{tmp}")
        try:
            db_utils._initialize_tables(engine)
            db_utils._verify_schema(engine)
            engine.dispose()
            os.chmod(tmp, 0o600)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process finished its store first: use that one
        finally:
            engine.dispose()
            tmp.unlink(missing_ok=True)
    _READY.add(uri)


def client(uri: str):
    from mlflow.tracking import MlflowClient

    from wtcommon.quiet import quiet_libraries

    quiet_libraries()
    _ensure_sqlite_store(uri)
    return MlflowClient(tracking_uri=uri)


def _ms(t: float | None = None) -> int:
    return int((time.time() if t is None else t) * 1000)


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"  # read by the MLflow UI to pick the experiment's first view


def experiment_id(uri: str, name: str, artifact_location: str | None = None) -> str:
    """Id of experiment `name`, created if missing."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        # MLflow 3 opens an experiment of unknown kind on its GenAI "Traces" page; ours are training runs
        return c.create_experiment(name, artifact_location=artifact_location,
                                   tags={EXPERIMENT_KIND_TAG: "custom_model_development"})
    except Exception:
        exp = c.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def find_run(uri: str, experiment: str, run_key: str) -> str | None:
    """The MLflow run id tagged with `run_key` in `experiment`, or None."""
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return None
    runs = c.search_runs([exp.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{run_key}'", max_results=1)
    return runs[0].info.run_id if runs else None


def ensure_run(
    uri: str,
    experiment: str,
    run_key: str,
    run_name: str,
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
    *,
    start_time: float | None = None,
    artifact_location: str | None = None,
) -> str:
    """Idempotent: the existing run for `run_key` (looked up by tag first), else a new one with
    flattened params and tags, started at `start_time` (epoch seconds; default now)."""
    rid = find_run(uri, experiment, run_key)
    if rid is not None:
        return rid
    c = client(uri)
    all_tags = {RUN_KEY_TAG: run_key, **(tags or {})}
    run = c.create_run(experiment_id(uri, experiment, artifact_location), run_name=run_name, tags=all_tags,
                       start_time=_ms(start_time))
    rid = run.info.run_id
    if params:
        log_params(uri, rid, params)
    return rid


_KEY_BAD = re.compile(r"[^/\w.\- :]")  # MLflow's own rule for param and metric names


def mlflow_key(key: str) -> str:
    """A param/metric name MLflow accepts: `@` -> `_at_` (as verl does), `+` -> `_plus_` (Hydra's
    append prefix, e.g. `+actor_rollout_ref.model...` in a verl recipe's overrides), anything else
    outside letters, digits, `_ - . / : ` and space -> `_`; at most 250 characters."""
    return _KEY_BAD.sub("_", key.replace("@", "_at_").replace("+", "_plus_"))[:250]


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> {"a.b.c": "value"} (MLflow params are flat strings of at most PARAM_LIMIT chars)."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = (v if isinstance(v, str) else json.dumps(v, default=str))[:PARAM_LIMIT]
    return out


def log_params(uri: str, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(mlflow_key(k), v) for k, v in flatten(params).items()]
    c = client(uri)
    for i in range(0, len(items), 100):
        c.log_batch(run_id, params=items[i : i + 100])


def metric_rows(rows: Iterable[Mapping[str, Any]], step_key: str = "step", prefix: str = "") -> list[Any]:
    """MLflow Metrics for each numeric, finite field of each row at `row[step_key]`.

    NaN stays unlogged (missing is not a value); keys pass through `mlflow_key`."""
    from mlflow.entities import Metric

    ts = _ms()
    metrics = []
    for row in rows:
        step = int(row.get(step_key, 0))
        for k, v in row.items():
            if k == step_key or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if math.isfinite(float(v)):
                metrics.append(Metric(mlflow_key(f"{prefix}{k}"), float(v), ts, step))
    return metrics


def _log_batches(uri: str, run_id: str, metrics: list[Any], tags: list[Any] | None = None) -> None:
    c = client(uri)
    for i in range(0, max(len(metrics), 1), MAX_BATCH):
        last = i + MAX_BATCH >= len(metrics)
        c.log_batch(run_id, metrics=metrics[i : i + MAX_BATCH], tags=(tags or []) if last else [])


def log_metric_rows(uri: str, run_id: str, rows: Iterable[Mapping[str, Any]], step_key: str = "step",
                    prefix: str = "") -> int:
    """Log each numeric, finite field of each row at `row[step_key]`; returns the number logged."""
    metrics = metric_rows(rows, step_key, prefix)
    if metrics:
        _log_batches(uri, run_id, metrics)
    return len(metrics)


def log_metrics_file(uri: str, run_id: str, metrics_path: str | Path, prefix: str = "") -> int:
    """Ingest a training job's whole metrics JSONL (one object per step); a torn last line is skipped."""
    rows, _ = read_metrics_jsonl(metrics_path, torn_tail="skip")
    return log_metric_rows(uri, run_id, rows, prefix=prefix)


def log_artifact(uri: str, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
    client(uri).log_artifact(run_id, str(path), artifact_path)


def finish(uri: str, run_id: str, status: str = "FINISHED", end_time: float | None = None) -> None:
    """Mark the run FINISHED / FAILED / KILLED (at `end_time`, epoch seconds; default now)."""
    client(uri).set_terminated(run_id, status=status, end_time=_ms(end_time))


# -- standalone training (`campaign train`, the local backend) ---------------------------------------------


def start_training_run(uri: str, req: TrainRequest, experiment: str | None = None) -> str:
    """The run of a standalone training request, created (RUNNING) before its first step."""
    exp = experiment or req.experiment or "windtunnel-train"
    params = {"policy": req.policy, "seed": req.seed, "recipe": req.recipe.to_dict(), "model_path": req.model_path,
              "weights_hash": req.weights_hash()}
    rid = ensure_run(uri, exp, req.run_key, req.run_id, params=params,
                     tags={"windtunnel.policy": str(req.policy.get("name", "")), "windtunnel.seed": str(req.seed)})
    client(uri).update_run(rid, status="RUNNING")
    return rid


def log_training_run(uri: str, req: TrainRequest, result: TrainResult, experiment: str | None = None,
                     run_id: str | None = None) -> str:
    """End a standalone training run: compute, the result manifest, FINISHED. Without `run_id` (metrics
    not streamed) the run is found or created and the whole metrics file is ingested first."""
    rid = run_id or start_training_run(uri, req, experiment)
    if run_id is None:
        log_metrics_file(uri, rid, result.metrics_path)
    last = max((c.step for c in result.checkpoints), default=0)
    log_metric_rows(uri, rid, [{"step": last, **{f"compute/{k}": v for k, v in result.compute.items()}}])
    manifest = Path(result.metrics_path).parent / "result.json"
    if manifest.exists():
        log_artifact(uri, rid, manifest)
    finish(uri, rid)
    return rid


class MlflowTrainingSink:
    """`training.backend.MetricsSink` into MLflow for a standalone `campaign train`: the run is created
    RUNNING before the first step, streams each row, and ends FINISHED with its compute and manifest, or FAILED."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.run_id: str | None = None

    def start(self, req: TrainRequest) -> None:
        self.run_id = start_training_run(self.uri, req)

    def log(self, row: dict[str, Any]) -> None:
        if self.run_id:
            log_metric_rows(self.uri, self.run_id, [row])

    def finish(self, req: TrainRequest, result: TrainResult | None) -> None:
        if not self.run_id:
            return
        if result is None:
            finish(self.uri, self.run_id, "FAILED")
        else:
            log_training_run(self.uri, req, result, run_id=self.run_id)


# -- campaigns: one MLflow run per grid cell, kept in step with the ledger -----------------------------------


def cell_params(spec: RunSpec) -> dict[str, Any]:
    return {"run_key": spec.run_key, "config_hash": spec.config_hash, "model": spec.model_cfg.to_dict(),
            "recipe": spec.recipe_cfg.to_dict(), "policy": spec.policy.cfg, "seed": spec.seed, "steps": spec.steps,
            "regime": spec.regime, "data": spec.data}


def cell_run_name(spec: RunSpec) -> str:
    """The MLflow run name: policy and seed first, as a reader scans them (`topk s1 · ux_small/tiny_qwen2`),
    then group/model and regime; MLflow's list truncates names from the right. The run_id is a tag."""
    return f"{spec.policy.name} s{spec.seed} · {spec.group}/{spec.model}" + (f" @{spec.regime}" if spec.regime else "")


def cell_tags(spec: RunSpec) -> dict[str, str]:
    return {"windtunnel.policy": spec.policy.name, "windtunnel.model": spec.model, "windtunnel.seed": str(spec.seed),
            "windtunnel.group": spec.group, "windtunnel.regime": spec.regime, "windtunnel.run_id": spec.run_id}


def eval_metric_rows(records_path: str | Path, suite: str) -> list[dict[str, Any]]:
    """Per checkpoint step: `eval/<benchmark>`, `domain/<domain>` and `agg/<aggregate>` (DB-12 …) from a
    run's records, through the analysis code that computes them for reports (NaN stays missing)."""
    from analysis.aggregates import run_table
    from analysis.records import read_records
    from evaluation.suite import load_suite

    s = load_suite(suite)
    tab = run_table(read_records(records_path, suite=s), s)
    out = []
    for _, r in tab.iterrows():
        row: dict[str, Any] = {"step": int(r["step"])}
        row |= {f"eval/{b}": r[b] for b in s.benchmark_ids}
        row |= {f"domain/{d}": r[d] for d in s.domains}
        row |= {f"agg/{a}": r[a] for a in s.aggregate_names}
        out.append(row)
    return out


_TERMINAL_STATUS = {RunState.recorded: "FINISHED", RunState.failed: "FAILED", RunState.cancelled: "KILLED"}
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag: the UI nests a run under this parent
CAMPAIGN_RUN_TAG = "windtunnel.campaign_run"  # "true" on a campaign's parent run


def verdict_summary(records: str | Path, suite: str, *, margin: float = 1.0, alpha: float = 0.05,
                    n_resamples: int = 1000) -> Any:
    """The campaign's verdict table (analysis.verdicts, the suite's first aggregate) from its records, or None
    when the records hold no method-vs-reference pair yet."""
    import warnings

    from analysis.comparisons import paired_comparisons
    from analysis.records import read_records
    from analysis.verdicts import verdict_table
    from evaluation.suite import load_suite

    s = load_suite(suite)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = paired_comparisons(read_records(records, suite=s), s, n_resamples=n_resamples)
        if res.table.empty:
            return None
        v = verdict_table(res.table, s.aggregate_names[0], margin, alpha)
    return None if v.empty else v


class CampaignTracker:
    """Keeps a campaign's MLflow runs in step with its ledger; `sync()` is cheap when nothing changed."""

    def __init__(self, uri: str, ledger: Ledger, campaign: str, workdir: Path):
        self.uri, self.ledger, self.campaign, self.workdir = uri, ledger, campaign, Path(workdir).resolve()
        self._known: dict[str, dict[str, Any]] = {}  # run_key -> {"id", "status", "offsets", "superseded"}
        self._skip: set[str] = set()  # untracked earlier generations: never looked up again
        self._reported: set[str] = set()
        self._parent: dict[str, Any] | None = None  # {"id", "status"} of the campaign's parent run

    def parent(self) -> dict[str, Any]:
        """The campaign's parent run (created once, found again by its run-key tag): every cell's run nests under
        it, and it carries the campaign's verdicts and report (`conclude`)."""
        if self._parent is None:
            c = client(self.uri)
            self._fence()
            exp = experiment_id(self.uri, self.campaign, (self.workdir / "mlartifacts" / self.campaign).as_uri())
            # found by its own tag, not RUN_KEY_TAG: whatever counts the cells' runs by run_key never counts it
            found = c.search_runs([exp], filter_string=f"tags.`{CAMPAIGN_RUN_TAG}` = 'true'", max_results=1)
            if found:
                self._parent = {"id": found[0].info.run_id, "status": found[0].info.status}
            else:
                run = c.create_run(exp, run_name=f"{self.campaign} · campaign",
                                   tags={CAMPAIGN_RUN_TAG: "true", "windtunnel.campaign": self.campaign})
                self._parent = {"id": run.info.run_id, "status": run.info.status}
        return self._parent

    def conclude(self, records: str | Path | None, suite: str, *, report: str | Path | None = None) -> str:
        """End the parent run when the campaign has nothing pending: its verdicts (counts as metrics and a tag,
        the table as `verdicts.csv`), the records, the report (`report.html`) when given; FAILED when a run
        failed. Returns the parent's MLflow run id. Called again (a resumed or grown campaign) it replaces them."""
        from mlflow.entities import RunTag

        par = self.parent()
        rows = self.ledger.runs(self.campaign)
        counts = {st: sum(1 for r in rows if r.state == st) for st in (RunState.recorded, RunState.failed)}
        metrics: list[dict[str, Any]] = [{"step": 0, "runs/recorded": counts[RunState.recorded],
                                          "runs/failed": counts[RunState.failed], "runs/total": len(rows)}]
        tags = [RunTag("windtunnel.runs", f"{counts[RunState.recorded]} recorded, {counts[RunState.failed]} failed "
                                          f"of {len(rows)}")]
        c = client(self.uri)
        v = verdict_summary(records, suite) if records is not None and Path(records).exists() else None
        self._fence()
        if v is not None:
            from analysis.verdicts import VERDICTS, verdict_counts

            vc = verdict_counts(v)
            metrics[0] |= {f"verdicts/{k}": vc.get(k, 0) for k in VERDICTS}
            tags.append(RunTag("windtunnel.verdicts", ", ".join(f"{vc.get(k, 0)} {k}" for k in VERDICTS)))
            for r in v.itertuples():
                if r.verdict != "undecided":  # the claims, readable in the run's tags
                    regime = f"@{r.regime}" if isinstance(r.regime, str) and r.regime else ""
                    tags.append(RunTag(mlflow_key(f"verdict/{r.policy} vs {r.reference}/{r.model}{regime}"),
                                       f"{r.verdict} ({r.mean_diff:+.2f} {r.metric}, n={r.n})"))
            c.log_text(par["id"], v.to_csv(index=False), "verdicts.csv")
        if records is not None and Path(records).exists():
            c.log_artifact(par["id"], str(records))
        if report is not None:
            c.log_artifact(par["id"], str(report))
        _log_batches(self.uri, par["id"], metric_rows(metrics), tags=tags)
        status = "FAILED" if counts[RunState.failed] else "FINISHED"
        finish(self.uri, par["id"], status)
        par["status"] = status
        return str(par["id"])

    def attach_report(self, report: str | Path) -> str:
        """Log a report written after the campaign ended (`campaign demo`, `campaign report`) to the parent run."""
        par = self.parent()
        self._fence()
        client(self.uri).log_artifact(par["id"], str(report))
        return str(par["id"])

    def _spec(self, row: RunRow) -> RunSpec:
        return row.spec

    def _metrics_files(self, spec: RunSpec) -> list[Path]:
        """The files a cell's training metrics stream from: verl's per-launch files while they exist
        (`train/verl_metrics/launch_*.jsonl`; merged into metrics.jsonl only when the run ends), else
        `train/metrics.jsonl`, where the local and noop backends write each step."""
        from orchestrator.paths import run_dir

        return training_metrics_files(run_dir(self.workdir, spec) / "train")

    def _open(self, row: RunRow) -> dict[str, Any] | None:
        """The cell's MLflow run: by the ledger's id, else by run_key tag, else created (current cells only)."""
        c = client(self.uri)
        rid = row.mlflow_run_id or None
        if rid is not None:
            try:
                c.get_run(rid)
            except Exception:
                rid = None
        spec = self._spec(row)
        if rid is None:
            rid = find_run(self.uri, self.campaign, row.run_key)
        if rid is None:
            if row.superseded_by:
                return None  # an earlier generation never tracked: do not create it now
            attempts = self.ledger.attempts(self.campaign, row.run_key)
            started = attempts[0]["started_at"] if attempts else time.time()
            parent = self.parent()["id"]
            self._fence()
            rid = ensure_run(self.uri, self.campaign, row.run_key, cell_run_name(spec), params=cell_params(spec),
                             tags={**cell_tags(spec), PARENT_TAG: parent}, start_time=started,
                             artifact_location=(self.workdir / "mlartifacts" / self.campaign).as_uri())
        if row.mlflow_run_id != rid:
            self.ledger.update(self.campaign, row.run_key, mlflow_run_id=rid)
        run = c.get_run(rid)
        if PARENT_TAG not in run.data.tags:  # a run tracked before campaigns had a parent run: nest it now
            parent = self.parent()["id"]
            self._fence()
            c.set_tag(rid, PARENT_TAG, parent)
        offsets = json.loads(run.data.tags.get(OFFSET_TAG, "{}"))
        return {"id": rid, "status": run.info.status, "offsets": offsets if isinstance(offsets, dict) else {},
                "superseded": run.data.tags.get("windtunnel.superseded_by", "")}

    def _stream(self, spec: RunSpec, st: dict[str, Any]) -> int:
        """Log the complete lines added to the cell's metrics files since the last call (byte offsets per
        file name, kept in a run tag with the metrics in one batch)."""
        from mlflow.entities import RunTag

        n = 0
        for path in self._metrics_files(spec):
            if not path.exists():
                continue
            seen = int(st["offsets"].get(path.name, 0))
            size = path.stat().st_size
            if size < seen:
                seen = 0  # the file was rewritten (a retried training attempt starts it again)
            if size == seen:
                continue
            rows, offset = read_metrics_jsonl(path, torn_tail="skip", offset=seen)  # a torn tail is read again
            if offset == seen:
                continue
            metrics = metric_rows(rows, prefix="train/")
            offsets = {**st["offsets"], path.name: offset}
            self._fence()
            _log_batches(self.uri, st["id"], metrics, tags=[RunTag(OFFSET_TAG, json.dumps(offsets, sort_keys=True))])
            st["offsets"] = offsets
            n += len(metrics)
        return n

    def _end_time(self, row: RunRow) -> float:
        ts = [e["ts"] for e in self.ledger.events(self.campaign, row.run_key)
              if e["kind"] in ("transition", "superseded") and e["dst"] == row.state]
        return ts[-1] if ts else time.time()

    def _fence(self) -> None:
        """Before every MLflow write: LeaseLost if the driver this tracker writes for was taken over (a
        ledger read; a no-op when its ledger drives nothing, as under `campaign ingest`)."""
        self.ledger.check_driver(self.campaign)

    def _finish(self, row: RunRow, spec: RunSpec, st: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        from orchestrator.paths import run_dir

        self._fence()

        c = client(self.uri)
        status = _TERMINAL_STATUS[RunState(row.state)]
        rd = run_dir(self.workdir, spec)
        rows = [{"step": spec.steps, **{f"compute/{k}": v for k, v in row.compute.items()}}]
        tags = [RunTag("windtunnel.state", "superseded" if row.superseded_by else row.state)]
        if row.reason:
            tags.append(RunTag("windtunnel.reason", row.reason[:PARAM_LIMIT]))
        if row.state == RunState.recorded and row.outputs.get("records") and Path(row.outputs["records"]).exists():
            rows += eval_metric_rows(row.outputs["records"], spec.suite)
            c.log_artifact(st["id"], str(row.outputs["records"]))
            if (rd / "eval").is_dir():
                c.log_artifacts(st["id"], str(rd / "eval"), artifact_path="eval")
        if (rd / "run_spec.json").exists():
            c.log_artifact(st["id"], str(rd / "run_spec.json"))
        _log_batches(self.uri, st["id"], metric_rows(rows), tags=tags)
        finish(self.uri, st["id"], status, end_time=self._end_time(row))
        st["status"] = status

    def sync(self) -> int:
        """Bring MLflow up to date with the ledger; returns the number of runs created or ended.

        A cell whose tracking fails (e.g. unreadable records) is reported once on stderr and as a
        ledger event and tried again on the next poll; the other cells go on."""
        changed = 0
        rows = self.ledger.runs(self.campaign) + self.ledger.superseded(self.campaign)
        for row in rows:
            if row.attempts == 0 and row.state in (RunState.planned, RunState.queued) and not row.mlflow_run_id:
                continue  # not started: no MLflow run yet
            if row.run_key in self._skip:
                continue
            try:
                if row.state not in _TERMINAL_STATUS and not row.superseded_by:
                    self._reopen_parent()
                changed += self._sync_row(row)
            except LeaseLost:
                raise
            except Exception as exc:
                import sys

                msg = f"MLflow: run {row.run_id}: {type(exc).__name__}: {exc}"[:500]
                if msg not in self._reported:  # tried again next poll; said once
                    self._reported.add(msg)
                    self.ledger.event(self.campaign, "tracking_error", msg, row.run_key)
                    print(f"warning: {msg}", file=sys.stderr)
        return changed

    def _reopen_parent(self) -> None:
        """The parent runs while any cell does (a resumed or grown campaign reopens a concluded one)."""
        par = self.parent()
        if par["status"] != "RUNNING":
            self._fence()
            client(self.uri).update_run(par["id"], status="RUNNING")
            par["status"] = "RUNNING"

    def _sync_row(self, row: RunRow) -> int:
        changed = 0
        st = self._known.get(row.run_key)
        if st is None:
            st = self._open(row)
            if st is None:
                self._skip.add(row.run_key)  # an untracked earlier generation: never look it up again
                return 0
            changed += int(not row.mlflow_run_id)
            self._known[row.run_key] = st
        spec = self._spec(row)
        if row.superseded_by and st["superseded"] != row.superseded_by:
            self._fence()
            client(self.uri).set_tag(st["id"], "windtunnel.superseded_by", row.superseded_by)
            client(self.uri).set_tag(st["id"], "windtunnel.state", "superseded")  # never looks current
            st["superseded"] = row.superseded_by
        if row.state in _TERMINAL_STATUS:
            if st["status"] == "RUNNING":
                self._stream(spec, st)
                self._finish(row, spec, st)
                changed += 1
        else:
            if st["status"] != "RUNNING":  # retried or reopened: running again
                self._fence()
                client(self.uri).update_run(st["id"], status="RUNNING")
                st["status"] = "RUNNING"
            self._stream(spec, st)
        return changed
