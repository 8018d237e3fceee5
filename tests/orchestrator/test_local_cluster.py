"""A multi-node Ray cluster on this machine (orchestrator.cluster.local_cluster): separate nodes, one node's loss,
and a stop that leaves nothing behind — without `ray stop`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest


@pytest.mark.slow
def test_two_nodes_join_one_is_lost_and_stop_leaves_no_process():
    """About 20 s of CPU (a head and a worker started, the worker's raylet killed). Proves: each node has its own
    ports and temp dir and the GCS counts both; `attach` reopens the cluster from its state file; `kill_raylet`
    takes exactly one node out; `stop` ends every process of both nodes, the killed node's leftovers included."""
    from orchestrator.cluster.local_cluster import LocalCluster

    root = Path("/tmp") / f"wtlc{os.getpid()}"
    cluster = LocalCluster(root).start(2, num_gpus=1, num_cpus=1)
    try:
        head, worker = cluster.nodes
        assert head.temp_dir != worker.temp_dir
        assert not set(head.ports.values()) & set(worker.ports.values())
        assert cluster.wait_alive(2, 60)
        again = LocalCluster.attach(root)
        assert again is not None and again.address == cluster.address
        assert [n.node_manager_port for n in again.nodes] == [head.node_manager_port, worker.node_manager_port]
        pid = cluster.kill_raylet(1)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert cluster.wait_alive(1, 120)  # the head's GCS marks the worker dead; the head stays
        recorded = head.pids + worker.pids
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    alive = [p for p in recorded if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == []
    assert not [p.pid for p in psutil.process_iter(["cmdline"]) if str(root) in " ".join(p.info["cmdline"] or [])]
    assert LocalCluster.attach(root) is None
