"""Results while a campaign runs (issue 27): `submit` appends each finished run to
`results/<campaign>/records.parquet` atomically, so `compare` works mid-campaign and says how many runs are
still missing; the local head `submit` started is stopped when the campaign finishes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


@pytest.mark.slow
def test_compare_works_while_runs_are_still_training_and_the_head_stops_at_the_end(tmp_path: Path, tree: Path,
                                                                                   small_campaign) -> None:
    """Costs ~40 CPU-s (a local head and 6 noop runs of 4 s, one at a time; it was ~6 CPU-minutes of tiny-model
    training, which nothing here depends on: issue 36). Proves: the records file exists and is readable before
    the campaign ends; `compare` on it exits 0 while other runs are still queued or training, naming how many are
    missing; at the end the records hold every run, the head that `submit` started is stopped (no ray_head.json,
    no process left) and `campaign head status` says so."""
    wd = tmp_path / "wd"
    # simulated scores (a seed term shared by the policies of a seed, so the runs pair up), 4 s of training a run
    sim = {"base": 50.0, "effects": {"gfpo": 2.0}, "seed_sd": 2.0, "noise_sd": 0.5}
    (tree / "recipe" / "noop_sim.yaml").write_text(yaml.safe_dump({"name": "noop_sim", "sleep_s": 4, "simulate": sim}))
    camp = small_campaign("demo", recipe="noop_sim", policies=["baseline", "gfpo"], seeds=[1, 2, 3])
    sub = subprocess.Popen([CAMPAIGN, "submit", str(camp), "--workdir", str(wd), "--max-parallel", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    records = wd / "results" / "demo" / "records.parquet"
    mid = None
    try:
        deadline = time.time() + 1500
        while sub.poll() is None and time.time() < deadline:
            if records.exists():
                c = subprocess.run([CAMPAIGN, "compare", str(records)], capture_output=True, text=True, timeout=300)
                st = json.loads(subprocess.run([CAMPAIGN, "status", "demo", "--workdir", str(wd), "--json"],
                                               capture_output=True, text=True, timeout=120).stdout)
                if c.returncode == 0 and st["states"].get("recorded", 0) < 6:
                    mid = (c, st)
                    break
                assert c.returncode in (0, 2), c.stderr[-2000:]  # 2: no pair recorded yet (baselines first)
            time.sleep(3)
        out, err = sub.communicate(timeout=1500)
    finally:
        if sub.poll() is None:
            sub.kill()
    assert sub.returncode == 0, err[-3000:]
    assert mid is not None, "the campaign finished before compare could run on partial records"
    c, st = mid
    assert "partial records: " in c.stderr and " of 6 runs recorded so far" in c.stderr and "still missing" in c.stderr
    assert "gfpo" in c.stdout and "Δ mean" in c.stdout
    import pandas as pd

    assert pd.read_parquet(records)["run_id"].nunique() == 6
    assert "stopped the local Ray head this command started" in err
    assert not (wd / "ray_head.json").exists()
    h = subprocess.run([CAMPAIGN, "head", "status", "--workdir", str(wd), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert json.loads(h.stdout)["pids"] == {}
    done = subprocess.run([CAMPAIGN, "compare", str(records)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "partial records" not in done.stderr
