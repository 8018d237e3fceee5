"""A campaign session in a work directory: plan → ledger → executor → scheduler → records/MLflow.

Work directory layout (everything addressed from one place, STUDY L18):
    ledger.db            run ledger (SQLite WAL) unless --ledger-url is given
    mlflow.db, mlartifacts/   embedded MLflow store written only by the orchestrator (orchestrator.tracking)
    ray_head.json, ray_head.lock, ray_auth_token (0600), ray/   the local Ray head this workdir owns
    runs/<campaign>/<run_key>/  run_spec.json, train/, train_done.json, eval/, records.parquet, eval_done.json
    results/<campaign>/records.parquet   all recorded runs of the campaign's current generation (analysis/schema.py);
                         its Parquet metadata carries the spec hash it came from (`records_spec_hash`)
    data/                built corpora and evaluation data
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Collection

from orchestrator.engine.executor import ClusterUnreachable, RayJobsExecutor
from orchestrator.cluster.local_head import ensure_head, token_file
from orchestrator.engine.grid import RunSpec, expand
from orchestrator.engine.ledger import Ledger, UpsertDiff, open_ledger
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import RunState
from orchestrator.engine.scheduler.loop import Scheduler, SchedulerConfig
from orchestrator.engine.spec import CampaignSpec, load_campaign
from orchestrator.engine.workdir import Workdir
from wtcommon.errors import UserError, WindtunnelError
from wtcommon.hashing import text_hash

if TYPE_CHECKING:
    import pandas as pd

SPEC_HASH_KEY = b"windtunnel.spec_sha256"


class RecordsMissing(WindtunnelError, RuntimeError):
    """A run the ledger calls recorded has no records file: collecting without it would silently drop rows."""


def spec_hash(spec_json: str) -> str:
    """sha256 of the campaign spec as stored in the ledger (what a records file says it came from)."""
    return text_hash(spec_json, 64)


def records_spec_hash(path: str | Path) -> str | None:
    """The spec hash a collected records file carries, or None (a file not written by collect_records)."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    v = meta.get(SPEC_HASH_KEY)
    return v.decode() if v else None


def plan(campaign: str | Path, overrides: list[str] | tuple[str, ...] = (), data_root: Path | None = None
         ) -> tuple[CampaignSpec, list[RunSpec]]:
    """Validate and expand a campaign; raises SpecError before anything is written."""
    spec = load_campaign(campaign, list(overrides))
    return spec, expand(spec, data_root=data_root)


def to_reevaluate(rows: list[RunRow], runs: list[RunSpec], workdir: Path) -> tuple[list[RunSpec], list[RunSpec]]:
    """Runs whose training stays but whose evaluation settings changed: (recorded runs scored with other
    settings — the scheduler's repair reopens them to `trained`; runs that failed their evaluate stage under
    other settings — `submit` queues them again with a fresh retry budget). Read-only."""
    from orchestrator.engine.stages import evaluated_key

    current = {r.run_key: r for r in rows if not r.superseded_by}
    recorded, failed = [], []
    for spec in runs:
        row = current.get(spec.run_key)
        if row is None:
            continue
        if row.state == RunState.recorded:
            done = evaluated_key(spec, workdir)
            if done is not None and done != spec.eval_key:
                recorded.append(spec)
        elif row.state == RunState.failed and row.stage == "evaluate":
            if row.spec.eval_key != spec.eval_key:
                failed.append(spec)
    return recorded, failed


def cluster_executor(ray_address: str, workdir: Path | None = None) -> RayJobsExecutor:
    """The Jobs API of a cluster the user started, with its token: the work dir's (if it owns one), else
    RAY_AUTH_TOKEN_PATH of the environment."""
    env_tok = os.environ.get("RAY_AUTH_TOKEN_PATH")
    own = Path(workdir).resolve() / "ray_auth_token" if workdir is not None else None
    tok = own if own is not None and own.exists() else Path(env_tok) if env_tok else None
    return RayJobsExecutor(ray_address, token_file=tok)


@dataclass
class Session:
    workdir: Path
    ledger_url: str | None = None
    ray_address: str | None = None
    mlflow_uri: str | None = None
    track: bool = True  # keep MLflow in step while driving (False: only `ingest` writes it)

    def __post_init__(self) -> None:
        self.wd = Workdir.of(self.workdir, self.ledger_url)
        self.workdir = self.wd.root
        self._ledger: Ledger | None = None
        self._executor: RayJobsExecutor | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = open_ledger(self.wd)
        return self._ledger

    @property
    def executor(self) -> RayJobsExecutor:
        """The cluster's Jobs API; a local head on 127.0.0.1 owned by the workdir when no address."""
        if self._executor is None:
            if self.ray_address:
                ex = cluster_executor(self.ray_address, self.workdir)
            else:
                self.workdir.mkdir(parents=True, exist_ok=True)
                ex = RayJobsExecutor(ensure_head(self.workdir), token_file=token_file(self.workdir))
            ex.ping()
            self._executor = ex
        return self._executor

    def submit(self, spec: CampaignSpec, runs: list[RunSpec], campaign: str | None = None) -> UpsertDiff:
        """Register the campaign (idempotent by run_key) as `campaign`, default `spec.name` (the tuner registers
        its trials' runs as `<campaign>.tune.<policy>@<suite>` with the campaign's spec). Runs whose evaluation
        settings changed keep their checkpoints and are re-evaluated: recorded ones by the scheduler's repair
        (their records no longer verify against the new settings), failed-at-evaluation ones queued again here."""
        name = campaign or spec.name
        recorded, failed = to_reevaluate(self.ledger.runs(name), runs, self.workdir)
        rows = [r.ledger_row() for r in runs]
        diff = self.ledger.upsert_campaign(name, spec.model_dump_json(), rows)
        for r in failed:
            row = self.ledger.get(name, r.run_key)
            if row.state == RunState.failed:
                self.ledger.transition(name, r.run_key, RunState.queued, next_try_at=0.0, failure_class="",
                                       reason="evaluation settings changed: re-evaluating (checkpoints kept)",
                                       outputs={k: v for k, v in row.outputs.items() if k != "failures"})
        diff.reevaluate = [r.run_id for r in recorded + failed]
        return diff

    def scheduler(self, campaign: str, cfg: SchedulerConfig | None = None,
                  on_change: Callable[[RunRow, str], None] | None = None) -> Scheduler:
        return Scheduler(self.ledger, campaign, self.executor, self.workdir, cfg or self.default_config(campaign),
                         on_change=on_change, tracker=self.tracker(campaign) if self.track else None)

    def default_config(self, campaign: str) -> SchedulerConfig:
        spec_json = self.ledger.campaign_spec(campaign)
        if spec_json is None:
            raise UserError(f"campaign {campaign!r} is not in the ledger at {self.ledger.url}; submit it first")
        spec = CampaignSpec.model_validate_json(spec_json)
        gpus = spec.compute.nodes * spec.compute.gpus_per_node
        return SchedulerConfig(capacity_gpus=gpus, nodes=spec.compute.nodes, gpus_per_node=spec.compute.gpus_per_node,
                               max_parallel=max(1, gpus) if gpus else 2,
                               max_attempts=spec.retries.max_attempts, backoff_s=spec.retries.backoff_s,
                               backoff_max_s=spec.retries.backoff_max_s, cpus_per_job=spec.compute.cpus_per_run)

    def tracker(self, campaign: str):
        """The campaign's MLflow tracker (one run per cell, kept in step with the ledger)."""
        from orchestrator.campaign_tracking import CampaignTracker

        return CampaignTracker(self.mlflow_uri or self.wd.mlflow_uri, self.ledger, campaign, self.workdir)

    def ingest(self, campaign: str) -> int:
        """Bring the campaign's MLflow runs up to date with the ledger (idempotent; the scheduler does the
        same after every poll when `track` is on). Returns the number of runs created or ended; 0 without
        writing while another live orchestrator drives the campaign (it is the store's writer then)."""
        import time

        from orchestrator.engine.scheduler.loop import orchestrator_id

        held = self.ledger.driver(campaign)
        if held and held[0] != orchestrator_id() and held[1] > time.time():
            return 0
        return self.tracker(campaign).sync()

    def conclude(self, campaign: str, records: Path | None, report: Path | None = None) -> str | None:
        """End the campaign's MLflow parent run with its verdicts, records and report (`CampaignTracker.conclude`)
        once nothing is pending; the parent's run id, or None when runs are still pending, tracking is off or
        another live orchestrator drives the campaign (it is the store's writer then)."""
        import time

        from orchestrator.engine.scheduler.loop import orchestrator_id

        if not self.track:
            return None
        held = self.ledger.driver(campaign)
        if held and held[0] != orchestrator_id() and held[1] > time.time():
            return None
        done = (RunState.recorded, RunState.failed, RunState.cancelled)
        if any(r.state not in done for r in self.ledger.runs(campaign)):
            return None
        spec = CampaignSpec.model_validate_json(self.ledger.campaign_spec(campaign) or "{}")
        return self.tracker(campaign).conclude(records, spec.suite, report=report)

    def records_frame(self, campaign: str, run_keys: Collection[str] | None = None) -> pd.DataFrame | None:
        """The records of every recorded run of the current generation (superseded runs never), or of those
        among `run_keys` only (a tuning trial's runs), each read against its own run's suite; None when none
        is recorded. Writes nothing (`collect_records` writes the campaign's file).

        Raises RecordsMissing naming every such recorded run whose records file is gone (`campaign resume`
        reopens those runs and re-runs their record stage)."""
        import pandas as pd

        frames = self._recorded_frames(campaign, run_keys)
        return pd.concat(frames, ignore_index=True) if frames else None

    def _recorded_frames(self, campaign: str, run_keys: Collection[str] | None = None) -> list[pd.DataFrame]:
        from analysis.records import read_records
        from evaluation.suite import Suite, load_suite

        frames, missing = [], []
        suites: dict[str, Suite] = {}
        for row in self.ledger.runs(campaign, [RunState.recorded]):
            if run_keys is not None and row.run_key not in run_keys:
                continue
            p = row.outputs.get("records")
            if not p or not Path(p).exists():
                missing.append(f"{row.run_id} (run_key {row.run_key}: {p or 'no records path in the ledger'})")
                continue
            name = row.spec.suite  # a tuning run's is its validation suite (read_records' default is db12)
            if name not in suites:
                suites[name] = load_suite(name)
            frames.append(read_records(p, suite=suites[name]))
        if missing:
            raise RecordsMissing(f"campaign {campaign!r}: {len(missing)} recorded run(s) have no records file: "
                                 f"{'; '.join(missing[:20])}; run `campaign resume {campaign} --workdir "
                                 f"{self.workdir}` "
                                 "to re-run their record stage")
        return frames

    def collect_records(self, campaign: str) -> Path | None:
        """`results/<campaign>/records.parquet` from every recorded run of the current generation
        (`records_frame`), rebuilt atomically, tagged with the spec hash it came from and how many of the
        campaign's runs it holds; None (nothing written) when no run is recorded yet.

        Raises RecordsMissing naming every recorded run whose records file is gone (`campaign resume`
        reopens those runs and re-runs their record stage); nothing is written then."""
        import pandas as pd
        import pyarrow.parquet as pq

        from wtcommon.atomic import atomic_path
        from analysis.records import write_records

        expected = sum(1 for r in self.ledger.runs(campaign) if r.state != RunState.cancelled)
        frames = self._recorded_frames(campaign)
        if not frames:
            return None
        from analysis.records import BASELINES_KEY, RUNS_EXPECTED_KEY, RUNS_RECORDED_KEY
        from analysis.schema import DEFAULT_REFERENCE

        out = self.wd.records(campaign)
        out.parent.mkdir(parents=True, exist_ok=True)
        # validated into a private file, then the tagged table replaces `out` in one rename: a reader (compare
        # while the campaign runs) sees the previous complete file or the new one, never a part
        staged = out.with_name(f".{out.stem}.{os.getpid()}.staged.parquet")
        try:
            write_records(pd.concat(frames, ignore_index=True), staged)
            table = pq.read_table(staged)
        finally:
            staged.unlink(missing_ok=True)
        raw_spec = self.ledger.campaign_spec(campaign) or ""
        meta = {**(table.schema.metadata or {}), SPEC_HASH_KEY: spec_hash(raw_spec).encode(),
                RUNS_EXPECTED_KEY: str(expected).encode(), RUNS_RECORDED_KEY: str(len(frames)).encode()}
        baselines = CampaignSpec.model_validate_json(raw_spec).baselines if raw_spec else DEFAULT_REFERENCE
        if baselines != DEFAULT_REFERENCE:  # the defaults are not written: such a file keeps its bytes
            meta[BASELINES_KEY] = json.dumps(baselines, sort_keys=True).encode()
        table = table.replace_schema_metadata(meta)
        with atomic_path(out) as tmp:
            pq.write_table(table, tmp)
        return out

    def status(self, campaign: str) -> dict[str, Any]:
        rows = self.ledger.runs(campaign)
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        return {"campaign": campaign, "total": len(rows), "states": counts}

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


__all__ = ["Session", "plan", "ClusterUnreachable", "RecordsMissing", "records_spec_hash", "spec_hash"]
