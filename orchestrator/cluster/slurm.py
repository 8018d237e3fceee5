"""A campaign on a Slurm allocation: the batch script `campaign slurm` writes and submits, and the record of its jobs.

Why: most academic groups get GPUs through Slurm, and an allocation ends (time limit, preemption) long before a
600-run campaign does. The script asks for N nodes × G GPUs, one task per node, and `--signal=B:TERM@S` (SIGTERM
to the batch step S seconds before the time limit); its one command is the in-allocation runner
(`orchestrator.cluster.slurm_job`): a Ray head on the first node, workers on the others, `campaign doctor`, then
`campaign submit --drain-on-sigterm` against the shared work dir, the Ray processes stopped by PID at the end. A
SIGTERM drains the in-flight stages as infra failures; the next allocation (a `--chain`ed job, `afterany`
dependency, or the same script submitted again) resumes the campaign: `submit` of an unchanged spec registers
nothing new and drives what is left.

Everything lives under `W/slurm/`: the script (`<campaign>.sbatch`), each job's log (`<job id>.out`), each job's
Ray state, token and kept job logs (`job-<id>/`), and `jobs.json`, the jobs submitted for the work dir (what
`campaign status` shows, with the live state from `squeue` when Slurm answers).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wtcommon.atomic import atomic_write_json, atomic_write_text, unwritable
from wtcommon.errors import ClusterError, UserError

JOBS_FILE = "jobs.json"


class SlurmError(ClusterError):
    """Slurm refused or could not be asked (sbatch missing, a rejected request); the message quotes it. Exit 3."""


def slurm_dir(workdir: Path) -> Path:
    """`W/slurm/`: scripts, job logs, each job's Ray state and the jobs record."""
    return Path(workdir).resolve() / "slurm"


@dataclass(frozen=True)
class SlurmRequest:
    """What one allocation asks for and runs: the campaign file, the shared work dir, N nodes × G GPUs (as
    `--gres=gpu:G`; 0: none) with C CPUs each, the time limit, how long before it the drain signal comes, and
    any further sbatch options (`--account=...`, `--qos=...`)."""

    campaign: Path
    workdir: Path
    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_node: int = 8
    time_limit: str | None = None
    signal_s: int = 300
    partition: str | None = None
    ledger_url: str | None = None
    sbatch_args: tuple[str, ...] = ()
    doctor_timeout_s: float = 300.0

    def check(self) -> None:
        """Bad input before anything is written (exit 2): every value that reaches the batch script is checked
        here, so none can add a line to it or an option Windtunnel sets itself (`check_script_values`)."""
        if self.nodes < 1 or self.gpus_per_node < 0 or self.cpus_per_node < 1:
            raise UserError(f"--nodes {self.nodes} --gpus {self.gpus_per_node} --cpus {self.cpus_per_node}: need "
                            "at least 1 node and 1 CPU per node, and no negative GPU count")
        if not self.campaign.is_file():
            raise UserError(f"{self.campaign}: campaign file not found")
        for what, p in (("--workdir", self.workdir), ("campaign", self.campaign)):
            if any(c.isspace() or not c.isprintable() for c in str(p.resolve())):
                raise UserError(f"{what} {p}: a path with white space or control characters cannot be written "
                                "into #SBATCH lines; use a plain path")
        if self.workdir.exists() and not self.workdir.is_dir():
            raise UserError(f"--workdir {self.workdir}: exists and is not a folder; name a folder (created if "
                            "missing) on the filesystem every node shares")
        if (why := unwritable(self.workdir, "folder")) is not None:  # under /sys or a read-only mount
            raise UserError(f"--workdir {self.workdir}: cannot write there: {why}")
        check_script_values(self)


# sbatch options Windtunnel writes itself: a --sbatch-arg naming one would silently override the runner's needs
OWN_OPTIONS = {"job-name": None, "nodes": "--nodes", "ntasks-per-node": None, "cpus-per-task": "--cpus",
               "signal": "--signal", "output": None, "open-mode": None, "gres": "--gpus", "time": "--time",
               "partition": "--partition", "ntasks": None, "wrap": None, "gpus": "--gpus",
               "gpus-per-node": "--gpus"}
_SBATCH_ARG = re.compile(r"--?([A-Za-z][A-Za-z0-9-]*)(=[!-~]*)?")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")
SIGNAL_MAX_S = 65535  # sbatch --signal's largest offset


def slurm_time_s(text: str) -> int | None:
    """Seconds of a Slurm time limit (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`); None for
    `UNLIMITED`/`INFINITE`. ValueError names the forms."""
    t = text.strip()
    if t.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if m is None or text != t:
        raise ValueError(f"{text!r} is not a Slurm time: use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        h, mi, se = (parts + [0, 0])[:3]
        secs = int(days) * 86400 + h * 3600 + mi * 60 + se
    elif len(parts) == 1:
        secs = parts[0] * 60
    elif len(parts) == 2:
        secs = parts[0] * 60 + parts[1]
    else:
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2]
    if secs <= 0:
        raise ValueError(f"{text!r}: a time limit must be positive")
    return secs


def check_script_values(req: SlurmRequest) -> None:
    """Every value that goes into the batch script: a time Slurm reads with the drain signal inside it, a plain
    partition name, `--option[=value]` sbatch arguments without white space or control characters and not one of
    the options Windtunnel writes, a ledger URL SQLAlchemy parses. UserError (exit 2) naming the option and fix."""
    if not 10 <= req.signal_s <= SIGNAL_MAX_S:
        raise UserError(f"--signal {req.signal_s}: must be 10 to {SIGNAL_MAX_S} seconds before the time limit")
    if req.time_limit is not None:
        try:
            limit = slurm_time_s(req.time_limit)
        except ValueError as exc:
            raise UserError(f"--time: {exc}") from None
        if limit is not None and req.signal_s >= limit:
            raise UserError(f"--signal {req.signal_s}: the drain signal must come before the time limit "
                            f"(--time {req.time_limit} = {limit} s); lower --signal or raise --time")
    if req.partition is not None and not _PARTITION.fullmatch(req.partition):
        raise UserError(f"--partition {req.partition!r}: a partition name is letters, digits, '_', '.' and '-' "
                        "(several separated by commas)")
    for arg in req.sbatch_args:
        m = _SBATCH_ARG.fullmatch(arg)
        if m is None:
            raise UserError(f"--sbatch-arg {arg!r}: give one sbatch option as --name or --name=value, without "
                            "white space or control characters (e.g. --sbatch-arg=--account=myproj)")
        own = m.group(1) if arg.startswith("--") else m.group(1)[0]  # `-N2`: the short option N, value 2
        if own in OWN_OPTIONS or (len(own) == 1 and own in "NntcJop"):
            use = OWN_OPTIONS.get(own)
            raise UserError(f"--sbatch-arg {arg!r}: `campaign slurm` writes that option itself"
                            + (f"; use `campaign slurm {use}`" if use else ""))
    if req.ledger_url is not None:
        if any(not c.isprintable() or c.isspace() for c in req.ledger_url):
            raise UserError("--ledger-url: white space or control characters in the URL; give the URL alone")
        import sqlalchemy as sa

        try:
            sa.engine.make_url(req.ledger_url).get_dialect()  # a dialect SQLAlchemy cannot load fails here, not in
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:  # the allocation after sbatch took it
            raise UserError(f"--ledger-url {req.ledger_url!r}: not an SQLAlchemy URL ({exc}); use "
                            "postgresql://user@host/db (every node must reach it)") from None


def sbatch_lines(req: SlurmRequest, name: str) -> list[str]:
    """The `#SBATCH` options: one task per node (the runner starts Ray itself), GPUs as gres, the drain signal
    to the batch step only (`B:`), the log appended under W/slurm/ (a re-queued job keeps its earlier lines)."""
    out = slurm_dir(req.workdir)
    lines = [f"--job-name=wt-{name}", f"--nodes={req.nodes}", "--ntasks-per-node=1",
             f"--cpus-per-task={req.cpus_per_node}", f"--signal=B:TERM@{req.signal_s}",
             f"--output={out}/%j.out", "--open-mode=append"]
    if req.gpus_per_node:
        lines.append(f"--gres=gpu:{req.gpus_per_node}")
    if req.time_limit:
        lines.append(f"--time={req.time_limit}")
    if req.partition:
        lines.append(f"--partition={req.partition}")
    return lines + list(req.sbatch_args)


def runner_argv(req: SlurmRequest, python: str = sys.executable) -> list[str]:
    """The batch step's one command: the in-allocation runner, with this machine's interpreter (the same venv
    path on every node, as the cluster guide requires)."""
    argv = [python, "-m", "orchestrator.cluster.slurm_job", "run", "--workdir", str(req.workdir.resolve()),
            "--campaign", str(req.campaign.resolve()), "--gpus-per-node", str(req.gpus_per_node),
            "--cpus-per-node", str(req.cpus_per_node), "--doctor-timeout", str(req.doctor_timeout_s)]
    return argv + (["--ledger-url", req.ledger_url] if req.ledger_url else [])


def batch_script(req: SlurmRequest, name: str, python: str = sys.executable) -> str:
    """The batch script's text. `exec` makes the runner the batch step's process, so `--signal=B:TERM` reaches it."""
    repo = Path(__file__).resolve().parents[2]
    head = ["#!/bin/bash", *[f"#SBATCH {line}" for line in sbatch_lines(req, name)],
            f"# Written by `campaign slurm` for campaign {name}; submit it again with `sbatch {{this file}}` to resume",
            "# the campaign in a new allocation (the runner's `campaign submit` of an unchanged spec adds nothing).",
            "set -euo pipefail", f"cd {shlex.quote(str(repo))}",
            "exec " + shlex.join(runner_argv(req, python))]
    return "\n".join(head) + "\n"


@dataclass
class SlurmJob:
    """One submitted allocation: its id, script and log, what it asked for, what it waits on, and its last known
    state (the runner writes RUNNING / ENDED with its exit code; `squeue` has the live one)."""

    job_id: str
    campaign: str
    script: str
    log: str
    nodes: int
    gpus_per_node: int
    dependency: str = ""
    submitted: float = field(default_factory=time.time)
    state: str = "SUBMITTED"
    detail: str = ""


def _sbatch() -> str:
    exe = shutil.which("sbatch")
    if exe is None:
        raise SlurmError("`sbatch` not found on PATH: run `campaign slurm` on a Slurm login node (or install "
                         "slurm-client)")
    return exe


def sbatch(script: Path, dependency: str | None = None) -> str:
    """Submit `script` (argv list, `--parsable`), after job `dependency` has ended in any way (`afterany`);
    the job id."""
    argv = [_sbatch(), "--parsable", *([f"--dependency=afterany:{dependency}"] if dependency else []), str(script)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SlurmError(f"sbatch {script} failed (exit {p.returncode}): {p.stderr.strip()[-800:]}")
    return p.stdout.strip().split(";")[0]


def submit_allocations(req: SlurmRequest, name: str, chain: int = 1, python: str = sys.executable) -> list[SlurmJob]:
    """Write `W/slurm/<name>.sbatch` and submit it `chain` times, each after the previous has ended (a campaign
    longer than one allocation's time limit); the jobs, recorded in `W/slurm/jobs.json`."""
    req.check()
    out = slurm_dir(req.workdir)
    out.mkdir(parents=True, exist_ok=True)
    script = out / f"{name}.sbatch"
    atomic_write_text(script, batch_script(req, name, python))
    script.chmod(0o700)
    jobs: list[SlurmJob] = []
    for _ in range(chain):
        dep = jobs[-1].job_id if jobs else None
        jid = sbatch(script, dep)
        jobs.append(SlurmJob(jid, name, str(script), str(out / f"{jid}.out"), req.nodes, req.gpus_per_node,
                             dependency=dep or ""))
        record_job(req.workdir, jobs[-1])
    return jobs


def read_jobs(workdir: Path) -> list[SlurmJob]:
    """The work dir's recorded allocations, oldest first (none: an empty list)."""
    path = slurm_dir(workdir) / JOBS_FILE
    try:
        body: dict[str, Any] = json.loads(path.read_text())
        return [SlurmJob(**j) for j in body.get("jobs", [])]
    except FileNotFoundError:
        return []
    except (ValueError, TypeError) as exc:
        raise UserError(f"{path}: unreadable ({exc}); remove it (it only records submitted jobs)") from exc


def record_job(workdir: Path, job: SlurmJob) -> None:
    """Add or update one job in `W/slurm/jobs.json` (atomic; the runner and `campaign slurm` both write it)."""
    jobs = {j.job_id: j for j in read_jobs(workdir)}
    jobs[job.job_id] = job
    atomic_write_json(slurm_dir(workdir) / JOBS_FILE, {"jobs": [asdict(j) for j in jobs.values()]})


def update_job(workdir: Path, job_id: str, state: str, detail: str = "") -> None:
    """Set a recorded job's state (a job submitted by hand, `sbatch W/slurm/<campaign>.sbatch`, is added)."""
    jobs = {j.job_id: j for j in read_jobs(workdir)}
    job = jobs.get(job_id) or SlurmJob(job_id, "", "", str(slurm_dir(workdir) / f"{job_id}.out"), 0, 0)
    job.state, job.detail = state, detail
    record_job(workdir, job)


def live_states(job_ids: list[str]) -> dict[str, str]:
    """Job id -> Slurm's state now (`squeue`), for the jobs Slurm still knows; empty when Slurm does not answer."""
    exe = shutil.which("squeue")
    if exe is None or not job_ids:
        return {}
    try:
        p = subprocess.run([exe, "-h", "-j", ",".join(job_ids), "-o", "%i %T %R"], capture_output=True, text=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in p.stdout.splitlines() if p.returncode == 0 else []:
        jid, _, rest = line.strip().partition(" ")
        out[jid] = rest
    return out


def allocation_lines(workdir: Path) -> list[str]:
    """`campaign status`'s lines for the work dir's allocations: id, live or last state, shape, log."""
    jobs = read_jobs(workdir)
    live = live_states([j.job_id for j in jobs])
    lines = []
    for j in jobs:
        state = live.get(j.job_id) or j.state + (f" ({j.detail})" if j.detail else "")
        dep = f", after {j.dependency}" if j.dependency else ""
        lines.append(f"slurm job {j.job_id}: {state}; {j.nodes} node(s) x {j.gpus_per_node} GPU(s){dep}; log {j.log}")
    return lines
