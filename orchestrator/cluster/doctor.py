"""`campaign doctor`: check the user's Ray cluster before a campaign spends compute on it.

On every alive node a Ray task pinned there (`NodeAffinitySchedulingStrategy`, `soft=False`, `num_cpus=0` so a
busy cluster still runs it) reports its Python and package versions, writes a nonce file into the work
directory, reads the submitter's nonce file, and (the deep check) resolves every verl internal the plugin relies
on (`policies.verl.internals`). The tasks run inside one Ray Job — the same Jobs API, token, interpreter and
environment as the stage jobs — whose driver prints the facts as one JSON line. The submitter then compares:

- versions (Python, Windtunnel, torch, verl, vLLM, Ray) must equal the submitter's: a node on other code gives
  other results, or fails to unpickle a task; vLLM absent on a node without GPUs is a warning (CPU runs use the
  `hf` rollout), verl absent everywhere is a warning (only the verl backend needs it); every GPU node's vLLM must
  be the `[gpu]` extra's pin (`gpu_install.pinned_vllm`: the release CI runs as vLLM's CPU build);
- GPUs and CPUs per node, with a warning when CPUs < 8 × GPUs (DataFlex-RL reports Ray deadlocks below that);
- the shared work directory: every node's nonce file must be read back by the submitter, and every node must
  read the submitter's — else stage outputs written on a node are invisible to the orchestrator;
- the token: the Jobs API accepted it, and the cluster refuses a request without one;
- the verl internals, on every node.

`cheap_checks` is the subset `submit` can afford before any compute: versions, shared work dir and GPUs per
node (no verl import).

Test hooks (environment variables of a node's processes, read only by the doctor's probe):
- `WINDTUNNEL_VERSION_OVERRIDE=<v>`: the node reports Windtunnel version `<v>` (a node "on other code").
- `WINDTUNNEL_DOCTOR_FS_ROOT=<dir>`: the node's probe resolves the work dir `W` as `<dir>/W` — a node whose
  path `W` is a different filesystem. A simulation with limits: only the doctor's probe sees the other view
  (stage jobs on that node still see the real `W`), and it cannot stand for a read-only or stale NFS mount.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import sys

from orchestrator.cluster.gpu_install import pinned_vllm, same_release
from wtcommon.polling import wait_until
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from wtcommon.errors import WindtunnelError

VERSION_OVERRIDE_ENV = "WINDTUNNEL_VERSION_OVERRIDE"
FS_ROOT_ENV = "WINDTUNNEL_DOCTOR_FS_ROOT"
PACKAGES = ("windtunnel", "torch", "verl", "vllm", "ray")
CPUS_PER_GPU = 8  # DataFlex-RL's README: Ray deadlocks unless num_cpus is about 8 × GPUs
MARKER = "WINDTUNNEL_DOCTOR "
NONCE_DIR = ".doctor"

OK, WARN, FAIL = "ok", "warning", "FAIL"


@dataclass(frozen=True)
class Finding:
    """One row of the doctor's table: where, what was checked, what was found, and the fix when not ok."""

    node: str
    check: str
    result: str
    status: str = OK
    fix: str = ""


# -- what a node reports (runs inside the pinned task) ---------------------------------------------------------


def versions() -> dict[str, str | None]:
    """Python and the packages' installed versions here (None: not installed), read from package metadata so
    nothing heavy is imported; `WINDTUNNEL_VERSION_OVERRIDE` replaces Windtunnel's (test hook)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    if os.environ.get(VERSION_OVERRIDE_ENV):
        out["windtunnel"] = os.environ[VERSION_OVERRIDE_ENV]
    return out


def _view(workdir: str) -> Path:
    """The work dir as this process sees it (`WINDTUNNEL_DOCTOR_FS_ROOT` re-roots it: the simulation above)."""
    root = os.environ.get(FS_ROOT_ENV)
    return Path(root) / Path(workdir).relative_to("/") if root else Path(workdir)


def node_probe(workdir: str, nonce: str, deep: bool) -> dict[str, Any]:
    """A node's facts: id, versions, its nonce file written under the work dir, the submitter's nonce file read,
    and (deep) the verl internals that do not resolve."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    facts: dict[str, Any] = {"node_id": node_id, "host": platform.node(), "pid": os.getpid(),
                             "versions": versions()}
    folder = _view(workdir) / NONCE_DIR / nonce
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{node_id}.json").write_text(json.dumps({"nonce": nonce, "node_id": node_id}))
        facts["wrote"] = str(folder / f"{node_id}.json")
    except OSError as exc:
        facts["write_error"] = f"{type(exc).__name__}: {exc}"
    try:
        facts["read_submitter"] = json.loads((folder / "submitter.json").read_text()).get("nonce") == nonce
    except (OSError, ValueError):
        facts["read_submitter"] = False
    if deep:
        if facts["versions"].get("verl") is None:
            facts["internals"] = None
        else:
            from policies.verl.internals import resolve_all

            facts["internals"] = resolve_all()
    return facts


def probe_cluster(workdir: str, nonce: str, deep: bool, timeout_s: float) -> dict[str, Any]:
    """In the doctor's job driver: one pinned task per alive node; {"nodes": [...], "driver": versions}."""
    import logging

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(logging_level=logging.ERROR, log_to_driver=False)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    task = ray.remote(num_cpus=0, max_retries=0)(node_probe)
    refs = {n["NodeID"]: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
            .remote(workdir, nonce, deep) for n in alive}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    nodes = []
    for n in alive:
        ref = refs[n["NodeID"]]
        entry = {"node_id": n["NodeID"], "address": f"{n['NodeManagerAddress']}:{n['NodeManagerPort']}",
                 "gpus": n["Resources"].get("GPU", 0.0), "cpus": n["Resources"].get("CPU", 0.0),
                 "head": "node:__internal_head__" in n["Resources"]}
        if ref in ready:
            try:
                entry["facts"] = ray.get(ref)
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        else:
            entry["error"] = f"the pinned task did not finish in {timeout_s:.0f} s"
            ray.cancel(ref, force=True)
        nodes.append(entry)
    return {"nodes": nodes, "driver": versions()}


# -- the submitter's side ------------------------------------------------------------------------------------------


def node_label(entry: dict[str, Any]) -> str:
    """`127.0.0.1:41234 (head) 3f2a1b9c`: address and node-manager port (unique even with every node on one
    machine), whether it is the head, and the start of the node id."""
    return f"{entry['address']}{' (head)' if entry.get('head') else ''} {entry['node_id'][:8]}"


_INSTALL_FIX = ("install the submitter's versions on every node (same image / `pip install -e .` of the same "
                "commit, same torch, verl, vLLM, Ray), or run `campaign` from a machine with the cluster's versions")


def compare_versions(label: str, mine: dict[str, str | None], theirs: dict[str, str | None], gpus: float
                     ) -> list[Finding]:
    """One finding per package whose version on a node differs from the submitter's."""
    out = []
    for key in ("python", *PACKAGES):
        a, b = mine.get(key), theirs.get(key)
        if a == b:
            if key in ("verl", "vllm") and b is None:
                what = ("only the verl backend needs it" if key == "verl"
                        else "GPU rollouts need it; CPU runs use the `hf` rollout")
                out.append(Finding(label, key, f"absent here and on the submitter ({what})", WARN,
                                   "" if key == "vllm" and not gpus else f"pip install '{key}' on every node"))
            continue
        if key == "vllm" and b is None and not gpus:
            out.append(Finding(label, key, f"absent (submitter: {a}); this node has no GPUs, CPU runs use the `hf` "
                                           "rollout", WARN))
            continue
        if key == "python" and a and b and a.rsplit(".", 1)[0] == b.rsplit(".", 1)[0]:
            out.append(Finding(label, key, f"{b} (submitter: {a}): same minor version", WARN, _INSTALL_FIX))
            continue
        out.append(Finding(label, key, f"{b or 'absent'} (submitter: {a or 'absent'})", FAIL, _INSTALL_FIX))
    if not any(f.status == FAIL for f in out):
        summary = ", ".join(f"{k} {theirs.get(k) or 'absent'}" for k in ("python", *PACKAGES))
        out.insert(0, Finding(label, "versions", f"as the submitter's: {summary}"))
    return out


def pin_findings(label: str, theirs: dict[str, str | None], gpus: float, pinned: str | None) -> list[Finding]:
    """A node's vLLM, where it has one, must be the release the `[gpu]` extra pins (the version CI runs as vLLM's CPU
    build, `0.31.0+cpu`): off the pin is a failure on a GPU node, a warning elsewhere. A node without vLLM is the
    versions check's business (`compare_versions`: a warning, since CPU runs and logical GPUs need none)."""
    have = theirs.get("vllm")
    if pinned is None or have is None:
        return []
    if same_release(have, pinned):
        return [Finding(label, "vllm pin", f"{have}: the pinned {pinned}")]
    return [Finding(label, "vllm pin", f"{have} on a node with {gpus:g} GPUs; Windtunnel pins {pinned} "
                                       "(the version its CI runs)" if gpus else f"{have}; Windtunnel pins {pinned}",
                    FAIL if gpus else WARN, f"pip install 'vllm=={pinned}' on every GPU node (or `pip install -e "
                                            "'.[gpu]'`)")]


def gpu_findings(label: str, gpus: float, cpus: float) -> list[Finding]:
    """GPUs/CPUs of a node, with the CPU:GPU ratio warning."""
    res = f"{gpus:g} GPUs, {cpus:g} CPUs"
    if gpus and cpus < CPUS_PER_GPU * gpus:
        return [Finding(label, "resources", f"{res}: fewer than {CPUS_PER_GPU} CPUs per GPU", WARN,
                        f"start the node with --num-cpus={int(CPUS_PER_GPU * gpus)} or more (Ray deadlocks were "
                        "reported below 8 CPUs per GPU, DataFlex-RL)")]
    return [Finding(label, "resources", res)]


def fit_findings(nodes: list[dict[str, Any]], needs: list[tuple[str, int, int]]) -> list[Finding]:
    """Each need `(what, gpus_per_node, nnodes)` fits when `nnodes` distinct alive nodes each have that many GPUs."""
    out = []
    per_node = sorted((float(n.get("gpus") or 0) for n in nodes), reverse=True)
    for what, gpn, nnodes in needs:
        fitting = sum(1 for g in per_node if g >= gpn)
        if fitting < nnodes:
            out.append(Finding("cluster", "fit", f"{what}: needs {gpn} GPUs on each of {nnodes} node(s); "
                                                 f"{fitting} node(s) have that many (GPUs per node: "
                                                 f"{', '.join(f'{g:g}' for g in per_node) or 'none'})", FAIL,
                               "add nodes with more GPUs, or lower the run's gpus_per_node/nnodes"))
    if needs and not out:
        out.append(Finding("cluster", "fit", f"every run fits ({len(needs)} resource shapes)"))
    return out


def workdir_findings(label: str, entry: dict[str, Any], workdir: Path, nonce: str) -> list[Finding]:
    """The shared-filesystem check for one node, from its facts and the submitter's read-back."""
    facts = entry.get("facts") or {}
    fix = (f"mount {workdir} at the same path on every node and on the submitter (one shared filesystem: NFS, "
           "Lustre, a cloud file share); stage outputs written on a node must be visible to the orchestrator")
    if facts.get("write_error"):
        return [Finding(label, "work dir", f"cannot write {workdir}: {facts['write_error']}", FAIL, fix)]
    mine = workdir / NONCE_DIR / nonce / f"{facts.get('node_id')}.json"
    try:
        seen = json.loads(mine.read_text()).get("nonce") == nonce
    except (OSError, ValueError):
        seen = False
    if not seen:
        return [Finding(label, "work dir", f"the node wrote its nonce file, the submitter cannot read it at {mine}",
                        FAIL, fix)]
    if not facts.get("read_submitter"):
        return [Finding(label, "work dir", "the node cannot read the submitter's nonce file", FAIL, fix)]
    return [Finding(label, "work dir", "shared: nonce written by the node read back here, and the other way")]


def internals_findings(label: str, entry: dict[str, Any]) -> list[Finding]:
    facts = entry.get("facts") or {}
    if "internals" not in facts:
        return []
    if facts["internals"] is None:
        return [Finding(label, "verl internals", "not checked: verl is not installed on this node", WARN)]
    missing = facts["internals"]
    if not missing:
        from policies.verl.internals import VERL_INTERNALS

        return [Finding(label, "verl internals", f"all {len(VERL_INTERNALS)} resolve")]
    return [Finding(label, "verl internals", f"{m['name']} (used in {m['used_in']}): {m['error']}", FAIL,
                    "install the verl version Windtunnel pins (pyproject.toml: verl>=0.9.1,<0.10) on this node")
            for m in missing]


def token_findings(address: str) -> list[Finding]:
    """The Jobs API accepted our token (the caller got this far); warn when it also answers without one."""
    import requests

    rows = [Finding("cluster", "token", f"the Jobs API at {address} accepted the client's credentials")]
    try:
        r = requests.get(f"{address.rstrip('/')}/api/jobs/", timeout=10)
        if r.status_code == 200:
            rows.append(Finding("cluster", "auth", "the dashboard answers requests without a token", WARN,
                                "start every node with RAY_AUTH_MODE=token (anyone reaching the port can run code)"))
        else:
            rows.append(Finding("cluster", "auth", f"a request without the token is refused (HTTP {r.status_code})"))
    except requests.RequestException as exc:
        rows.append(Finding("cluster", "auth", f"not checked: {type(exc).__name__}", WARN))
    return rows


class DoctorError(WindtunnelError, RuntimeError):
    """The doctor could not run its probe (the job failed or printed nothing); `exit_code` as the CLI's."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def run_probe(executor, workdir: Path, nonce: str, *, deep: bool, timeout_s: float = 300.0) -> dict[str, Any]:
    """Write the submitter's nonce file, submit the probe job, wait for it and parse the facts it printed."""
    from orchestrator.engine.executor.base import JobStatus

    folder = workdir / NONCE_DIR / nonce
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "submitter.json").write_text(json.dumps({"nonce": nonce}))
    sid = f"wt-doctor-{nonce}"
    argv = [sys.executable, "-m", "orchestrator.cluster.doctor", "--workdir", str(workdir), "--nonce", nonce,
            "--timeout", str(int(timeout_s)), *(["--deep"] if deep else [])]
    executor.submit(sid, argv)
    seen = [JobStatus("PENDING")]

    def finished() -> bool:
        seen[0] = executor.status(sid)
        return seen[0].done

    wait_until(finished, timeout_s + 120, interval_s=1.0)
    st = seen[0]
    if not st.done:
        executor.stop(sid)
        raise DoctorError(f"the doctor's job {sid} did not finish in {timeout_s + 120:.0f} s (state {st.state}); "
                          "is the cluster's head overloaded, or are all its CPUs held by jobs?", 3)
    logs = executor.logs(sid)
    line = next((ln for ln in reversed(logs.splitlines()) if ln.startswith(MARKER)), None)
    if st.state != "SUCCEEDED" or line is None:
        raise DoctorError(f"the doctor's job {sid} ended {st.state} without its report ({st.message}); the cluster "
                          f"runs `{argv[0]} -m orchestrator.cluster.doctor` as the stage jobs run their stages, so "
                          f"Windtunnel must be installed at that interpreter path. Job log tail: {logs[-1500:]}")
    return json.loads(line[len(MARKER):])


def diagnose(facts: dict[str, Any], workdir: Path, nonce: str, *, needs: list[tuple[str, int, int]] | None = None
             ) -> list[Finding]:
    """Every finding from the probe's facts (read while the nodes' nonce files still exist)."""
    mine = versions()
    pinned = pinned_vllm()
    rows: list[Finding] = []
    for entry in sorted(facts["nodes"], key=lambda e: (not e.get("head"), e["address"])):
        label = node_label(entry)
        if "facts" not in entry:
            error = entry.get("error", "no answer")
            rows.append(Finding(label, "probe", error, FAIL, _INSTALL_FIX if "ModuleNotFoundError" in error else
                                "check the node is healthy (`ray status`, its raylet log); a node that cannot run a "
                                "task cannot run a stage"))
            continue
        rows += compare_versions(label, mine, entry["facts"]["versions"], entry["gpus"])
        rows += pin_findings(label, entry["facts"]["versions"], entry["gpus"], pinned)
        rows += gpu_findings(label, entry["gpus"], entry["cpus"])
        rows += workdir_findings(label, entry, workdir, nonce)
        rows += internals_findings(label, entry)
    rows += fit_findings(facts["nodes"], list(needs or []))
    return rows


def check(executor, workdir: Path, *, deep: bool = True, needs: list[tuple[str, int, int]] | None = None,
          timeout_s: float = 300.0) -> list[Finding]:
    """The whole doctor against `executor`'s cluster: token, versions, resources, work dir, (deep) verl internals.
    Raises ClusterUnreachable / ClusterAuthError on the first contact, DoctorError when the probe fails."""
    import shutil

    executor.ping()  # a ClusterAuthError here is the token check failing, with its fix
    rows = token_findings(executor.address) if deep else []
    workdir = Path(workdir).resolve()
    nonce = secrets.token_hex(8)
    try:
        facts = run_probe(executor, workdir, nonce, deep=deep, timeout_s=timeout_s)
        return rows + diagnose(facts, workdir, nonce, needs=needs)
    finally:
        shutil.rmtree(workdir / NONCE_DIR / nonce, ignore_errors=True)


def cheap_checks(executor, workdir: Path, needs: list[tuple[str, int, int]] | None = None,
                 timeout_s: float = 120.0) -> list[Finding]:
    """The part `submit` runs before any compute: versions, the shared work dir and GPUs per node (`needs`:
    `(what, gpus_per_node, nnodes)` per run shape), no verl import. Returns the problems only (status FAIL);
    empty when the cluster can take the campaign."""
    return problems(check(executor, workdir, deep=False, needs=needs, timeout_s=timeout_s))


def problems(rows: list[Finding]) -> list[Finding]:
    return [r for r in rows if r.status == FAIL]


def as_dicts(rows: list[Finding]) -> list[dict[str, str]]:
    return [asdict(r) for r in rows]


def _main(argv: list[str] | None = None) -> int:
    """The probe job's driver: `python -m orchestrator.cluster.doctor --workdir W --nonce N [--deep]`."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m orchestrator.cluster.doctor")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--nonce", required=True)
    ap.add_argument("--deep", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args(argv)
    facts = probe_cluster(a.workdir, a.nonce, a.deep, a.timeout)
    print(MARKER + json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
