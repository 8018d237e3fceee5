"""Suite-wide fixtures: one local Ray head for every test that needs one, shared by all pytest-xdist
workers, and the `campaign` CLI run in-process.

The head costs ~15 s of a loaded 2-core machine to start and keeps a dozen daemons busy while it lives,
so the first worker that needs it starts it (under a file lock in a folder the controller makes for the
session), later workers attach to it, and the controller stops it by its temp dir once every worker is
done. Without xdist the single process plays both parts.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.components import COMPONENTS, FIXTURE_COMPONENTS, SHARED_ENV, VLLM_ONLY, missing, recorded, started

def _cache_cli_builds() -> None:
    """Typer's CliRunner builds the whole click command tree of the app on every `invoke` (56 ms for `campaign`'s
    30 commands, about a thousand invocations in `make test-fast`); the tree is a pure function of the app, so it
    is built once per app object here (a weak map: a test's own throwaway app is built afresh). The console
    script builds it once per process anyway."""
    import weakref

    import typer.testing as tt

    build = tt._get_command
    built: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cached(app):
        cmd = built.get(app)
        if cmd is None:
            built[app] = cmd = build(app)
        return cmd

    tt._get_command = cached


_cache_cli_builds()

_SHARED_KEY = "wt_shared_dir"
_shared = pytest.StashKey[Path]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_worker(config):  # short: Ray's unix socket paths are limited to 107 bytes
        config.stash[_shared] = Path(tempfile.mkdtemp(prefix="wts", dir="/tmp"))
        os.environ[SHARED_ENV] = str(config.stash[_shared])  # xdist workers inherit it: `components.started`


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput[_SHARED_KEY] = str(node.config.stash[_shared])


_stopped = pytest.StashKey[bool]()
_start = pytest.StashKey[object]()
_leftovers = pytest.StashKey[list]()


def _stop_shared(config: pytest.Config) -> None:
    """Controller: stop the shared head and cluster (only ours, by their temp dirs and PIDs), once."""
    if config.stash.get(_stopped, False):
        return
    config.stash[_stopped] = True
    from orchestrator.cluster.local_cluster import LocalCluster
    from orchestrator.cluster.local_head import stop_head

    shared = config.stash[_shared]
    stop_head(shared / "head")
    cluster = LocalCluster.attach(shared / "cluster3", alive=False)
    if cluster is not None:
        cluster.stop()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller, after every worker has finished: stop what the session shared, then fail the session if it left
    anything behind (a /dev/shm entry or a live process of ours that was not there when it started), naming it."""
    config = session.config
    if _is_worker(config) or _shared not in config.stash:
        return
    _stop_shared(config)
    start = config.stash.get(_start, None)
    if start is None:
        return
    snapshot, marker = start  # type: ignore[misc]
    found = snapshot.leftovers(marker)
    config.stash[_leftovers] = found
    b = config.stash[_budget]
    lost = missing(b["declared"], recorded(config.stash[_shared]))
    b["components_missing"] = lost
    if (found or lost) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """Controller: the shared head and cluster stopped (if the session did not get to it), their folder removed."""
    if _is_worker(config) or _shared not in config.stash:
        return
    _stop_shared(config)
    shutil.rmtree(config.stash[_shared], ignore_errors=True)


def _cost(item: pytest.Item) -> int:
    """2: a module that needs more than the suite's default timeout (the verl campaign); 1: a slow end-to-end
    test; 0: the rest."""
    timeout = item.get_closest_marker("timeout")
    if timeout is not None and timeout.args and float(timeout.args[0]) > float(item.config.getini("timeout") or 0):
        return 2
    return 1 if item.get_closest_marker("slow") else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Costly modules first, each kept whole and in order. With `--no-loadscope-reorder` (the Makefile) xdist's
    loadscope hands modules out in collection order, so the longest ones start at once and the fast tests fill
    in beside them, instead of the verl campaign (a one-test module, collected last) starting late and running
    alone at the end."""
    module_cost: dict[str, int] = {}
    for it in items:
        module = it.nodeid.split("::")[0]
        module_cost[module] = max(module_cost.get(module, 0), _cost(it))
    items.sort(key=lambda it: -module_cost[it.nodeid.split("::")[0]])  # stable: order within a cost kept
    for it in items:  # what each test starts, carried in its reports to the controller (`_components_summary`)
        names = {m.args[0] for m in it.iter_markers("component")}
        names |= {c for f, c in FIXTURE_COMPONENTS.items() if f in getattr(it, "fixturenames", ())}
        unknown = names - set(COMPONENTS)
        if unknown:
            raise pytest.UsageError(f"{it.nodeid}: unknown component(s) {sorted(unknown)}; see tests/components.py")
        it.user_properties.extend(("component", n) for n in sorted(names))


# -- the suite's budget: its CPU-seconds and its slowest tests, printed at the end ------------------------------

_budget = pytest.StashKey[dict]()
_CONFIG: dict[str, pytest.Config] = {}  # the controller's config, for the report hook (a report carries none)
SLOWEST_SHOWN = 10


def _machine_cpu_s() -> float | None:
    """Busy CPU-seconds of the whole machine so far (/proc/stat: every process, Ray's daemons and job workers
    included, which pytest's own accounting never sees); None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    jiffies = [int(x) for x in fields]
    busy = sum(jiffies) - jiffies[3] - (jiffies[4] if len(jiffies) > 4 else 0)  # less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_worker(session.config):
        from orchestrator.leftovers import Snapshot, mark_session

        session.config.stash[_budget] = {"t0": time.time(), "cpu0": _machine_cpu_s(), "durations": {}, "cpu": {},
                                         "slow": set(), "declared": {}, "skipped": {}}
        session.config.stash[_start] = (Snapshot(), mark_session("WT_SUITE_SESSION"))
        _CONFIG["config"] = session.config


def _budget_state() -> dict | None:
    config = _CONFIG.get("config")
    return config.stash[_budget] if config is not None and _budget in config.stash else None


def _share_cpu(b: dict) -> None:
    """Hand the machine's CPU-seconds since the last test start or end out evenly to the tests running in that
    interval: each test's (and so each module's) share of the machine, xdist workers and Ray included."""
    now = _machine_cpu_s()
    last, running = b.get("cpu_last"), b.setdefault("running", set())
    if now is not None and last is not None and running:
        share = (now - last) / len(running)
        for nodeid in running:
            b["cpu"][nodeid] = b["cpu"].get(nodeid, 0.0) + share
    b["cpu_last"] = now


def pytest_runtest_logstart(nodeid: str, location) -> None:
    """Controller: when each test started, so one still running when the suite is stopped is timed too."""
    b = _budget_state()
    if b is not None:
        b.setdefault("started", {})[nodeid] = time.time()
        _share_cpu(b)
        b["running"].add(nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Controller: each test's wall time, setup + call + teardown (xdist forwards the workers' reports), its tier
    and its share of the machine's CPU."""
    b = _budget_state()
    if b is None:
        return
    d = b["durations"]
    d[report.nodeid] = d.get(report.nodeid, 0.0) + float(report.duration)
    if report.when == "call" and report.passed:
        for key, name in report.user_properties:
            if key == "component":
                b["declared"].setdefault(name, set()).add(report.nodeid)
    elif report.skipped:
        for key, name in report.user_properties:
            if key == "component":
                b["skipped"].setdefault(name, set()).add(report.nodeid)
    if "slow" in report.keywords:
        b["slow"].add(report.nodeid)
    if report.when == "teardown":
        b.get("started", {}).pop(report.nodeid, None)
        _share_cpu(b)
        b["running"].discard(report.nodeid)


def _modules(b: dict, times: dict[str, float]) -> list[dict]:
    """Per test module: wall (its tests' setup + call + teardown), share of machine CPU-s, tier, test count;
    costliest first."""
    mods: dict[str, dict] = {}
    for nodeid, wall in times.items():
        name = nodeid.split("::")[0]
        m = mods.setdefault(name, {"module": name, "wall_s": 0.0, "cpu_s": 0.0, "tests": 0, "tier": "fast"})
        m["wall_s"] += wall
        m["cpu_s"] += b["cpu"].get(nodeid.removesuffix(" (still running)"), 0.0)
        m["tests"] += 1
        if nodeid.removesuffix(" (still running)") in b["slow"]:
            m["tier"] = "slow"
    rows = sorted(mods.values(), key=lambda m: -m["wall_s"])
    for m in rows:
        m["wall_s"], m["cpu_s"] = round(m["wall_s"], 1), round(m["cpu_s"], 1)
    return rows


def suite_budget(config: pytest.Config) -> dict | None:
    """The suite's wall time, machine CPU-seconds over the run, its slowest tests (longest first), its costliest
    modules and the totals per tier (fast: `make test-fast`; slow: the end-to-end tests)."""
    if _budget not in config.stash:
        return None
    b = config.stash[_budget]
    cpu1 = _machine_cpu_s()
    times = dict(b["durations"])
    for nodeid, t in b.get("started", {}).items():  # still running: stopped with the suite
        times.pop(nodeid, None)
        times[nodeid + " (still running)"] = time.time() - t
    slowest = sorted(times.items(), key=lambda kv: -kv[1])
    modules = _modules(b, times)
    starts: dict[str, set[str]] = {}  # module -> the real components its tests start or use (tests/components.py)
    for name, recs in (recorded(config.stash[_shared]) if _shared in config.stash else {}).items():
        for rec in recs:
            starts.setdefault(rec["test"].split("::")[0], set()).add(name)
    for name, tests in b["declared"].items():  # a shared fixture (the Ray head, the cluster) records once a session
        for nodeid in tests:
            starts.setdefault(nodeid.split("::")[0], set()).add(name)
    for m in modules:
        m["starts"] = sorted(starts.get(m["module"], ()))
    tiers = {t: {"modules": sum(m["tier"] == t for m in modules), "wall_s": round(sum(m["wall_s"] for m in modules
                                                                                   if m["tier"] == t), 1),
                 "cpu_s": round(sum(m["cpu_s"] for m in modules if m["tier"] == t), 1)} for t in ("fast", "slow")}
    return {"wall_s": round(time.time() - b["t0"], 1),
            "machine_cpu_s": None if cpu1 is None or b["cpu0"] is None else round(cpu1 - b["cpu0"], 1),
            "cores": os.cpu_count(), "tests": len(slowest),
            "slowest": [{"test": k, "wall_s": round(v, 1)} for k, v in slowest[:25]],
            "modules": modules, "tiers": tiers}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The suite's CPU-seconds (measured on the machine, every process) and the ten slowest tests, printed last;
    written as JSON to $WT_SUITE_REPORT too, which `.ci/run` reads to name them when the CI run passes its
    wall-time budget."""
    rep = suite_budget(config)
    if rep is None:
        return
    cpu = "n/a" if rep["machine_cpu_s"] is None else f"{rep['machine_cpu_s']:.0f}"
    terminalreporter.write_sep("-", "suite budget")
    terminalreporter.write_line(f"suite: {rep['wall_s']:.0f} s wall, {cpu} CPU-s of the machine (/proc/stat, every "
                                f"process: pytest, Ray, stage jobs) on {rep['cores']} cores; {rep['tests']} tests")
    terminalreporter.write_line(f"{SLOWEST_SHOWN} slowest (wall s, setup + call + teardown):")
    for row in rep["slowest"][:SLOWEST_SHOWN]:
        terminalreporter.write_line(f"  {row['wall_s']:7.1f}  {row['test']}")
    terminalreporter.write_line(f"{SLOWEST_SHOWN} costliest modules (wall s summed over their tests; share of the "
                                "machine's CPU-s while they ran):")
    for m in rep["modules"][:SLOWEST_SHOWN]:
        terminalreporter.write_line(f"  {m['wall_s']:7.1f}  {m['cpu_s']:7.1f}  {m['tier']:4}  {m['module']}")
    for tier, t in rep["tiers"].items():
        terminalreporter.write_line(f"tier {tier}: {t['modules']} modules, {t['wall_s']:.0f} s wall summed, "
                                    f"{t['cpu_s']:.0f} CPU-s")
    _components_summary(terminalreporter, config)
    left = config.stash.get(_leftovers, [])
    if left:
        terminalreporter.write_sep("!", f"the suite left {len(left)} thing(s) behind (it fails for that)", red=True)
        for line in left:
            terminalreporter.write_line(f"  {line}")
    elif _leftovers in config.stash:
        terminalreporter.write_line("left behind: nothing (no new /dev/shm entry, no process of ours)")
    out = os.environ.get("WT_SUITE_REPORT")
    if out:
        Path(out).write_text(json.dumps(rep, indent=1) + "\n")


def _components_summary(terminalreporter, config: pytest.Config) -> None:
    """Every real component with the test that started it and what showed it; a declared one never recorded is
    named and fails the session (`pytest_sessionfinish`)."""
    if _shared not in config.stash or _budget not in config.stash:
        return
    b = config.stash[_budget]
    records = recorded(config.stash[_shared])
    terminalreporter.write_sep("-", "real components started (tests/components.py)")
    import importlib.util

    here = set(COMPONENTS) - (set() if importlib.util.find_spec("vllm") else set(VLLM_ONLY))
    for name in COMPONENTS:
        recs = records.get(name)
        if recs:
            terminalreporter.write_line(f"  {name:15} {recs[0]['test']}  [{recs[0]['evidence']}]")
        elif name in b.get("components_missing", {}):
            tests = sorted(b["components_missing"][name])
            terminalreporter.write_line(f"  {name:15} NOT STARTED, though {tests[0]} (and {len(tests) - 1} more) "
                                        "passed declaring it: the session fails", red=True)
        elif name in here:
            why = "skipped" if b["skipped"].get(name) else "no test that starts it was selected"
            terminalreporter.write_line(f"  {name:15} not started in this session ({why})")
        else:
            terminalreporter.write_line(f"  {name:15} not here: runs in .venv-vllm (`make test-vllm`)")


_RAY_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")


@pytest.fixture(autouse=True)
def _ray_auth_env_restored():
    """The Ray client sets token auth in its own process's environment (`configure_token_auth`): right for the
    `campaign` CLI, a leak when a test runs it in-process. Left set, a later test's in-process `ray.init` on the
    same worker started a GCS that demanded a token file another test had already deleted (the GCS aborts, and
    Ray reports only "Timed out waiting for file .../gcs_server_port_...")."""
    before = {k: os.environ.get(k) for k in _RAY_AUTH_VARS}
    yield
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def shared_dir(config: pytest.Config) -> Path:
    """The session's folder seen by the controller and every worker."""
    if _is_worker(config):
        return Path(config.workerinput[_SHARED_KEY])
    return config.stash[_shared]


@contextmanager
def _locked(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def head(request: pytest.FixtureRequest):
    """A local Ray head (127.0.0.1, token auth, every port explicit) shared by every test of the session
    and every xdist worker: (address, token file). Jobs of concurrent tests queue on its 8 logical CPUs."""
    from orchestrator.cluster.local_head import ensure_head, token_file

    wd = shared_dir(request.config) / "head"
    with _locked(shared_dir(request.config) / "head.lock"):
        addr = ensure_head(wd, num_cpus=8)  # a live head (another worker's) is reused, not started twice
    started("ray-head", f"answering at {addr}")
    return addr, token_file(wd)


CLUSTER3 = {"n_nodes": 3, "num_gpus": 4, "num_cpus": 4}


@pytest.fixture(scope="session")
def ray_cluster3(request: pytest.FixtureRequest):
    """A 3-node local Ray cluster (head + 2 workers on 127.0.0.1, each 4 logical GPUs and 4 CPUs, own ports and
    temp dir, token auth: `orchestrator.cluster.local_cluster`) shared by every cluster test of the session and
    every xdist worker; stopped by PID at the end. 4 CPUs per node: a two-node verl-on-CPU run asks the shared
    cluster for its GPUs + 1 CPU per node, its stage job for 1 more, beside a single-node run's.

    Shared, so a test must not change it: a node-loss test builds its own `LocalCluster` (or adds a node with
    `add_node` and kills that one), never `kill_raylet` on this one."""
    from orchestrator.cluster.local_cluster import LocalCluster

    root = shared_dir(request.config) / "cluster3"
    with _locked(shared_dir(request.config) / "cluster3.lock"):
        cluster = LocalCluster.attach(root)
        if cluster is None:
            cluster = LocalCluster(root).start(CLUSTER3["n_nodes"], num_gpus=CLUSTER3["num_gpus"],
                                               num_cpus=CLUSTER3["num_cpus"])
    started("ray-cluster", f"{len(cluster.nodes)} nodes, GCS {cluster.gcs_address}")
    return cluster


def shared_artifact_path(config: pytest.Config, name: str, build) -> Path:
    """`build(folder) -> Path`, run once per session under a lock by whichever worker asks first; the other
    xdist workers reuse its result (a session-scoped fixture alone would build it once per worker)."""
    root = shared_dir(config)
    folder, done = root / name, root / f"{name}.path"
    with _locked(root / f"{name}.lock"):
        if not done.exists():
            folder.mkdir()
            done.write_text(str(build(folder)))
    return Path(done.read_text())


# -- the `campaign` CLI in-process ----------------------------------------------------------------------------


@dataclass
class CliResult:
    """What `subprocess.run([campaign, ...], capture_output=True, text=True)` returns, for in-process runs."""
    returncode: int
    stdout: str
    stderr: str


def run_campaign(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
                 monkeypatch: pytest.MonkeyPatch) -> CliResult:
    """`campaign ARGS` through Typer's CliRunner: the console script's code path without its ~3 s of imports.

    An exception the CLI did not turn into an exit code is printed to stderr as the console script would
    (exit 1 with a Traceback), so a test's "no Traceback" check still sees it.
    """
    from typer.testing import CliRunner

    from cli import app

    if cwd is not None:
        monkeypatch.chdir(cwd)
    res = CliRunner().invoke(app, [str(a) for a in args], env=env, catch_exceptions=True)
    err = res.stderr
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        err += "Traceback (most recent call last):\n" + "".join(traceback.format_exception(res.exception))
    return CliResult(res.exit_code, res.stdout, err)


@pytest.fixture
def campaign_cli(monkeypatch: pytest.MonkeyPatch):
    """`campaign_cli(["plan", path, "--json"], cwd=..., env=...)` → CliResult (returncode, stdout, stderr)."""
    def run(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
        return run_campaign(args, cwd=cwd, env=env, monkeypatch=monkeypatch)

    return run


@pytest.fixture(scope="session")
def shared_artifact(request: pytest.FixtureRequest):
    """`shared_artifact(name, build)`: see `shared_artifact_path` (built once across xdist workers)."""
    return lambda name, build: shared_artifact_path(request.config, name, build)
