"""Compute of a verl run across its launches (issue 24, Build 4): real `launches.jsonl` and per-launch metrics
files as the launcher writes them; killed launches counted, and reported again as lost work."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from training import launches

SEQS = 16.0  # data.train_batch_size 4 × rollout.n 4, as verl_cpu_tiny


def _metrics(train: Path, name: str, rows: list[tuple[int, float, float]], mtime: float | None = None) -> Path:
    """verl's file-logger lines: (step, response_length/mean, windtunnel/update_tokens)."""
    folder = train / "verl_metrics"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps({"step": s, "data": {"response_length/mean": rl, "windtunnel/update_tokens": ut,
                                                             "actor/grad_norm": 0.1}}) + "\n" for s, rl, ut in rows))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_killed_and_resumed_run_counts_both_launches_and_the_killed_one_as_lost(tmp_path: Path) -> None:
    """Launch 0 logged steps 1-2 (checkpoint at 1) and was SIGKILLed with its launcher: no end line, so its end
    is its metrics file's mtime. Launch 1 resumed from step 1, redid step 2, did step 3 and exited 0."""
    t0 = 1_000_000.0
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0), (2, 10.0, 60.0)], mtime=t0 + 70.0)
    launches.record_start(tmp_path, m0, t0)
    m1 = _metrics(tmp_path, "launch_001.jsonl", [(2, 12.0, 64.0), (3, 6.0, 50.0)])
    launches.record_start(tmp_path, m1, t0 + 100.0)
    launches.record_end(tmp_path, m1, 0, t=t0 + 150.0)

    la = launches.read_launches(tmp_path)
    assert [(x.name, x.rc, x.end_from, x.wall_s) for x in la] == [
        ("launch_000.jsonl", None, "metrics_mtime", 70.0), ("launch_001.jsonl", 0, "exit", 50.0)]
    c = launches.compute_account(tmp_path, n_gpus=8, seqs_per_step=SEQS)
    assert c["wall_s"] == 120.0 and c["gpu_s"] == 960.0  # both launches, not the last one's 50 s
    assert c["lost_wall_s"] == 70.0 and c["lost_gpu_s"] == 560.0
    assert c["launches"] == 2 and c["killed_launches"] == 1
    # every step each launch logged was rolled out and updated, step 2 twice; launch 0's step 2 is lost work
    assert c["rollout_tokens"] == (8 + 10 + 12 + 6) * SEQS and c["lost_rollout_tokens"] == 10 * SEQS
    assert c["update_tokens"] == 100 + 60 + 64 + 50 and c["lost_update_tokens"] == 60


def test_an_orphan_stopped_by_the_next_attempt_ends_when_it_was_stopped(tmp_path: Path) -> None:
    t0 = 2_000_000.0
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0)], mtime=t0 + 30.0)
    launches.record_start(tmp_path, m0, t0)
    assert launches.unfinished(tmp_path) == ["launch_000.jsonl"]
    launches.record_end(tmp_path, m0, None, how="stopped", t=t0 + 400.0)  # it trained on after its last line
    assert launches.unfinished(tmp_path) == []
    (la,) = launches.read_launches(tmp_path)
    assert (la.wall_s, la.end_from, la.lost) == (400.0, "stopped", True)


def test_a_launch_killed_before_its_first_step_costs_its_time_and_has_no_tokens(tmp_path: Path) -> None:
    t0 = 3_000_000.0
    m0 = _metrics(tmp_path, "launch_000.jsonl", [], mtime=t0 + 45.0)  # verl opened its file, then was killed
    launches.record_start(tmp_path, m0, t0)
    c = launches.compute_account(tmp_path, n_gpus=1, seqs_per_step=SEQS)
    assert c["wall_s"] == c["lost_wall_s"] == 45.0 and c["killed_launches"] == 1
    assert math.isnan(c["rollout_tokens"]) and math.isnan(c["update_tokens"])  # unknown, never 0


def test_a_failed_launch_is_lost_work_and_a_line_torn_by_a_kill_is_ignored(tmp_path: Path) -> None:
    t0 = 4_000_000.0
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0)])
    launches.record_start(tmp_path, m0, t0)
    launches.record_end(tmp_path, m0, 1, t=t0 + 20.0)
    m1 = _metrics(tmp_path, "launch_001.jsonl", [(1, 8.0, 100.0)])
    launches.record_start(tmp_path, m1, t0 + 30.0)
    launches.record_end(tmp_path, m1, 0, t=t0 + 60.0)
    with open(tmp_path / launches.LAUNCHES_FILE, "a") as f:
        f.write('{"event": "end", "launch": "launch_0')  # a writer killed mid-line
    c = launches.compute_account(tmp_path, n_gpus=1, seqs_per_step=SEQS)
    assert (c["wall_s"], c["lost_wall_s"], c["launches"], c["killed_launches"]) == (50.0, 20.0, 2, 0)
    assert c["update_tokens"] == 200 and c["lost_update_tokens"] == 100


def test_the_start_line_survives_a_launcher_killed_right_after_it(tmp_path: Path) -> None:
    """A real launcher process records its start, then is SIGKILLed (never reaching its end line):
    the launch is still counted, its end estimated from its metrics file."""
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0)])
    code = ("import sys, time\nfrom pathlib import Path\nfrom training import launches\n"
            f"launches.record_start(Path({str(tmp_path)!r}), Path({str(m0)!r}))\n"
            "print('started', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0), (2, 8.0, 100.0)])  # the orphaned verl logged on
    (la,) = launches.read_launches(tmp_path)
    assert la.rc is None and la.end_from == "metrics_mtime"
    assert la.end == pytest.approx((tmp_path / "verl_metrics" / "launch_000.jsonl").stat().st_mtime)
    assert launches.compute_account(tmp_path, 1, SEQS)["killed_launches"] == 1


def test_a_verl_run_splits_its_compute_as_the_local_backend_does(tmp_path: Path) -> None:
    """Issue 50: the base model's build (each attempt's `build` line), the training launches and the checkpoint
    merge apart, wall and CPU; a launch killed with its launcher has no CPU time (counted as unmeasured)."""
    t0 = 5_000_000.0
    launches.record_phase(tmp_path, "build", 90.0, 85.0)  # the attempt that found the cache cold built it
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0)], mtime=t0 + 40.0)
    launches.record_start(tmp_path, m0, t0)  # killed with its launcher: no end line, no CPU
    launches.record_phase(tmp_path, "build", 0.2, 0.1)  # the retry found it cached
    m1 = _metrics(tmp_path, "launch_001.jsonl", [(1, 8.0, 100.0), (2, 8.0, 100.0)])
    launches.record_start(tmp_path, m1, t0 + 100.0)
    launches.record_end(tmp_path, m1, 0, t=t0 + 160.0, cpu_s=300.0)
    launches.record_phase(tmp_path, "merge", 12.0, 10.0)
    c = launches.compute_account(tmp_path, n_gpus=2, seqs_per_step=SEQS)
    assert c["build_s"] == pytest.approx(90.2) and c["build_cpu_s"] == pytest.approx(85.1)
    assert c["train_wall_s"] == c["wall_s"] == 100.0 and c["gpu_s"] == 200.0  # the launches alone, as before
    assert c["train_cpu_s"] == 300.0 and c["unmeasured_cpu_launches"] == 1
    assert (c["merge_s"], c["merge_cpu_s"]) == (12.0, 10.0)
    assert c["cpu_s"] == pytest.approx(85.1 + 300.0 + 10.0)
    assert [la.cpu_s for la in launches.read_launches(tmp_path)] == [None, 300.0]

    from analysis.intervention import build_note_html, run_summary

    run = {"run_key": "k", "run_id": "c/m/baseline/s1", "campaign": "c", "model": "m", "regime": "",
           "policy": "baseline", "mechanism": "none", "seed": 1, "metrics_path": None, "compute": c}
    note = build_note_html(run_summary([run]))  # the report names the verl run's build once, as a local one's
    assert "90.2 s wall" in note and "85.1 CPU-s" in note and "c/m/baseline/s1" in note


def test_a_run_without_build_lines_has_an_unknown_build_and_timed_counts_reaped_children(tmp_path: Path) -> None:
    m0 = _metrics(tmp_path, "launch_000.jsonl", [(1, 8.0, 100.0)])
    launches.record_start(tmp_path, m0, 1.0)
    launches.record_end(tmp_path, m0, 0, t=11.0)  # recorded before the split existed: no cpu_s, no build line
    c = launches.compute_account(tmp_path, 1, SEQS)
    assert math.isnan(c["build_s"]) and math.isnan(c["build_cpu_s"]) and c["merge_s"] == 0.0
    assert c["train_wall_s"] == 10.0 and c["unmeasured_cpu_launches"] == 1
    with launches.timed(tmp_path, "merge"):  # a child that burns CPU, reaped inside the block
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass"], check=True)
    lines = [json.loads(x) for x in (tmp_path / launches.LAUNCHES_FILE).read_text().splitlines()]
    (line,) = [ln for ln in lines if ln.get("event") == "merge"]
    assert line["cpu_s"] >= 0.25 and line["wall_s"] >= line["cpu_s"] - 0.05
