"""A SIGKILL storm over noop campaigns, each in its own work dir with its own local Ray head: orchestrators
(`campaign submit|resume`) and stage processes (`python -m orchestrator.engine.stages`) are killed at random moments,
some orchestrator kills right after the work dir's head was stopped, so they land while `ray start` runs.
Then every campaign is resumed to the end without kills and audited:

  lost                     runs neither recorded nor failed at the retry cap, or recorded without records
  recorded twice           a run with more than one MLflow run, or more records rows than its benchmarks
  duplicate completions    a (run, stage) with more than one succeeded attempt
  leaked heads             GCS servers beyond one per work dir before `campaign head stop`, any after it

Usage: python benchmarks/kill_storm.py [--campaigns 3] [--seeds 2] [--driver-kills 40] [--stage-kills 10]
[--seed 29]. Costs about 20-25 min of a loaded 2-core machine with the defaults (3 × 8 runs, 50 kills).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.cluster.local_head import read_state  # noqa: E402
from orchestrator.engine.workdir import LEDGER_FILE  # noqa: E402

CAMPAIGN = str(Path(sys.executable).with_name("campaign"))
POLICIES = ["baseline", "gfpo", "static", "reward_gap"]
ENV = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "RAY_AUTH_MODE")}


def make_tree(root: Path, n: int, seeds: int, max_attempts: int) -> list[Path]:
    """campaigns/ with the repo's policies, a stub model and a noop recipe; `n` campaigns of 4 × `seeds` runs."""
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir(parents=True)
    (root / "model" / "m0.yaml").write_text(yaml.safe_dump({"name": "m0", "path": "hf/m0"}))
    (root / "recipe").mkdir()
    (root / "recipe" / "noop.yaml").write_text(yaml.safe_dump({"name": "noop", "sleep_s": 3, "eval_sleep_s": 2}))
    out = []
    for i in range(n):
        spec = {"name": f"storm{i}", "backend": "noop", "models": ["m0"], "recipe": "noop", "steps": 2,
                "policies": POLICIES, "seeds": list(range(1, seeds + 1)),
                "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01},
                "retries": {"max_attempts": max_attempts, "backoff_s": 0.5, "backoff_max_s": 2}}
        p = root / f"storm{i}.yaml"
        p.write_text(yaml.safe_dump(spec, sort_keys=False))
        out.append(p)
    return out


def gcs_servers(tmp: str) -> list[int]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[0].endswith("gcs_server") and any(tmp + "/" in a for a in cmd):
            found.append(p.info["pid"])
    return found


def stage_processes(wd: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "orchestrator.engine.stages" in cmd and str(wd) in cmd:
            found.append(p)
    return found


def db(path: Path, q: str) -> list[tuple]:
    """Read-only: never creates a ledger file the orchestrator has not written yet."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return c.execute(q).fetchall()


class Storm:
    def __init__(self, specs: list[Path], base: Path, rng: random.Random):
        self.specs, self.rng = specs, rng
        self.wds = [base / f"w{i}" for i in range(len(specs))]
        self.drivers: list[subprocess.Popen | None] = [None] * len(specs)
        self.started = [False] * len(specs)
        self.kills = {"driver": 0, "driver during head start": 0, "stage": 0}
        self.exits: list[int] = []  # exit codes of drivers that ended by themselves during the storm
        self.killed: set[int] = set()  # PIDs of the drivers we killed
        self.takeover_s: list[float] = []  # driver start -> its lease taken (after a killed one)

    def name(self, i: int) -> str:
        return self.specs[i].stem

    def driver(self, i: int, *, timed: bool = True) -> subprocess.Popen:
        """The campaign's running orchestrator: `submit` the first time, `resume` after a kill; `timed`: wait
        until it holds the driver lease (how long a takeover takes), so a kill lands while it drives."""
        p = self.drivers[i]
        if p is not None and p.poll() is None:
            return p
        if p is not None and p.pid not in self.killed:
            self.exits.append(p.returncode)
        self.started[i] = self.started[i] or self.registered(i)
        cmd = [CAMPAIGN, "resume", self.name(i)] if self.started[i] else [CAMPAIGN, "submit", str(self.specs[i])]
        p = subprocess.Popen([*cmd, "--workdir", str(self.wds[i]), "--max-parallel", "3"], env=ENV, cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.drivers[i] = p
        if timed:
            self._time_takeover(i, p)
        return p

    def registered(self, i: int) -> bool:
        """Whether the campaign is in its work dir's ledger (then `resume`, else `submit` again)."""
        try:
            q = f"select count(*) from runs where campaign='{self.name(i)}'"
            return bool(db(self.wds[i] / LEDGER_FILE, q)[0][0])
        except sqlite3.Error:
            return False

    def _time_takeover(self, i: int, p: subprocess.Popen) -> None:
        t0 = time.time()
        host = os.uname().nodename
        while time.time() - t0 < 300 and p.poll() is None:
            try:
                if db(self.wds[i] / LEDGER_FILE, f"select driver from campaigns where name='{self.name(i)}'") == [
                        (f"{host}:{p.pid}",)]:
                    self.takeover_s.append(time.time() - t0)
                    return
            except sqlite3.Error:
                pass
            time.sleep(0.1)

    def pending(self, i: int) -> bool:
        try:
            return bool(db(self.wds[i] / LEDGER_FILE, f"select count(*) from runs where campaign='{self.name(i)}' and "
                           "superseded_by='' and state not in ('recorded','failed','cancelled')")[0][0])
        except sqlite3.Error:
            return True

    def kill_driver(self, i: int, *, during_head_start: bool) -> None:
        if during_head_start:  # the next driver has to start the head: kill it while `ray start` runs
            old = self.drivers[i]
            if old is not None and old.poll() is None:
                old.send_signal(signal.SIGKILL)
                old.wait()
                self.killed.add(old.pid)
                self.kills["driver"] += 1
            subprocess.run([CAMPAIGN, "head", "stop", "--workdir", str(self.wds[i])], env=ENV, cwd=REPO,
                           capture_output=True, timeout=120)
        p = self.driver(i, timed=not during_head_start)
        deadline = time.time() + (120 if during_head_start else self.rng.uniform(0.5, 8.0))
        while time.time() < deadline and p.poll() is None:
            st = read_state(self.wds[i])
            if during_head_start and st and st.get("state") == "starting" and gcs_servers(st["temp_dir"]):
                time.sleep(self.rng.uniform(0.0, 8.0))  # somewhere in `ray start`, its GCS server up
                break
            time.sleep(0.1)
        if p.poll() is None:
            st = read_state(self.wds[i])
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.killed.add(p.pid)
            self.kills["driver"] += 1
            if st and st.get("state") == "starting":
                self.kills["driver during head start"] += 1

    def kill_stage(self, i: int) -> bool:
        self.driver(i)
        deadline = time.time() + 60
        while time.time() < deadline:
            procs = stage_processes(self.wds[i])
            if procs:
                time.sleep(self.rng.uniform(0.0, 2.0))
                victim = self.rng.choice(procs)
                try:
                    victim.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    continue
                self.kills["stage"] += 1
                return True
            time.sleep(0.2)
        return False


def audit(storm: Storm, i: int) -> dict[str, int]:
    wd, name = storm.wds[i], storm.name(i)
    ledger = wd / LEDGER_FILE
    runs = db(ledger, f"select run_key, run_id, state, reason from runs where campaign='{name}' and superseded_by=''")
    recorded = {k for k, _, s, _ in runs if s == "recorded"}
    capped = {k for k, _, s, r in runs if s == "failed" and "retry cap" in r}
    rec_path = wd / "results" / name / "records.parquet"
    per_run: dict[str, int] = {}
    if rec_path.exists():
        import pandas as pd

        per_run = pd.read_parquet(rec_path).groupby("run_id").size().to_dict()
    ids = {k: rid for k, rid, _, _ in runs}
    benchmarks = max(per_run.values(), default=0)
    lost = len([k for k, _, s, _ in runs if k not in recorded and k not in capped])
    lost += len([k for k in recorded if per_run.get(ids[k], 0) == 0])
    with sqlite3.connect(wd / "mlflow.db") as c:
        ml = c.execute("select t.value, count(*) from runs r join tags t on t.run_uuid = r.run_uuid and t.key = "
                       "'windtunnel.run_key' join experiments e on e.experiment_id = r.experiment_id where e.name = ? "
                       "group by 1", (name,)).fetchall()
    twice = len([k for k, n in ml if n > 1]) + len([r for r, n in per_run.items() if n > benchmarks])
    succ = db(ledger, f"select run_key, stage, count(*) from attempts where campaign='{name}' and status='succeeded' "
                      "group by 1, 2")
    dup = len([1 for _, _, n in succ if n > 1])
    return {"runs": len(runs), "recorded": len(recorded), "failed (retry cap)": len(capped), "lost": lost,
            "recorded twice": twice, "duplicate completions": dup, "mlflow runs": sum(n for _, n in ml)}


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaigns", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=2, help="seeds per campaign (runs = 4 policies × seeds)")
    ap.add_argument("--driver-kills", type=int, default=40)
    ap.add_argument("--stage-kills", type=int, default=10)
    ap.add_argument("--head-start-kills", type=int, default=6, help="of the driver kills, how many right after "
                    "`campaign head stop` (so they land while the head starts)")
    ap.add_argument("--max-attempts", type=int, default=5)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--keep", action="store_true", help="keep the work dirs (printed)")
    return ap.parse_args()


def main() -> int:
    a = _args()
    rng = random.Random(a.seed)
    base = Path(tempfile.mkdtemp(prefix="wt-storm-"))
    specs = make_tree(base / "campaigns", a.campaigns, a.seeds, a.max_attempts)
    storm = Storm(specs, base, rng)
    want = {"driver": a.driver_kills - a.head_start_kills, "head": a.head_start_kills, "stage": a.stage_kills}
    t0 = time.time()
    skipped = 0
    try:
        # until every kind has its kills (a driver that finished first, or no stage running, is not a kill)
        while (done := {"driver": storm.kills["driver"] - storm.kills["driver during head start"],
                        "head": storm.kills["driver during head start"], "stage": storm.kills["stage"]}) != want:
            live = [i for i in range(len(specs)) if storm.pending(i)]
            left = [k for k in want for _ in range(max(0, want[k] - done[k]))]
            if not live or not left:
                break
            kind, i = rng.choice(left), rng.choice(live)
            if kind == "stage":
                skipped += int(not storm.kill_stage(i))
            else:
                storm.kill_driver(i, during_head_start=kind == "head")
            n = storm.kills["driver"] + storm.kills["stage"]
            print(f"\r{n}/{a.driver_kills + a.stage_kills} kills, {time.time() - t0:.0f} s", end="", file=sys.stderr,
                  flush=True)
        print(file=sys.stderr)
        finals = []
        for i in range(len(specs)):
            last = storm.drivers[i]
            if last is not None and last.poll() is None:
                last.wait(timeout=900)
            cmd = [CAMPAIGN, "resume", storm.name(i)] if storm.registered(i) else [CAMPAIGN, "submit", str(specs[i])]
            finals.append(subprocess.run([*cmd, "--workdir", str(storm.wds[i])], env=ENV, cwd=REPO,
                                         capture_output=True, text=True, timeout=900))
        states = [read_state(w) for w in storm.wds]
        temps = {str(st["temp_dir"]) for st in states if st}
        heads_before = [len(gcs_servers(str(st["temp_dir"]))) if st else 0 for st in states]
        results = [audit(storm, i) for i in range(len(specs))]
    finally:
        for i, w in enumerate(storm.wds):
            p = storm.drivers[i]
            if p is not None and p.poll() is None:
                p.kill()
            subprocess.run([CAMPAIGN, "head", "stop", "--workdir", str(w)], env=ENV, cwd=REPO, capture_output=True,
                           timeout=120)
    heads_after = sum(len(gcs_servers(t)) for t in temps)
    total = {k: sum(r[k] for r in results) for k in results[0]}
    leaked = sum(max(0, h - 1) for h in heads_before) + heads_after
    bad = _print_table(a, storm, specs, results, total, leaked, finals, skipped, time.time() - t0)
    if a.keep:
        print(f"work dirs kept under {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if bad or any(f.returncode not in (0, 1) for f in finals) else 0


def _print_table(a, storm, specs, results, total, leaked, finals, skipped, wall) -> int:
    """The table, the ratio and the JSON line; returns the defect count."""
    rows = [("campaigns × runs", f"{len(specs)} × {results[0]['runs']}"),
            ("kills: orchestrator / of them during head start / stage",
             f"{storm.kills['driver']} / {storm.kills['driver during head start']} / {storm.kills['stage']}"),
            ("runs recorded / failed at the retry cap", f"{total['recorded']} / {total['failed (retry cap)']}"),
            ("lost", str(total["lost"])),
            ("recorded twice", str(total["recorded twice"])),
            ("duplicate stage completions", str(total["duplicate completions"])),
            ("leaked heads (extra GCS servers before stop + any after)", str(leaked)),
            ("final resume exit codes", " ".join(str(f.returncode) for f in finals)),
            ("driver start -> lease held, s: median / max (CLI start-up incl.)",
             f"{statistics.median(storm.takeover_s):.1f} / {max(storm.takeover_s):.1f}" if storm.takeover_s else "-"),
            ("stage kills with no stage running (skipped)", str(skipped)),
            ("drivers that ended by themselves: exit codes", " ".join(map(str, sorted(storm.exits))) or "-"),
            ("wall time", f"{wall:.0f} s")]
    width = max(len(k) for k, _ in rows)
    print(f"{'kill storm (seed ' + str(a.seed) + ')':<{width}}  value")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    kills = storm.kills["driver"] + storm.kills["stage"]
    bad = total["lost"] + total["recorded twice"] + total["duplicate completions"] + leaked
    print(f"ratio: defects / kills = {bad} / {kills}")
    print(json.dumps({"kills": kills, **total, "leaked_heads": leaked}), file=sys.stderr)
    return bad


if __name__ == "__main__":
    sys.exit(main())
