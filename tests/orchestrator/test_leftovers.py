"""The leftover check the suite's end and `campaign demo` run (orchestrator/leftovers.py): it names a /dev/shm entry
and a live process that a session started and left, and ignores a process that does not carry the session's mark."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orchestrator.leftovers import SHM, Snapshot, mark_session

pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm on this machine")


def test_a_planted_segment_and_process_are_named_and_an_unmarked_process_is_not(monkeypatch):
    monkeypatch.delenv("WT_TEST_MARK", raising=False)
    before = Snapshot()
    marker = mark_session("WT_TEST_MARK")
    seg = SHM / f"wt-test-{uuid.uuid4().hex[:8]}"
    seg.write_bytes(b"x")
    # inherits the mark and outlives its parent (a child of this live process would go with it: not a leftover)
    ours = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time; "
                             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                             "print(p.pid, flush=True); os._exit(0)"], stdout=subprocess.PIPE, text=True)
    orphan = int(ours.stdout.readline())
    ours.wait()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # this process's own child
    theirs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={k: v for k, v in os.environ.items() if k != "WT_TEST_MARK"})
    try:
        found = before.leftovers(marker, grace_s=0.5)
        assert f"/dev/shm/{seg.name}" in found
        assert any(line.startswith(f"process {orphan}:") for line in found), found
        assert not any(line.startswith((f"process {theirs.pid}:", f"process {child.pid}:")) for line in found), found
    finally:
        for p in (child, theirs):
            p.kill()
            p.wait()
        os.kill(orphan, 9)
        seg.unlink()
    assert before.leftovers(marker, grace_s=0.5) == []
    assert marker == f"WT_TEST_MARK={os.environ['WT_TEST_MARK']}" and Path("/proc").is_dir()
