"""A work directory and everything found in it: the one place that knows where its ledger, MLflow store, run
directories, collected records, cluster file and local Ray head live.

Why one object: "where is the ledger of this work dir" used to be decided in nine places with two idioms
(`ledger_url or default_url(wd)`, and a path sniffed for `"://"`). Every command, the session and the tuner now
ask a `Workdir`; `orchestrator.engine.ledger.open_ledger` takes a URL, a `Workdir` or a ledger (Optuna's `get_storage`
shape). Paths only: this module opens nothing, so the ledger, tracking and executor can all depend on it.

Layout (see also orchestrator/session.py):
    ledger.db                 run ledger (SQLite WAL) unless a ledger URL is given
    mlflow.db, mlartifacts/   embedded MLflow store
    cluster.json              the cluster `submit` ran on (orchestrator/cluster/cluster_record.py)
    ray_head.json, ray/       the local Ray head this work dir owns (orchestrator/cluster/local_head.py)
    ray_job_logs/             job-driver logs kept from a stopped head's /tmp temp dir (cluster/ray_temp.py)
    runs/<campaign>/<run_key>/   one run's files (orchestrator/engine/paths.py)
    results/<campaign>/records.parquet   a campaign's collected records
    data/                     built corpora and evaluation data
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wtcommon.errors import UserError

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec

LEDGER_FILE = "ledger.db"
MLFLOW_FILE = "mlflow.db"
CLUSTER_FILE = "cluster.json"
HEAD_STATE_FILE = "ray_head.json"
JOB_LOGS_DIR = "ray_job_logs"


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Workdir:
    """A work directory (resolved), with the ledger URL the user gave (`--ledger-url`), if any."""

    root: Path
    given_ledger_url: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).expanduser().resolve())
        object.__setattr__(self, "given_ledger_url", self.given_ledger_url or None)

    @classmethod
    def of(cls, where: Workdir | str | Path, ledger_url: str | None = None) -> Workdir:
        """`where` as a Workdir (a Workdir passed in keeps its own ledger URL unless `ledger_url` is given)."""
        if isinstance(where, Workdir):
            return where if ledger_url is None else cls(where.root, ledger_url)
        return cls(Path(where), ledger_url)

    @property
    def ledger_file(self) -> Path:
        """The default SQLite ledger file (used unless a ledger URL was given)."""
        return self.root / LEDGER_FILE

    @property
    def ledger_url(self) -> str:
        """The given ledger URL, else `sqlite:///<workdir>/ledger.db`."""
        return self.given_ledger_url or _sqlite_url(self.ledger_file)

    def has_ledger(self) -> bool:
        """Whether a ledger is there to read: a URL was given, or the default file exists (commands that act on
        a submitted campaign never create one)."""
        return self.given_ledger_url is not None or self.ledger_file.exists()

    def require_ledger(self, shown: str | Path | None = None, campaign: str | None = None) -> None:
        """UserError unless `has_ledger()`: commands that act on a submitted campaign never create a work
        directory (a mistyped --workdir would leave an empty ledger behind). `shown` is the work dir as the user
        typed it; the message names the campaign first, the user typed that too."""
        if self.has_ledger():
            return
        who = f"campaign {campaign!r}: " if campaign else ""
        wd = Path(shown) if shown is not None else self.root
        raise UserError(f"{who}--workdir {wd}: no ledger in this work directory ({wd / LEDGER_FILE} does not "
                        "exist); pass the --workdir where `campaign submit` ran (or --ledger-url)")

    @property
    def mlflow_uri(self) -> str:
        """`sqlite:///<workdir>/mlflow.db`, the embedded MLflow store."""
        return _sqlite_url(self.root / MLFLOW_FILE)

    @property
    def private_files(self) -> tuple[Path, ...]:
        """The databases (with their WAL files) that only this user may read: they hold every run's paths."""
        return tuple(self.root / f"{db}{ext}" for db in (LEDGER_FILE, MLFLOW_FILE) for ext in ("", "-wal", "-shm"))

    @property
    def cluster_file(self) -> Path:
        """Where `submit` records the cluster it ran on."""
        return self.root / CLUSTER_FILE

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def run_dir(self, spec: RunSpec) -> Path:
        """`<workdir>/runs/<campaign>/<run_key>` (orchestrator.engine.paths.run_dir)."""
        from orchestrator.engine.paths import run_dir

        return run_dir(self.root, spec)

    def records(self, campaign: str) -> Path:
        """`<workdir>/results/<campaign>/records.parquet`, a campaign's collected records."""
        from orchestrator.engine.paths import results_file

        return results_file(self.root, campaign, "records.parquet")

    @property
    def head_state_file(self) -> Path:
        """The state file of the local Ray head this work dir owns (orchestrator/cluster/local_head.py)."""
        return self.root / HEAD_STATE_FILE

    @property
    def job_logs(self) -> Path:
        """Where the job-driver logs of a stopped head whose temp dir was under /tmp are kept
        (orchestrator/cluster/ray_temp.py); `campaign logs` reads them there."""
        return self.root / JOB_LOGS_DIR

    def sub(self, name: str) -> Workdir:
        """A work directory inside this one sharing its ledger (the tuner's `<workdir>/tune`)."""
        return Workdir(self.root / name, self.ledger_url)


__all__ = ["LEDGER_FILE", "Workdir"]
