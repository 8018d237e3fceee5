"""The cluster a work directory's campaigns run on, remembered at `submit` for every later command.

Why: `resume`, `cancel`, `retry` and `logs` must talk to the same cluster as `submit` without the user
repeating `--ray-address` (and a read-only command must never start a local head just because the
address was not given). `<workdir>/cluster.json` (mode 0600) holds the address and the path of the
token file used to authenticate to it — never the token itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.engine.workdir import Workdir
from wtcommon.atomic import atomic_write_bytes


def save_cluster(workdir: Path, address: str, token_path: str | None) -> Path:
    """Record the cluster (atomic write, 0600)."""
    path = Workdir(workdir).cluster_file
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"address": address, "token_path": str(Path(token_path).resolve()) if token_path else None}
    atomic_write_bytes(path, json.dumps(body, indent=2).encode(), mode=0o600)
    return path


def load_cluster(workdir: Path) -> dict[str, Any] | None:
    """The recorded cluster, or None when the campaign ran on the work directory's own local head."""
    path = Workdir(workdir).cluster_file
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("address") else None
