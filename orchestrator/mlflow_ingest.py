"""MLflow ingestion by the orchestrator (the only writer of an embedded SQLite store).

One experiment per campaign, one MLflow run per grid cell: params = the resolved config
(flattened), metrics = the training curves from the job's `metrics.jsonl` and per-benchmark
scores per checkpoint step from its records, artifacts = the run spec, the records and the
evaluator's per-item logs. Jobs never write MLflow themselves (concurrent SQLite writers fail
with "database is locked"); they leave files this module ingests.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from orchestrator.grid import RunSpec
from orchestrator.stages import run_dir


def default_uri(workdir: Path) -> str:
    return f"sqlite:///{Path(workdir).resolve() / 'mlflow.db'}"


def _flatten(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = json.dumps(d, default=str)[:500] if not isinstance(d, str) else d[:500]
    return out


def _metrics_from_jsonl(path: Path) -> list[tuple[str, float, int]]:
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        step = int(obj.get("step", 0))
        for k, v in obj.items():
            if k == "step" or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                continue
            out.append((f"train/{k}".replace("@", "_at_"), float(v), step))
    return out


def ingest_run(uri: str, spec: RunSpec, workdir: Path, mlflow_run_id: str = "") -> str:
    """Create or update the cell's MLflow run; return its id (stored in the ledger)."""
    import mlflow
    import pandas as pd
    from mlflow.entities import Metric, Param

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(spec.campaign)
    exp_id = exp.experiment_id if exp else client.create_experiment(
        spec.campaign, artifact_location=(Path(workdir).resolve() / "mlartifacts" / spec.campaign).as_uri())
    if not mlflow_run_id:
        run = client.create_run(exp_id, run_name=spec.run_id, tags={"run_key": spec.run_key, "policy": spec.policy,
                                                                     "model": spec.model, "seed": str(spec.seed),
                                                                     "group": spec.group, "regime": spec.regime})
        mlflow_run_id = run.info.run_id
        params = {"run_key": spec.run_key, "config_hash": spec.config_hash, **_flatten(
            {"model": spec.model_cfg, "recipe": spec.recipe_cfg, "policy": spec.policy_cfg, "seed": spec.seed,
             "steps": spec.steps, "regime": spec.regime, "data": spec.data})}
        items = [Param(k[:250], v) for k, v in params.items()]
        for i in range(0, len(items), 100):
            client.log_batch(mlflow_run_id, params=items[i:i + 100])
    rd = run_dir(workdir, spec)
    metrics: list[Metric] = []
    train_done = rd / "train_done.json"
    if train_done.exists():
        tm = json.loads(train_done.read_text())
        ts = 0
        metrics += [Metric(k, v, ts, s) for k, v, s in _metrics_from_jsonl(Path(tm["metrics_path"]))]
        metrics += [Metric(f"compute/{k}", float(v), ts, 0) for k, v in tm.get("compute", {}).items()
                    if isinstance(v, (int, float))]
    records = rd / "records.parquet"
    if records.exists():
        df = pd.read_parquet(records)
        for r in df.itertuples():
            if isinstance(r.accuracy, float) and math.isfinite(r.accuracy):
                metrics.append(Metric(f"eval/{r.benchmark}", float(r.accuracy), 0, int(r.step)))
        client.log_artifact(mlflow_run_id, str(records))
        if (rd / "eval").exists():
            client.log_artifacts(mlflow_run_id, str(rd / "eval"), artifact_path="eval")
    for i in range(0, len(metrics), 1000):
        client.log_batch(mlflow_run_id, metrics=metrics[i:i + 1000])
    spec_path = rd / "run_spec.json"
    if spec_path.exists():
        client.log_artifact(mlflow_run_id, str(spec_path))
    client.set_terminated(mlflow_run_id, "FINISHED" if records.exists() else "RUNNING")
    return mlflow_run_id
