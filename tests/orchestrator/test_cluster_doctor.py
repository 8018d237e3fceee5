"""`campaign doctor` on real multi-node Ray clusters built on this machine (orchestrator.cluster.local_cluster), and
the rules it applies to what the nodes report."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from orchestrator.cluster.doctor import FAIL, OK, WARN, Finding, compare_versions, fit_findings, gpu_findings, versions


def _mine() -> dict[str, str | None]:
    return versions()


def test_a_different_windtunnel_on_a_node_fails_with_the_fix_and_the_same_versions_pass():
    mine = _mine()
    same = compare_versions("n1", mine, dict(mine), gpus=4)
    assert [f.status for f in same if f.check == "versions"] == [OK]
    assert not [f for f in same if f.status == FAIL]
    other = compare_versions("n1", mine, {**mine, "windtunnel": "0.0.9"}, gpus=4)
    bad = [f for f in other if f.status == FAIL]
    assert [(f.node, f.check) for f in bad] == [("n1", "windtunnel")]
    assert "0.0.9" in bad[0].result and "install" in bad[0].fix
    assert not [f for f in other if f.check == "versions"]  # no "as the submitter's" row beside a failure


def test_vllm_absent_is_a_warning_on_a_cpu_node_and_a_failure_on_a_gpu_node_when_the_submitter_has_it():
    mine = {**_mine(), "vllm": "0.11.0"}
    node = {**mine, "vllm": None}
    assert [f.status for f in compare_versions("cpu", mine, node, gpus=0) if f.check == "vllm"] == [WARN]
    assert [f.status for f in compare_versions("gpu", mine, node, gpus=8) if f.check == "vllm"] == [FAIL]


def test_another_python_minor_version_fails_and_another_patch_release_warns():
    mine = {**_mine(), "python": "3.11.9"}
    assert [f.status for f in compare_versions("n", mine, {**mine, "python": "3.11.4"}, 0)
            if f.check == "python"] == [WARN]
    assert [f.status for f in compare_versions("n", mine, {**mine, "python": "3.12.1"}, 0)
            if f.check == "python"] == [FAIL]


def test_fewer_than_eight_cpus_per_gpu_warns_with_the_cpu_count_to_start_with():
    (low,) = gpu_findings("n", 8, 16)
    assert low.status == WARN and "--num-cpus=64" in low.fix
    (enough,) = gpu_findings("n", 8, 64)
    assert enough.status == OK
    (cpu_only,) = gpu_findings("n", 0, 2)
    assert cpu_only.status == OK


def test_a_run_fits_only_when_enough_distinct_nodes_have_its_gpus_per_node():
    nodes = [{"gpus": 8.0}, {"gpus": 8.0}, {"gpus": 4.0}]
    assert [f.status for f in fit_findings(nodes, [("7b", 8, 1), ("14b", 8, 2)])] == [OK]
    (bad,) = fit_findings(nodes, [("14b", 8, 3)])
    assert bad.status == FAIL and "3 node(s)" in bad.result and "2 node(s) have that many" in bad.result
    (too_big,) = fit_findings(nodes, [("wide", 16, 1)])
    assert too_big.status == FAIL


# -- on real clusters --------------------------------------------------------------------------------------------


def _doctor(campaign_cli, cluster, workdir: Path, *extra: str):
    env = {"RAY_AUTH_TOKEN_PATH": str(cluster.token_file), "COLUMNS": "220"}
    return campaign_cli(["doctor", "--ray-address", cluster.address, "--workdir", str(workdir), *extra], env=env)


def _by_port(findings: list[dict], port: int) -> list[dict]:
    return [f for f in findings if f":{port} " in f["node"] + " "]


@pytest.mark.slow
def test_doctor_passes_on_a_three_node_cluster(ray_cluster3, campaign_cli, tmp_path):
    """About 40 s of CPU (one probe job; verl imported once on each of 3 nodes). Proves: every alive node is
    probed by a task pinned to it (each node, by its node-manager port, has its versions, work-dir and verl rows),
    the shared work dir and every verl internal pass, the token is accepted and required, exit 0."""
    res = _doctor(campaign_cli, ray_cluster3, tmp_path / "wd", "--json")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    body = json.loads(res.stdout)
    assert body["ok"] is True
    rows = body["findings"]
    for node in ray_cluster3.nodes:
        mine = {f["check"]: f for f in _by_port(rows, node.node_manager_port)}
        assert mine["versions"]["status"] == OK, (node.name, rows)
        assert mine["work dir"]["status"] == OK and "shared" in mine["work dir"]["result"]
        assert mine["verl internals"]["status"] == OK
        assert mine["resources"]["result"].startswith(f"{node.num_gpus} GPUs, {node.num_cpus} CPUs")
    assert any(f["check"] == "auth" and f["status"] == OK for f in rows)
    assert not list((tmp_path / "wd" / ".doctor").iterdir())  # the nonce files are removed


@pytest.fixture(scope="module")
def odd_cluster(tmp_path_factory):
    """Three nodes: the head as the submitter, `w1` reporting another Windtunnel version, `w2` whose probe sees
    the work dir under another root (WINDTUNNEL_DOCTOR_FS_ROOT: the simulation cluster_doctor documents)."""
    from orchestrator.cluster.local_cluster import LocalCluster

    root = Path(os.path.realpath("/tmp")) / f"wtodd{os.getpid()}"
    other_fs = tmp_path_factory.mktemp("otherfs")
    cluster = LocalCluster(root).start(3, num_gpus=2, num_cpus=2, node_env={
        1: {"WINDTUNNEL_VERSION_OVERRIDE": "0.0.9"}, 2: {"WINDTUNNEL_DOCTOR_FS_ROOT": str(other_fs)}})
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_doctor_names_the_node_on_other_code_and_the_node_that_cannot_see_the_work_dir(odd_cluster, campaign_cli,
                                                                                        tmp_path):
    """About 60 s of CPU (a 3-node cluster started; one probe job importing verl on 3 nodes). Proves: exit 2; the
    node started with another Windtunnel version fails `windtunnel` and the node whose work dir is another
    filesystem fails `work dir`, each named by its node-manager port with its fix; the head has no problem."""
    res = _doctor(campaign_cli, odd_cluster, tmp_path / "wd")
    assert res.returncode == 2, res.stderr[-3000:] + res.stdout[-3000:]
    problems = [ln for ln in res.stderr.splitlines() if ln.startswith("problem:")]
    head, w1, w2 = (n.node_manager_port for n in odd_cluster.nodes)
    assert len(problems) == 2, res.stderr
    (ver,) = [p for p in problems if f":{w1} " in p]
    assert "windtunnel: 0.0.9" in ver and "fix: install the submitter's versions" in ver
    (wd,) = [p for p in problems if f":{w2} " in p]
    assert "work dir" in wd and "fix: mount" in wd
    assert not [p for p in problems if f":{head} " in p]
    assert "campaign doctor: 3 nodes" in res.stdout  # the table is printed too


@pytest.mark.slow
def test_cheap_checks_return_the_problems_without_importing_verl(odd_cluster, tmp_path):
    """About 15 s of CPU (one probe job, no verl import). Proves: the subset `submit` can run before any compute
    returns only problems — the version, the work dir and a run shape no node fits — and no verl-internal rows."""
    from orchestrator.cluster.doctor import cheap_checks
    from orchestrator.engine.executor import RayJobsExecutor

    ex = RayJobsExecutor(odd_cluster.address, token_file=odd_cluster.token_file)
    found = cheap_checks(ex, tmp_path / "wd", needs=[("two-node run", 2, 2), ("wide run", 4, 1)])
    assert all(isinstance(f, Finding) and f.status == FAIL for f in found)
    assert sorted(f.check for f in found) == ["fit", "windtunnel", "work dir"]
    (fit,) = [f for f in found if f.check == "fit"]
    assert "wide run" in fit.result
    assert not [f for f in found if f.check == "verl internals"]


@pytest.mark.slow
def test_submit_refuses_a_cluster_the_doctor_fails_before_writing_anything(odd_cluster, tmp_path):
    """About 15 s of CPU (one probe job). Proves the user's path: `campaign submit --ray-address` runs the
    doctor's quick part before any compute and exits 2 naming the odd nodes, with no ledger and no job written;
    `--no-doctor` skips it (the campaign is then registered)."""
    import subprocess
    import sys

    import yaml

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "c.yaml").write_text(yaml.safe_dump({
        "name": "dr", "backend": "noop", "models": ["tiny_qwen2"], "recipe": "cpu_tiny", "policies": ["baseline"],
        "seeds": [1], "steps": 1, "compute": {"nodes": 3, "gpus_per_node": 2, "gpus_per_run": 0,
                                                "hours_per_run": 0.01}}))
    wd = tmp_path / "wd"
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(odd_cluster.token_file), "RAY_AUTH_MODE": "token"}
    campaign = str(Path(sys.executable).with_name("campaign"))
    p = subprocess.run([campaign, "submit", str(proj / "c.yaml"), "--workdir", str(wd), "--ray-address",
                        odd_cluster.address, "--no-wait"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "found before any compute" in p.stderr and "windtunnel: 0.0.9" in p.stderr and "work dir" in p.stderr
    assert not (wd / "ledger.db").exists() and not (wd / "runs").exists()
    p = subprocess.run([campaign, "submit", str(proj / "c.yaml"), "--workdir", str(wd), "--ray-address",
                        odd_cluster.address, "--no-wait", "--no-doctor"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (wd / "ledger.db").exists()
