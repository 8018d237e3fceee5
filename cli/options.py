"""Options shared by several commands, declared once (`Annotated` aliases, as in cli/policy_commands.py).

A command takes `workdir: WorkdirOpt` and gets the same flag, environment variable, metavar and help as every
other command; the work directory's ledger is then `Workdir(workdir, ledger_url)` (orchestrator/workdir.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

WORKDIR_HELP = ("work directory holding ledger.db, mlflow.db, the local Ray head and run outputs "
                "(default: $WINDTUNNEL_WORKDIR)")

WorkdirOpt = Annotated[Path, typer.Option("--workdir", envvar="WINDTUNNEL_WORKDIR", metavar="DIR",
                                          help=WORKDIR_HELP)]
LedgerUrlOpt = Annotated[str | None, typer.Option("--ledger-url", metavar="URL",
                                                  help="SQLAlchemy URL of the ledger; default "
                                                  "sqlite:///<workdir>/ledger.db")]
RayAddressOpt = Annotated[str | None, typer.Option("--ray-address", metavar="URL",
                                                   help="Ray dashboard address of your cluster; default: the one "
                                                   "`campaign submit` recorded, else the work dir's local head")]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="same as --format json")]
CampaignArg = Annotated[str, typer.Argument(metavar="CAMPAIGN", help="campaign name, or its spec file/directory")]
RunsArg = Annotated[list[str] | None, typer.Argument(metavar="RUN...",
                                                     help="run ids/keys or id prefixes; default all")]

__all__ = ["CampaignArg", "JsonOpt", "LedgerUrlOpt", "RayAddressOpt", "RunsArg", "WORKDIR_HELP", "WorkdirOpt"]
