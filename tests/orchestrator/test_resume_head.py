"""`campaign resume` stops the local Ray head it started when it finishes, as `submit` does (issue 27 item 4)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest


@pytest.mark.slow
def test_resume_stops_the_local_head_it_started(tree: Path, helpers, tmp_path: Path) -> None:
    """Costs ~1 CPU-minute (a local Ray head and 8 noop runs of 0.5 s). Proves: a campaign registered with
    `submit --no-wait` (no head started) and driven by `resume` ends with the head `resume` started stopped: no
    ray_head.json, no process left, and `resume` says so."""
    wd = tmp_path / "wd"
    camp = str(tree / "small.yaml")
    sub = subprocess.run([*helpers.campaign, "submit", camp, "--workdir", str(wd), "--no-wait"], capture_output=True,
                         text=True, timeout=600)
    assert sub.returncode == 0, sub.stderr[-3000:]
    assert not (wd / "ray_head.json").exists()  # registering starts no head
    res = subprocess.run([*helpers.campaign, "resume", "small", "--workdir", str(wd)], capture_output=True, text=True,
                         timeout=1200)
    try:
        assert res.returncode == 0, res.stderr[-3000:]
        assert "stopped the local Ray head this command started" in res.stderr
        assert not (wd / "ray_head.json").exists()
        h = subprocess.run([*helpers.campaign, "head", "status", "--workdir", str(wd), "--json"], capture_output=True,
                           text=True, timeout=120)
        assert json.loads(h.stdout)["pids"] == {}
        st = json.loads(subprocess.run([*helpers.campaign, "status", "small", "--workdir", str(wd), "--json"],
                                       capture_output=True, text=True, timeout=120).stdout)
        assert st["states"] == {"recorded": 8}
    finally:  # never leave a head behind, whatever failed
        subprocess.run([*helpers.campaign, "head", "stop", "--workdir", str(wd)], capture_output=True, timeout=120)
