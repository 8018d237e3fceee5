"""The SQL ledger's tables, their schema version and its migration, and the conversion of a row to a `RunRow`.

The tables are the ledger's file format: a column added here is added in place to an older ledger when it is
opened (`create_schema`), and a ledger written by a newer Windtunnel is refused rather than misread.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import sqlalchemy as sa

from orchestrator.engine.ledger.base import LedgerError, RunRow
from orchestrator.engine.ledger.states import AttemptStatus

meta = sa.MetaData()
campaigns_t = sa.Table(
    "campaigns", meta,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("instance_id", sa.String, nullable=False, default=""),
    sa.Column("driver", sa.String, nullable=False, default=""),
    sa.Column("driver_expires", sa.Float, nullable=False, default=0.0),
    sa.Column("driver_epoch", sa.Integer, nullable=False, default=0),  # fencing token: +1 on every takeover
)
runs_t = sa.Table(
    "runs", meta,
    sa.Column("campaign", sa.String, primary_key=True),
    sa.Column("run_key", sa.String, primary_key=True),
    sa.Column("run_id", sa.String, nullable=False, index=True),
    sa.Column("state", sa.String, nullable=False, index=True),
    sa.Column("order", sa.Integer, nullable=False),
    sa.Column("gpus", sa.Integer, nullable=False),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("stage", sa.String, nullable=False, default=""),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("submission_id", sa.String, nullable=False, default=""),
    sa.Column("lease_owner", sa.String, nullable=False, default=""),
    sa.Column("lease_expires", sa.Float, nullable=False, default=0.0),
    sa.Column("next_try_at", sa.Float, nullable=False, default=0.0),
    sa.Column("failure_class", sa.String, nullable=False, default=""),
    sa.Column("mlflow_run_id", sa.String, nullable=False, default=""),
    sa.Column("compute_json", sa.Text, nullable=False, default="{}"),
    sa.Column("outputs_json", sa.Text, nullable=False, default="{}"),
    sa.Column("updated_at", sa.Float, nullable=False, default=0.0),
    sa.Column("superseded_by", sa.String, nullable=False, default=""),
)
attempts_t = sa.Table(
    "attempts", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("campaign", sa.String, nullable=False),
    sa.Column("run_key", sa.String, nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("stage", sa.String, nullable=False),
    sa.Column("submission_id", sa.String, nullable=False, unique=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float),
    sa.Column("status", sa.String, nullable=False, default=AttemptStatus.running.value),
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("failure_class", sa.String, nullable=False, default=""),
)
events_t = sa.Table(
    "events", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("campaign", sa.String, nullable=False, index=True),
    sa.Column("run_key", sa.String, nullable=False, default=""),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("src", sa.String, nullable=False, default=""),
    sa.Column("dst", sa.String, nullable=False, default=""),
    sa.Column("detail", sa.Text, nullable=False, default=""),
)
# Interim looks of sequential seed designs (analysis/sequential/ decides; the ledger keeps them
# immutable per named design). Same table and columns as the one older versions created inline.
looks_t = sa.Table(
    "sequential_looks", meta,
    sa.Column("campaign", sa.String, primary_key=True), sa.Column("look", sa.Integer, primary_key=True),
    sa.Column("comparison", sa.String, primary_key=True), sa.Column("n", sa.Integer),
    sa.Column("decision", sa.String), sa.Column("mean", sa.Float), sa.Column("rci_low", sa.Float),
    sa.Column("rci_high", sa.Float), sa.Column("design_json", sa.Text), sa.Column("row_json", sa.Text),
    sa.Column("ts", sa.Float),
)
schema_t = sa.Table("schema_info", meta, sa.Column("key", sa.String, primary_key=True),
                    sa.Column("value", sa.Integer, nullable=False))

# 1: tables and columns before the version was stored (later columns are added in place on open);
# 2: + sequential_looks owned by the ledger, + schema_info. Opening an older ledger migrates it;
# a newer one (written by a later Windtunnel) is refused rather than misread.
SCHEMA_VERSION = 2

JSON_FIELDS = {"compute": "compute_json", "outputs": "outputs_json"}  # RunRow field -> its JSON column


def run_row(r: Any) -> RunRow:
    """The `RunRow` of a `runs` table row (JSON columns parsed)."""
    m = dict(r._mapping)
    return RunRow(
        campaign=m["campaign"], run_key=m["run_key"], run_id=m["run_id"], state=m["state"], order=m["order"],
        gpus=m["gpus"], spec_json=m["spec_json"], stage=m["stage"], reason=m["reason"], attempts=m["attempts"],
        submission_id=m["submission_id"], lease_owner=m["lease_owner"], lease_expires=m["lease_expires"],
        next_try_at=m["next_try_at"], failure_class=m["failure_class"], mlflow_run_id=m["mlflow_run_id"],
        compute=json.loads(m["compute_json"] or "{}"), outputs=json.loads(m["outputs_json"] or "{}"),
        updated_at=m["updated_at"], superseded_by=m.get("superseded_by", ""),
    )


def column_values(fields: dict[str, Any]) -> dict[str, Any]:
    """`RunRow` fields as `runs` column values (the JSON fields serialized into their columns)."""
    out = {}
    for k, v in fields.items():
        out[JSON_FIELDS.get(k, k)] = json.dumps(v, sort_keys=True, default=str) if k in JSON_FIELDS else v
    return out


def create_schema(engine: sa.Engine, url: str) -> None:
    """create_all plus added columns for a ledger made by an older version (ALTER TABLE ADD COLUMN)."""
    meta.create_all(engine)
    insp = sa.inspect(engine)
    for table in (campaigns_t, runs_t):
        have = {c["name"] for c in insp.get_columns(table.name)}
        for col in table.columns:
            if col.name in have:
                continue
            default = "''" if isinstance(col.type, sa.String) else "0"
            ddl = (f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {col.type.compile(engine.dialect)} '
                   f"NOT NULL DEFAULT {default}")
            with engine.begin() as c:
                c.exec_driver_sql(ddl)
    with engine.begin() as c:
        row = c.execute(sa.select(schema_t.c.value).where(schema_t.c.key == "version")).first()
        if row is not None and row[0] > SCHEMA_VERSION:
            raise LedgerError(f"ledger {url}: schema version {row[0]} was written by a newer Windtunnel "
                              f"(this one reads up to {SCHEMA_VERSION}); upgrade Windtunnel to open it")
        if row is None:
            c.execute(schema_t.insert().values(key="version", value=SCHEMA_VERSION))
        elif row[0] < SCHEMA_VERSION:
            c.execute(schema_t.update().where(schema_t.c.key == "version").values(value=SCHEMA_VERSION))


def new_instance_id() -> str:
    """A fresh `campaigns.instance_id` (submission ids carry it)."""
    return secrets.token_hex(4)
