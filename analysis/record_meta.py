"""What a campaign writes into the Parquet metadata of the records it collects (`Session.collect_records`): how
many runs the campaign has and how many the file holds (a file written before the last run finished is partial),
and the campaign's own `baselines:` where they differ from the defaults. Readers get None for any other file."""

from __future__ import annotations

import json
from pathlib import Path


# Parquet metadata `campaign` writes on the records it collects while a campaign runs: how many runs the campaign
# has and how many of them these records hold (a file written before the last run finished is partial).
RUNS_EXPECTED_KEY = b"windtunnel.runs_expected"
RUNS_RECORDED_KEY = b"windtunnel.runs_recorded"
# the campaign's `baselines:` (JSON), written only where they differ from the defaults (analysis.schema.references)
BASELINES_KEY = b"windtunnel.baselines"


def records_baselines(path: str | Path) -> dict[str, str] | None:
    """The `baselines:` (mechanism -> reference policy) of the campaign that collected a Parquet records file,
    or None (defaults, another file)."""
    p = Path(path)
    if p.suffix.lower() not in (".parquet", ".pq") or not p.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(p).metadata or {}).get(BASELINES_KEY)
        got = json.loads(raw) if raw else None
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else None


def records_completeness(path: str | Path) -> tuple[int, int] | None:
    """(runs recorded, runs the campaign has) of a records file a campaign collected, or None (another file)."""
    p = Path(path)
    if p.suffix.lower() not in (".parquet", ".pq") or not p.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(p).metadata or {}
    except (OSError, ValueError):
        return None
    if RUNS_EXPECTED_KEY not in meta or RUNS_RECORDED_KEY not in meta:
        return None
    return int(meta[RUNS_RECORDED_KEY]), int(meta[RUNS_EXPECTED_KEY])
