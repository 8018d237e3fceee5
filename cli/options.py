"""Options shared by several commands, declared once (`Annotated` aliases, as in cli/policy_commands.py).

A command takes `workdir: WorkdirOpt` and gets the same flag, environment variable, metavar and help as every
other command; the work directory's ledger is then `Workdir(workdir, ledger_url)` (orchestrator/engine/workdir.py).

`--out` is a FILE for a command that writes one output and a FOLDER for one that writes several; the two
aliases take the parameter's type, so one says whether it is required: `out: OutFileOpt[Path]` (required),
`out: OutFileOpt[Path | None] = None` (optional). What the file or folder holds, the command's own help says.
`--format` of the table commands (tables, compare, sensitivity, verdicts) is `FormatOpt`; `plan` (table|json|
csv) and `status` (table|json) print other things and keep their own choices.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypeVar

import typer

from cli.writable import out_dir_callback, out_file_callback

_P = TypeVar("_P", bound=Path | None)

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
OUT_FILE_HELP = "write the output to this FILE (atomically: complete or absent); what it holds: see above"
OUT_DIR_HELP = "write the output into this FOLDER (created when missing); what it holds: see above"
# checked when parsed (cli/writable.py): a path that cannot be written is exit 2 before the command runs
OutFileOpt = Annotated[_P, typer.Option("--out", metavar="FILE", help=OUT_FILE_HELP, callback=out_file_callback)]
OutDirOpt = Annotated[_P, typer.Option("--out", metavar="FOLDER", help=OUT_DIR_HELP, callback=out_dir_callback)]
FORMATS_HELP = ("md (Markdown: numbers right-aligned, missing as —) | csv (numbers only, no comment lines) | latex "
                "(booktabs) | json")
FormatOpt = Annotated[str, typer.Option("--format", metavar="FORMAT", help=FORMATS_HELP)]
CampaignArg = Annotated[str, typer.Argument(metavar="CAMPAIGN", help="campaign name, or its spec file/directory")]
RunsArg = Annotated[list[str] | None, typer.Argument(metavar="RUN...",
                                                     help="run ids/keys or id prefixes; default all")]

__all__ = ["CampaignArg", "FormatOpt", "JsonOpt", "LedgerUrlOpt", "OutDirOpt", "OutFileOpt", "RayAddressOpt", "RunsArg",
           "WORKDIR_HELP", "WorkdirOpt"]
