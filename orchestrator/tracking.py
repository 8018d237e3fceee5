"""MLflow tracking: the one place MLflow is written from (training CLI, local backend, orchestrator): these
helpers, and the campaign tracker built on them (`orchestrator.campaign_tracking`).

Why one place: one tag key (`RUN_KEY_TAG`), one param-value limit (`PARAM_LIMIT`), one URI
default (`default_uri`), so a run written by `campaign train` and one written by a campaign are
found the same way. One experiment per campaign, one MLflow run per grid cell, found again by its
`run_key` tag *before* any create, so neither a resumed campaign nor a crash between `create_run`
and the ledger update makes a duplicate.

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

from wtcommon.metrics import read_metrics_jsonl

if TYPE_CHECKING:
    from training.backend import TrainRequest, TrainResult

RUN_KEY_TAG = "windtunnel.run_key"
OFFSET_TAG = "windtunnel.metrics_offsets"  # {metrics file name: bytes already logged}, JSON
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag: the UI nests a run under this parent
CAMPAIGN_RUN_TAG = "windtunnel.campaign_run"  # "true" on a campaign's parent run
PARAM_LIMIT = 6000  # MLflow's limit on a param value's length
MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per call


def default_uri(workdir: str | Path) -> str:
    """`sqlite:///<workdir>/mlflow.db` (absolute), the embedded default store."""
    from orchestrator.engine.workdir import Workdir

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

        from orchestrator.engine.quiet import quiet_libraries

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

    from orchestrator.engine.quiet import quiet_libraries

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


def log_batches(uri: str, run_id: str, metrics: list[Any], tags: list[Any] | None = None) -> None:
    """Log `metrics` in batches MLflow accepts; `tags` go with the last batch (one write with its metrics)."""
    c = client(uri)
    for i in range(0, max(len(metrics), 1), MAX_BATCH):
        last = i + MAX_BATCH >= len(metrics)
        c.log_batch(run_id, metrics=metrics[i : i + MAX_BATCH], tags=(tags or []) if last else [])


def log_metric_rows(uri: str, run_id: str, rows: Iterable[Mapping[str, Any]], step_key: str = "step",
                    prefix: str = "") -> int:
    """Log each numeric, finite field of each row at `row[step_key]`; returns the number logged."""
    metrics = metric_rows(rows, step_key, prefix)
    if metrics:
        log_batches(uri, run_id, metrics)
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
