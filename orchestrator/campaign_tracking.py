"""A campaign's MLflow runs, kept in step with its ledger (`CampaignTracker`).

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
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.engine.ledger.base import LeaseLost
from orchestrator.engine.ledger.states import RunState
from orchestrator.record_summaries import eval_metric_rows, verdict_summary
from orchestrator.tracking import (CAMPAIGN_RUN_TAG, OFFSET_TAG, PARAM_LIMIT, PARENT_TAG, client, ensure_run,
                                   experiment_id, find_run, finish, log_batches, metric_rows, mlflow_key)
from wtcommon.metrics import read_metrics_jsonl, training_metrics_files

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec
    from orchestrator.engine.ledger import Ledger
    from orchestrator.engine.ledger.base import RunRow


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


_TERMINAL_STATUS = {RunState.recorded: "FINISHED", RunState.failed: "FAILED", RunState.cancelled: "KILLED"}


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
        log_batches(self.uri, par["id"], metric_rows(metrics), tags=tags)
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
        from orchestrator.engine.paths import run_dir

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
            started = attempts[0].started_at if attempts else time.time()
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
            log_batches(self.uri, st["id"], metrics, tags=[RunTag(OFFSET_TAG, json.dumps(offsets, sort_keys=True))])
            st["offsets"] = offsets
            n += len(metrics)
        return n

    def _end_time(self, row: RunRow) -> float:
        ts = [e.ts for e in self.ledger.events(self.campaign, row.run_key)
              if e.kind in ("transition", "superseded") and e.dst == row.state]
        return ts[-1] if ts else time.time()

    def _fence(self) -> None:
        """Before every MLflow write: LeaseLost if the driver this tracker writes for was taken over (a
        ledger read; a no-op when its ledger drives nothing, as under `campaign ingest`)."""
        self.ledger.check_driver(self.campaign)

    def _finish(self, row: RunRow, spec: RunSpec, st: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        from orchestrator.engine.paths import run_dir

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
        log_batches(self.uri, st["id"], metric_rows(rows), tags=tags)
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
