"""A real one-node Slurm on this machine for the tests: Debian's munged, slurmctld and slurmd, their configuration,
key, state and logs in a temp dir, every port free-picked on loopback, the node's logical GPUs as gres (fake device
files: slurmd complains that they are not character devices and still counts them). Stopped by PID, its folder
removed.

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

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "squeue", "scontrol", "sinfo")
NODE = "wtnode"


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

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.root / "slurm.conf")}

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-n", NODE, "-o", "%T").stdout.strip()

    def queued(self, job_id: str) -> bool:
        """Whether Slurm still has the job pending, running or completing."""
        return bool(self.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip())

    def stop(self) -> None:
        import psutil

        procs = []
        for pid in self.pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        for p in procs:
            p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=10)
        for p in alive:
            p.kill()
        psutil.wait_procs(alive, timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)  # config, key, state and logs: this cluster's only


def _config(root: Path, gpus: int, cpus: int) -> None:
    host = socket.gethostname()
    (root / "dev").mkdir()
    for i in range(gpus):
        (root / "dev" / f"gpu{i}").touch()
    (root / "slurm.conf").write_text("\n".join([
        "ClusterName=wttest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={_port()}", f"SlurmdPort={_port()}",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={root}/munge/munge.sock",
        "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "SlurmdParameters=config_overrides", "ReturnToService=2",
        "SchedulerType=sched/backfill", "MpiDefault=none", "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        "KillWait=90", "GresTypes=gpu",  # KillWait: the drain's time between scancel's SIGTERM and its SIGKILL
        f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} RealMemory=1000 Gres=gpu:{gpus} "
        "State=UNKNOWN",
        f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP", ""]))
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File={root}/dev/gpu[0-{gpus - 1}]\n")


def start(root: Path, *, gpus: int = 2, cpus: int = 8) -> Slurm:
    """munged, slurmctld and slurmd of a one-node cluster under `root`; waits until the node is idle."""
    for d in ("state", "spool", "munge"):
        (root / d).mkdir(parents=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    _config(root, gpus, cpus)
    m = root / "munge"
    s = Slurm(root, gpus, [])
    try:
        subprocess.run([_exe("munged"), "--force", f"--socket={m}/munge.sock", f"--key-file={key}",
                        f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/seed"],
                       check=True, timeout=30)
        s.pids.append(int((m / "munged.pid").read_text()))
        subprocess.run([_exe("slurmctld"), "-c", "-f", str(root / "slurm.conf")], env=s.env, check=True, timeout=30)
        s.pids.append(_pid(root / "slurmctld.pid"))
        subprocess.run([_exe("slurmd"), "-N", NODE, "-f", str(root / "slurm.conf")], env=s.env, check=True, timeout=30)
        s.pids.append(_pid(root / "slurmd.pid"))
        t0 = time.time()
        while s.node_state() != "idle":
            if time.time() - t0 > 60:
                raise RuntimeError(f"the test's slurmd never became idle: {s.node_state()!r}; "
                                   f"{(root / 'slurmctld.log').read_text()[-1500:]}")
            time.sleep(0.5)
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
