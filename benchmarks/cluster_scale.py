"""The paper program (campaigns/paper, 591 runs) through real Ray Jobs on a local multi-node cluster.

A cluster of `--nodes` × `--gpus-per-node` logical GPUs is built on this machine (orchestrator.engine.executor.
local_cluster: one `ray start` per node, own ports and temp dir, token auth); the campaign runs with the noop
backend, each run's training sleeping its planned wall hours compressed (`--seconds-per-hour`, default 1 h → 1 s)
and its evaluation EVAL_H hours (as benchmarks/scheduler_sim.py), driven by the real orchestrator
(`orchestrator.campaign.drive`: scheduler, SQLite ledger, MLflow tracking, records collected). `--fraction`
keeps every k-th run of the plan (the model mix kept) when the whole program does not fit the machine's time.

Prints: runs recorded (each stage executed exactly once), makespan / lower bound (lower bound =
max(Σ GPU-seconds / cluster GPUs, longest run); the simulated figure, without Ray, is 1.031), orchestrator CPU
seconds per run, ledger size, driver peak RSS, the p95 delay from a run's job submission to its stage starting
and from its training's end to its evaluation starting, and the two-node runs: planned, refused at preflight,
recorded, and seen placed on two nodes (Ray placement groups whose bundles span ≥ 2 nodes, sampled every 5 s).
Then where each stage's start went (orchestrator/engine/start_latency.py): per stage and as p50/p95 over
stages, the parts from the scheduler's decision to Ray accepting the job (ours), to Ray's job supervisor
launching the entrypoint and the process existing (Ray's), to the first line of Windtunnel code, its imports
done and the stage code begun (ours), and the stage's own preparation before its backend starts; the ratio of
ours to Ray's.

    .venv/bin/python benchmarks/cluster_scale.py --nodes 4 --gpus-per-node 8 --fraction 0.1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.engine import start_latency  # noqa: E402 - after the repo is on sys.path

EVAL_H = 0.3  # hours of one GPU per run's evaluation, as benchmarks/scheduler_sim.py


def _p95(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


class PlacementSampler(threading.Thread):
    """Every `every_s`, Ray's placement groups (dashboard state API): the ids of those whose bundles sit on ≥ 2
    distinct nodes. Its own CPU time is kept apart from the orchestrator's."""

    def __init__(self, address: str, token: str, every_s: float = 5.0):
        super().__init__(daemon=True)
        self.address, self.token, self.every_s = address, token, every_s
        self.spanning: set[str] = set()
        self.seen: set[str] = set()
        self.cpu_s = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        import requests

        while not self._halt.wait(self.every_s):
            t0 = time.thread_time()
            try:
                r = requests.get(f"{self.address}/api/v0/placement_groups", params={"detail": "1", "limit": "10000"},
                                 headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
                for pg in r.json().get("data", {}).get("result", {}).get("result", []):
                    self.seen.add(pg["placement_group_id"])
                    nodes = {b.get("node_id") for b in pg.get("bundles") or [] if b.get("node_id")}
                    if len(nodes) >= 2:
                        self.spanning.add(pg["placement_group_id"])
            except Exception:  # a sample missed on a loaded machine; the next one counts
                pass
            self.cpu_s += time.thread_time() - t0

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)


def _time_submits(executor) -> dict[str, float]:
    """Wrap `executor.submit` to note when each call returns (by submission id): the scheduler blocks on it."""
    returned: dict[str, float] = {}
    submit_fn = executor.submit

    def timed(sid, argv, **kw):
        try:
            return submit_fn(sid, argv, **kw)
        finally:
            returned[sid] = time.time()

    executor.submit = timed
    return returned


def _print_breakdown(breakdown: list[tuple[str, str, dict[str, float]]], submit_call: list[float]) -> None:
    """Per stage, then p50/p95 over stages, where its start went (engine/start_latency.py: marks and whose)."""
    names = [name for name, *_ in start_latency.CHAIN]
    whose = {name: w for name, _, _, w in start_latency.CHAIN}
    print("\nwhere a stage's start went (s; decision = the ledger attempt's start, Ray accepted = Ray's job "
          "start_time; orchestrator.engine.start_latency):")
    print("  " + "  ".join(f"{i + 1}={n} [{whose[n]}]" for i, n in enumerate(names)))
    print(f"  {'run':<8} {'stage':<8} " + " ".join(f"{i + 1:>6}" for i in range(len(names)))
          + " " + " ".join(f"{w:>6}" for w in start_latency.WHOSE) + f" {'total':>6}")
    for key, stage, p in breakdown:
        sh = start_latency.shares(p)
        print(f"  {key[:8]:<8} {stage:<8} " + " ".join(f"{p[n]:6.2f}" for n in names) + " "
              + " ".join(f"{sh[w]:6.2f}" for w in start_latency.WHOSE) + f" {sum(sh.values()):6.2f}")
    summ = start_latency.summarise([p for *_, p in breakdown])
    if not summ:
        print("  (no stage recorded its start)")
        return
    for q, label in ((0, "p50"), (1, "p95")):
        print(f"  {label:<17} " + " ".join(f"{summ[n][q]:6.2f}" for n in names) + " "
              + " ".join(f"{summ[w][q]:6.2f}" for w in start_latency.WHOSE) + f" {summ['total'][q]:6.2f}")
    print(f"  (n={len(breakdown)} stages; each column's own p50/p95 over stages, so the columns need not sum)")
    ours, ray = summ["ours"], summ["ray"]
    print(f"p95 start-up, ours (1, 4-6) = {ours[1]:.2f} s; Ray's (2-3) = {ray[1]:.2f} s; ratio ours/Ray's = "
          f"{ours[1] / max(ray[1], 1e-9):.2f} (p50: {ours[0]:.2f} / {ray[0]:.2f} s = "
          f"{ours[0] / max(ray[0], 1e-9):.2f}); "
          f"the stage's own preparation (7): p95 {summ['stage'][1]:.2f} s")
    if submit_call:
        print(f"submit call (decision → the call returns, the scheduler blocked): p50 "
              f"{_pct(submit_call, 50):.2f} s, p95 {_pct(submit_call, 95):.2f} s")


def _pct(xs: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(xs, q))


def _cluster_rss_mb(cluster) -> float:
    """Resident memory of every process of the cluster's nodes (shared pages counted once per process)."""
    import psutil

    from orchestrator.cluster.local_cluster import _processes_of, _with_children

    total = 0
    for node in cluster.nodes:
        for pid, _ in _with_children(_processes_of(node.temp_dir)):
            try:
                total += psutil.Process(int(pid)).memory_info().rss
            except psutil.NoSuchProcess:
                continue
    return total / 1e6


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--cpus-per-node", type=int, default=8, help="logical CPUs per node (stage jobs take 1 each)")
    ap.add_argument("--fraction", type=float, default=0.05,
                    help="keep every round(1/F)-th run of the plan (1: all 591; 0.05 fits `make bench` on 2 cores)")
    ap.add_argument("--seconds-per-hour", type=float, default=1.0, help="compression of the plan's wall hours")
    ap.add_argument("--no-track", action="store_true", help="drive without MLflow (default: as `campaign submit`)")
    return ap.parse_args()


def _plan(a: argparse.Namespace):
    """Every round(1/F)-th run of the paper program on the noop backend, its hours compressed, the compute set to
    the cluster; two-node runs left out (and listed) when preflight refuses them."""
    from orchestrator.preflight import Context, PreflightError, preflight
    from orchestrator.session import plan

    spec, runs = plan(REPO / "campaigns" / "paper", ["backend=noop"])
    step = max(1, round(1 / a.fraction))
    runs = runs[::step]
    s = a.seconds_per_hour
    runs = [dataclasses.replace(r, recipe_cfg={**r.recipe_cfg.raw, "sleep_s": round(r.est_hours * s, 3),
                                               "eval_sleep_s": round(EVAL_H * s, 3)}) for r in runs]
    spec = spec.model_copy(update={"compute": spec.compute.model_copy(
        update={"nodes": a.nodes, "gpus_per_node": a.gpus_per_node})})
    two_node = [r for r in runs if r.nnodes >= 2]
    refused: list[str] = []
    try:
        preflight(spec, runs, Context(data_dir=None, local_cpus=None))
    except PreflightError as exc:
        refused = exc.problems
        runs = [r for r in runs if r.nnodes < 2]
        preflight(spec, runs, Context(data_dir=None, local_cpus=None))  # anything else refused: stop here
    return spec, runs, step, two_node, refused


def _latencies(sess, spec, runs, wd: Path, returned: dict[str, float]):
    """Per stage, from the run dirs' execution logs and the ledger's attempts: submit → stage start, train end →
    evaluate start, stages run twice, the start-latency parts and the submit-call durations."""
    accepted = {j.submission_id: j.start_time / 1000 for j in sess.executor.client.list_jobs()
                if j.submission_id and j.start_time}
    sub_delay, eval_delay, twice = [], [], 0
    breakdown: list[tuple[str, str, dict[str, float]]] = []  # (run key, stage, parts)
    submit_call: list[float] = []
    for r in sess.ledger.runs(spec.name):
        rd = wd / "runs" / spec.name / r.run_key
        log = rd / "executions.log"
        starts: dict[str, list[float]] = {}
        by_pid: dict[int, float] = {}
        for line in (log.read_text().splitlines() if log.exists() else []):
            stage, pid, ts = line.split()
            starts.setdefault(stage, []).append(float(ts))
            by_pid[int(pid)] = float(ts)
        twice += sum(len(v) > 1 for v in starts.values())
        marks_of = {m.get("attempt"): m for m in start_latency.read_log(rd)}
        for att in sess.ledger.attempts(spec.name, r.run_key):
            if att.stage in starts:
                sub_delay.append(starts[att.stage][-1] - att.started_at)
            sid = att.submission_id
            m = marks_of.get(sid, {})
            p = start_latency.parts({**m, "decided": att.started_at, "accepted": accepted.get(sid),
                                     "stage": by_pid.get(m.get("pid", -1))})
            if p is not None:
                breakdown.append((r.run_key, att.stage, p))
            if sid in returned:
                submit_call.append(returned[sid] - att.started_at)
        if "train" in starts and "evaluate" in starts:
            sleep = float(next(x for x in runs if x.run_key == r.run_key).recipe_cfg.sleep_s)
            eval_delay.append(starts["evaluate"][-1] - (starts["train"][-1] + sleep))
    return sub_delay, eval_delay, twice, breakdown, submit_call


def main() -> None:
    a = _args()
    from rich.console import Console

    from orchestrator.campaign import drive, submit
    from orchestrator.cluster.local_cluster import LocalCluster
    from orchestrator.engine.ledger.states import RunState
    from orchestrator.session import Session

    spec, runs, step, two_node, refused = _plan(a)
    s = a.seconds_per_hour
    cap = a.nodes * a.gpus_per_node
    gpu_s = sum(r.gpus * r.est_hours * s + EVAL_H * s for r in runs)
    lower = max(gpu_s / cap, max(r.est_hours * s + EVAL_H * s for r in runs))

    root = Path(tempfile.mkdtemp(prefix="wtcs", dir="/tmp"))
    cluster = LocalCluster(root / "c")
    t_start = time.perf_counter()
    try:
        cluster.start(a.nodes, num_gpus=a.gpus_per_node, num_cpus=a.cpus_per_node)
        start_s = time.perf_counter() - t_start
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(cluster.token_file)
        wd = root / "w"
        sess = Session(workdir=wd, ray_address=cluster.address, track=not a.no_track)
        submit(sess, spec, runs)
        returned = _time_submits(sess.executor)
        sampler = PlacementSampler(cluster.address, cluster.token_file.read_text().strip())
        sampler.start()
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        counts = drive(sess, spec.name, console=Console(stderr=True), quiet=True)
        makespan = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        sampler.stop()
        orch_cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime) - sampler.cpu_s

        rows = sess.ledger.runs(spec.name)
        recorded = [r for r in rows if r.state == RunState.recorded]
        sub_delay, eval_delay, twice, breakdown, submit_call = _latencies(sess, spec, runs, wd, returned)
        cluster_mb = _cluster_rss_mb(cluster)
        ledger_b = sum(p.stat().st_size for p in wd.glob("ledger.db*"))
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        two_rec = sum(1 for r in recorded if r.spec.nnodes >= 2)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)

    print(f"paper program, every {step}th run: {len(runs)} runs on a local Ray cluster of {a.nodes} nodes × "
          f"{a.gpus_per_node} logical GPUs ({a.cpus_per_node} CPUs each; started in {start_s:.0f} s), noop backend, "
          f"1 h = {s:g} s, evaluation {EVAL_H} h; MLflow {'off' if a.no_track else 'on'}; {os.cpu_count()} cores")
    table = [
        ("runs recorded", f"{len(recorded)} / {len(runs)}  (states {dict(counts)})"),
        ("stages executed twice", f"{twice}"),
        ("makespan", f"{makespan:,.1f} s"),
        ("lower bound", f"{lower:,.1f} s"),
        ("makespan / lower bound", f"{makespan / lower:.3f}   (simulated, no Ray: 1.031 on 8×8 for all 591)"),
        ("orchestrator CPU per run", f"{orch_cpu / max(1, len(runs)):.3f} s  ({orch_cpu:.1f} s in all)"),
        ("ledger size", f"{ledger_b / 1e6:.2f} MB"),
        ("driver peak RSS", f"{rss_mb:,.0f} MB"),
        ("cluster RSS at the end", f"{cluster_mb:,.0f} MB  (every process of the {a.nodes} nodes)"),
        ("p95 submit → stage start", f"{_p95(sub_delay):.2f} s  (n={len(sub_delay)})"),
        ("p95 train end → evaluate start", f"{_p95(eval_delay):.2f} s  (n={len(eval_delay)})"),
        ("two-node runs planned", f"{len(two_node)}"),
        ("  refused at preflight", f"{len(two_node) if refused else 0}" + (f"  ({refused[0][:100]})" if refused
                                                                          else "")),
        ("  recorded", f"{two_rec}"),
        ("  seen on two nodes", f"{len(sampler.spanning)} placement groups spanning ≥ 2 nodes "
                                f"({len(sampler.seen)} placement groups seen)"),
    ]
    w = max(len(k) for k, _ in table)
    for k, v in table:
        print(f"{k:<{w}}  {v}")
    _print_breakdown(breakdown, submit_call)
    print(f"ratio makespan/lower = {makespan / lower:.3f}")


if __name__ == "__main__":
    main()
