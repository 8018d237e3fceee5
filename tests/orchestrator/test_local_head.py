"""The CLI's local Ray head: loopback Jobs API, private token, and nothing left running after stop."""

import json
import os
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest

from orchestrator.cluster.local_head import ensure_head, stop_head, token_file
from wtcommon.polling import wait_until


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


@pytest.mark.slow  # starts and stops a real Ray head: 15-20 s of both cores
def test_head_serves_jobs_on_loopback_and_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    work = tmp_path / "w"
    address = ensure_head(work)
    info = json.loads((work / "ray_head.json").read_text())
    gcs_port = info["gcs"].rsplit(":", 1)[-1]
    try:
        assert address.startswith("http://127.0.0.1:")
        assert stat.S_IMODE(os.stat(token_file(work)).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(info["temp_dir"]).st_mode) == 0o700  # Ray's sockets and logs: this user only
        assert ensure_head(work) == address  # a live head is reused, not started twice
        assert _processes_of(gcs_port, info["temp_dir"])  # the head is really running
    finally:
        stop_head(work)
    wait_until(lambda: not _processes_of(gcs_port, info["temp_dir"]), 15, 0.5)
    assert _processes_of(gcs_port, info["temp_dir"]) == []  # incl. the Ray Client server
    assert not (work / "ray_head.json").exists()
    assert Path(info["temp_dir"]).is_relative_to(work) or not Path(info["temp_dir"]).exists()  # no /tmp session left


def test_a_failed_start_leaves_no_daemon_and_is_tried_again(tmp_path: Path, monkeypatch) -> None:
    """A `ray start` that dies half way (as Ray does when the node times out on a loaded machine) has
    already spawned daemons: they are killed, and the start is tried once more before giving up."""
    import orchestrator.cluster.local_head as lh
    from orchestrator.engine.executor import ClusterUnreachable

    calls = tmp_path / "calls"
    fake = tmp_path / "fake_ray"
    # like `ray start`: leave a daemon that carries --temp-dir in its argv, then fail
    fake.write_text("#!/bin/sh\necho x >> " + str(calls) + "\n"
                    "for a in \"$@\"; do case $a in --temp-dir=*) T=${a#--temp-dir=};; esac; done\n"
                    f"nohup {sys.executable} -c 'import time; time.sleep(300)' \"--fake-gcs-temp-dir=$T\" >/dev/null "
                    "2>&1 &\n"
                    "echo 'The current node timed out during startup.' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(lh, "_ray_bin", lambda: str(fake))
    work = tmp_path / "w"
    with pytest.raises(ClusterUnreachable, match="timed out during startup"):
        ensure_head(work, timeout_s=20)
    assert len(calls.read_text().split()) == 2  # tried twice
    time.sleep(0.5)
    left = [c for c in _processes_of("0", str(lh._temp_dir(work.resolve()))) if "fake-gcs" in c]
    assert left == [] and not (work / "ray_head.json").exists()
    assert not lh._temp_dir(work.resolve()).exists()  # pytest's work dir is long: its /tmp temp dir is gone too
