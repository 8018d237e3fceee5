"""MLflow helpers on a real SQLite store: idempotent runs by run_key, JSONL ingestion, NaN left missing."""

from __future__ import annotations

import json
import math

import pytest

from orchestrator import tracking


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    """One SQLite store for the module: creating one runs MLflow's migrations (tens of seconds)."""
    return tracking.default_uri(tmp_path_factory.mktemp("mlflow"))


def test_ensure_run_is_idempotent_by_run_key(uri):
    a = tracking.ensure_run(uri, "camp", "key1", "camp/m/topk/s1", params={"recipe": {"lr": 1e-3}, "seed": 1})
    b = tracking.ensure_run(uri, "camp", "key1", "camp/m/topk/s1")
    c = tracking.ensure_run(uri, "camp", "key2", "camp/m/topk/s2")
    assert a == b != c
    run = tracking.client(uri).get_run(a)
    assert run.data.params["recipe.lr"] == "0.001" and run.data.tags[tracking.RUN_KEY_TAG] == "key1"


def test_metrics_jsonl_ingested_per_step_and_nan_stays_missing(uri, tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "reward/mean": 0.25, "val/x": float("nan"), "name": "ignored"},
            {"step": 2, "reward/mean": 0.5, "acc@1": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{\"step\": 3, \"torn")  # torn last line skipped
    rid = tracking.ensure_run(uri, "camp2", "k", "r")
    assert tracking.log_metrics_file(uri, rid, path) == 3
    hist = tracking.client(uri).get_metric_history(rid, "reward/mean")
    assert sorted((m.step, m.value) for m in hist) == [(1, 0.25), (2, 0.5)]
    assert tracking.client(uri).get_metric_history(rid, "val/x") == []
    assert tracking.client(uri).get_metric_history(rid, "acc_at_1")[0].value == 1.0
    tracking.finish(uri, rid)
    assert tracking.client(uri).get_run(rid).info.status == "FINISHED"
    assert not math.isnan(hist[0].value)
