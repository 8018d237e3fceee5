"""Can a command write where it was told to? Checked before any model is loaded or run started, so a bad
`--out`, `--cache-dir` or work dir is exit 2 naming the path and the fix, with nothing written.

A path is writable when it is (or will be) a folder, resp. a file, under a chain of folders whose nearest
existing one accepts a new file (`wtcommon.atomic.unwritable`, which the work dir's ledger opener uses too)."""

from __future__ import annotations

from pathlib import Path

import typer

from wtcommon.atomic import unwritable
from wtcommon.errors import UserError


def problem(path: Path, kind: str) -> str | None:
    """Why `path` cannot be written as a `kind` ("folder" or "file"), or None when it can (wtcommon.atomic)."""
    return unwritable(path, kind)


def check_writable(path: Path, option: str, kind: str = "folder") -> None:
    """UserError (exit 2) naming `option`, the path and the fix when `path` cannot be written as a `kind`."""
    why = problem(path, kind)
    if why is not None:
        raise UserError(f"{option} {path}: cannot write there: {why}")


def out_dir_callback(value: Path | None) -> Path | None:
    """Typer callback of `--out FOLDER`: refused at parse time, before the command runs."""
    if value is not None and (why := problem(value, "folder")) is not None:
        raise typer.BadParameter(f"{value}: cannot write there: {why}")
    return value


def out_file_callback(value: Path | None) -> Path | None:
    """Typer callback of `--out FILE`."""
    if value is not None and (why := problem(value, "file")) is not None:
        raise typer.BadParameter(f"{value}: cannot write there: {why}")
    return value


__all__ = ["check_writable", "out_dir_callback", "out_file_callback", "problem"]


def refuse_replacing(option: str, out: Path, existing: list[Path], force: bool) -> None:
    """The one output rule (issue 59): an --out whose files would replace ones already there is exit 2 naming them,
    unless --force; checked before any work, so nothing is written either way."""
    there = [p for p in existing if p.exists()]
    if there and not force:
        names = ", ".join(p.name for p in there)
        raise UserError(f"{option} {out}: already holds {names}; pass --force to replace them, or choose another path")
