"""A real Slurm on this machine for the tests: Debian's munged, slurmctld and one slurmd per node (`slurmd -N
wtnodeK`, each with its own port, spool, PID and log file: Debian's slurmd runs several nodes on one host), their
configuration, key, state and logs in a temp dir, every port free-picked, on loopback (one node) or the host's
address (several: Ray needs it), each node's logical GPUs as
gres (fake device files: slurmd complains that they are not character devices and still counts them). Stopped by
PID, its folder removed.

Why not a mock: `campaign slurm` must survive what Slurm really does (sbatch's batch step, `--signal`, scancel's
SIGTERM to every process of the job, `afterany` dependencies); only the real daemons do it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.components import started

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "squeue", "scontrol", "sinfo")
NODE = "wtnode1"  # the first node; node K is wtnodeK


def node_names(nodes: int) -> list[str]:
    return [f"wtnode{i}" for i in range(1, nodes + 1)]


def missing() -> str | None:
    """Why a real Slurm cannot run here, or None."""
    absent = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if absent:
        return (f"Slurm is not installed ({', '.join(absent)} missing): apt-get install slurm-wlm munge "
                "(.ci/run does)")
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs (this test starts its own Slurm)"
    return None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Slurm:
    root: Path
    gpus: int
    pids: list[int]
    nodes: list[str]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.root / "slurm.conf")}

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_state(self) -> str:
        """The nodes' state, one word when they agree (`idle`), else each node's (`idle,down`)."""
        out = self.run("sinfo", "-h", "-N", "-n", ",".join(self.nodes), "-o", "%T").stdout.split()
        return ",".join(sorted(set(out))) if len(out) == len(self.nodes) else ",".join(out) + " (nodes missing)"

    def queued(self, job_id: str) -> bool:
        """Whether Slurm still has the job pending, running or completing."""
        return bool(self.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip())

    def stop(self) -> None:
        """End what is left of the jobs (a test that failed midway), then the daemons by PID, then any process still
        running with this cluster's SLURM_CONF in its environment (job steps' slurmstepd, a job's Ray processes that
        left the job's process tree): only this cluster's, never another test's."""
        import psutil

        if self.run("squeue", "-h", "-o", "%i").stdout.split():
            self.run("scancel", "--full", "-u", "root")  # SIGTERM: the runner stops its Ray processes by PID
            t0 = time.time()
            while self.run("squeue", "-h", "-o", "%i").stdout.split() and time.time() - t0 < 20:
                time.sleep(1)
        procs = []
        for pid in self.pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        _end(procs)
        _end(self._leftovers())
        shutil.rmtree(self.root, ignore_errors=True)  # config, key, state and logs: this cluster's only

    def _leftovers(self) -> list:
        import psutil

        conf, out = str(self.root / "slurm.conf"), []
        for p in psutil.process_iter():
            try:
                # slurmstepd clears its environment; it runs in the cluster's folder
                if p.pid != os.getpid() and (p.environ().get("SLURM_CONF") == conf
                                             or p.cwd().startswith(str(self.root))):
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return out


def _end(procs: list) -> None:
    """SIGTERM, 10 s, SIGKILL."""
    import psutil

    for p in procs:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=10)


def _host_ip() -> str:
    """This host's address on its default route (no packet is sent), the one Ray picks for a node."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        return str(s.getsockname()[0])


def _config(root: Path, gpus: int, cpus: int, names: list[str]) -> None:
    host = socket.gethostname()
    # one node: loopback only. Several: the host's address, as a real cluster's nodes have one each: a Ray worker
    # joining a head at 127.0.0.1 swaps it for the host's address (ray._private.services.resolve_ip_for_localhost)
    # and cannot reach a head bound to loopback
    addr = "127.0.0.1" if len(names) == 1 else _host_ip()
    (root / "dev").mkdir()
    for i in range(gpus):
        (root / "dev" / f"gpu{i}").touch()
    (root / "slurm.conf").write_text("\n".join([
        "ClusterName=wttest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={_port()}", f"SlurmdPort={_port()}",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={root}/munge/munge.sock",
        "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",  # %n: the node's name
        f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "SlurmdParameters=config_overrides", "ReturnToService=2",
        "SchedulerType=sched/backfill", "MpiDefault=none", "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        # KillWait: the drain's time between scancel's SIGTERM and its SIGKILL; OverTimeLimit=0: a job is ended at
        # its --time (on slurmctld's next 30 s check), not minutes later
        "KillWait=90", "OverTimeLimit=0", "GresTypes=gpu",
        *[f"NodeName={n} NodeAddr={addr} NodeHostname={host} Port={_port()} CPUs={cpus} RealMemory=1000 "
          f"Gres=gpu:{gpus} State=UNKNOWN" for n in names],
        f"PartitionName=debug Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP", ""]))
    (root / "gres.conf").write_text("AutoDetect=off\n" + "".join(
        f"NodeName={n} Name=gpu File={root}/dev/gpu[0-{gpus - 1}]\n" for n in names))


def start(root: Path, *, gpus: int = 2, cpus: int = 8, nodes: int = 1) -> Slurm:
    """munged, slurmctld and a slurmd per node of a cluster of `nodes` nodes (wtnode1...) under `root`, each with
    `gpus` GPUs and `cpus` CPUs; waits until every node is idle."""
    names = node_names(nodes)
    for d in ("state", "munge", *[f"spool/{n}" for n in names]):
        (root / d).mkdir(parents=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    _config(root, gpus, cpus, names)
    m = root / "munge"
    s = Slurm(root, gpus, [], names)
    try:
        subprocess.run([_exe("munged"), "--force", f"--socket={m}/munge.sock", f"--key-file={key}",
                        f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/seed"],
                       check=True, timeout=30)
        s.pids.append(int((m / "munged.pid").read_text()))
        subprocess.run([_exe("slurmctld"), "-c", "-f", str(root / "slurm.conf")], env=s.env, check=True, timeout=30)
        s.pids.append(_pid(root / "slurmctld.pid"))
        for n in names:
            subprocess.run([_exe("slurmd"), "-N", n, "-f", str(root / "slurm.conf")], env=s.env, check=True,
                           timeout=30)
            s.pids.append(_pid(root / f"slurmd-{n}.pid"))
        t0 = time.time()
        while s.node_state() != "idle":
            if time.time() - t0 > 60:
                raise RuntimeError(f"the test's slurmd never became idle: {s.node_state()!r}; "
                                   f"{(root / 'slurmctld.log').read_text()[-1500:]}")
            time.sleep(0.5)
        started("slurm", f"munged, slurmctld and {len(names)} slurmd, nodes idle")
    except BaseException:
        s.stop()
        raise
    return s


def _pid(path: Path, timeout_s: float = 20) -> int:
    t0 = time.time()
    while not path.exists() or not path.read_text().strip():
        if time.time() - t0 > timeout_s:
            raise RuntimeError(f"{path} never written")
        time.sleep(0.1)
    return int(path.read_text().split()[0])
