"""A Ray temp dir outside its work dir, and what is kept of it once its processes are gone.

Why: Ray's unix socket paths allow 107 characters, so a head or node whose work dir path is long gets a short
temp dir under /tmp instead of `<workdir>/ray` (local_head `_temp_dir`, LocalCluster `_tmp_base`). Left there,
every stopped head is 2-4 MB of session folder in /tmp with no process behind it. When the processes are gone
the job drivers' logs, the only part a user reads afterwards (`campaign logs` of a stopped head), are copied
into the work dir (`Workdir.job_logs`) and the /tmp folder is removed. A temp dir inside the work dir is the
user's and stays as it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

JOB_LOG_GLOB = "session_*/logs/job-driver-*.log"


def outside(tmp: Path, root: Path) -> bool:
    """Whether `tmp` is a fallback folder outside the work dir `root` (not `<root>/ray`)."""
    return not Path(tmp).resolve().is_relative_to(Path(root).resolve())


def release(tmp: Path, root: Path, kept: Path) -> int:
    """Copy the job-driver logs of the stopped temp dir `tmp` into `kept`, then remove `tmp` when it lies outside
    the work dir `root`; the number of logs copied. Call only once no process of `tmp` is alive."""
    tmp = Path(tmp)
    if not tmp.is_dir() or not outside(tmp, root):
        return 0
    logs = sorted(tmp.glob(JOB_LOG_GLOB))
    if logs:
        kept.mkdir(parents=True, exist_ok=True)
    for log in logs:  # one file per submission id; a later session's copy of the same job wins
        shutil.copy2(log, kept / log.name)
    shutil.rmtree(tmp, ignore_errors=True)
    return len(logs)


def job_log(tmp: Path | None, kept: Path, submission_id: str) -> Path | None:
    """The driver log of job `submission_id`: in the head's temp dir while it is there, else the kept copy."""
    name = f"job-driver-{submission_id}.log"
    found = sorted(Path(tmp).glob(f"session_*/logs/{name}")) if tmp is not None else []
    if found:
        return found[-1]
    return kept / name if (kept / name).is_file() else None


__all__ = ["JOB_LOG_GLOB", "job_log", "outside", "release"]
