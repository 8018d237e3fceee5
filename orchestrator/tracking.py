"""MLflow helpers shared by the training CLI and the orchestrator.

Why: one experiment per campaign, one MLflow run per grid cell, found again by its `run_key` tag so
a resumed campaign never creates a duplicate. With the embedded SQLite store only one process may
write (concurrent writers fail with "database is locked"), so training jobs write JSONL and the
single writer (the CLI or the orchestrator) ingests it here. All helpers take an explicit tracking
URI and use `MlflowClient`, never the fluent global state, so several stores can be used in one
process.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from orchestrator.training.backend import TrainRequest, TrainResult

RUN_KEY_TAG = "windtunnel.run_key"
MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per call


def default_uri(workdir: str | Path) -> str:
    """`sqlite:///<workdir>/mlflow.db` (absolute), the embedded default store."""
    return f"sqlite:///{(Path(workdir).resolve() / 'mlflow.db')}"


def client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment_id(uri: str, name: str) -> str:
    """Id of experiment `name`, created if missing."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return c.create_experiment(name)
    except Exception:  # noqa: BLE001 - created concurrently by another writer: read it back
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
) -> str:
    """Idempotent: the existing run for `run_key`, else a new one with flattened params and tags."""
    rid = find_run(uri, experiment, run_key)
    c = client(uri)
    if rid is None:
        all_tags = {RUN_KEY_TAG: run_key, **(tags or {})}
        run = c.create_run(experiment_id(uri, experiment), run_name=run_name, tags=all_tags)
        rid = run.info.run_id
        if params:
            log_params(uri, rid, params)
    return rid


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> {"a.b.c": "value"} (MLflow params are flat strings, at most 6000 chars)."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.dumps(v, default=str)[:6000] if not isinstance(v, str) else v[:6000]
    return out


def log_params(uri: str, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(k, v) for k, v in flatten(params).items()]
    c = client(uri)
    for i in range(0, len(items), 100):
        c.log_batch(run_id, params=items[i : i + 100])


def log_metric_rows(uri: str, run_id: str, rows: Iterable[Mapping[str, Any]], step_key: str = "step") -> int:
    """Log each numeric, finite field of each row at `row[step_key]`; returns the number logged.

    NaN stays unlogged (missing is not a value); keys are sanitised like verl does (`@` -> `_at_`).
    """
    from mlflow.entities import Metric

    ts = int(time.time() * 1000)
    metrics = []
    for row in rows:
        step = int(row[step_key])
        for k, v in row.items():
            if k == step_key or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if math.isfinite(float(v)):
                metrics.append(Metric(k.replace("@", "_at_"), float(v), ts, step))
    c = client(uri)
    for i in range(0, len(metrics), MAX_BATCH):
        c.log_batch(run_id, metrics=metrics[i : i + MAX_BATCH])
    return len(metrics)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a metrics JSONL; a torn last line (a job killed mid-write) is skipped."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def log_metrics_file(uri: str, run_id: str, metrics_path: str | Path) -> int:
    """Ingest a training job's metrics JSONL (one object per step)."""
    return log_metric_rows(uri, run_id, read_jsonl(metrics_path))


def log_artifact(uri: str, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
    client(uri).log_artifact(run_id, str(path), artifact_path)


def finish(uri: str, run_id: str, status: str = "FINISHED") -> None:
    """Mark the run FINISHED / FAILED / KILLED."""
    client(uri).set_terminated(run_id, status=status)


def log_training_run(uri: str, req: "TrainRequest", result: "TrainResult", experiment: str | None = None) -> str:
    """Standalone `campaign train`: one run with params, metrics, compute and the result manifest."""
    exp = experiment or req.extra.get("experiment") or "windtunnel-train"
    params = {"policy": req.policy, "seed": req.seed, "recipe": req.recipe, "model_path": req.model_path,
              "config_hash": req.config_hash()}
    rid = ensure_run(uri, exp, req.run_key, req.run_id, params=params,
                     tags={"windtunnel.policy": str(req.policy.get("name", "")), "windtunnel.seed": str(req.seed)})
    log_metrics_file(uri, rid, result.metrics_path)
    last = max((c.step for c in result.checkpoints), default=0)
    log_metric_rows(uri, rid, [{"step": last, **{f"compute/{k}": v for k, v in result.compute.items()}}])
    manifest = Path(result.metrics_path).parent / "result.json"
    if manifest.exists():
        log_artifact(uri, rid, manifest)
    finish(uri, rid)
    return rid
