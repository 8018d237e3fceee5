"""The CLI's local Ray head: loopback Jobs API, private token, and nothing left running after stop."""

import json
import os
import stat
import time
from pathlib import Path

import psutil

from orchestrator.executor.local_head import ensure_head, stop_head, token_file


def _processes_of(gcs_port: str, temp_dir: str) -> list[str]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if temp_dir in cmd or (f":{gcs_port} " in cmd + " " and "ray" in cmd):
            found.append(cmd[:120])
    return found


def test_head_serves_jobs_on_loopback_and_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    work = tmp_path / "w"
    address = ensure_head(work)
    info = json.loads((work / "ray_head.json").read_text())
    gcs_port = info["gcs"].rsplit(":", 1)[-1]
    try:
        assert address.startswith("http://127.0.0.1:")
        assert stat.S_IMODE(os.stat(token_file(work)).st_mode) == 0o600
        assert ensure_head(work) == address  # a live head is reused, not started twice
        assert _processes_of(gcs_port, info["temp_dir"])  # the head is really running
    finally:
        stop_head(work)
    deadline = time.time() + 15
    while _processes_of(gcs_port, info["temp_dir"]) and time.time() < deadline:
        time.sleep(0.5)
    assert _processes_of(gcs_port, info["temp_dir"]) == []  # incl. the Ray Client server
    assert not (work / "ray_head.json").exists()
