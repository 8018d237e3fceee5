"""Can a command write where it was told to? Checked before any model is loaded or run started, so a bad
`--out`, `--cache-dir` or work dir is exit 2 naming the path and the fix, with nothing written.

A path is writable when it is (or will be) a folder, resp. a file, under a chain of folders whose nearest
existing one accepts a new file: probed by creating and removing a temporary file there (permission bits alone
do not tell, e.g. for root on /proc or a read-only mount)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import typer

from wtcommon.errors import UserError


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def problem(path: Path, kind: str) -> str | None:
    """Why `path` cannot be written as a `kind` ("folder" or "file"), or None when it can."""
    path = Path(path)
    if kind == "folder" and path.exists() and not path.is_dir():
        return "it is a file, and this option takes a folder; give a folder path (or remove the file)"
    if kind == "file" and path.is_dir():
        return "is a folder; give a file path inside it"
    anc = _nearest_existing(path.parent if kind == "file" else path)
    if not anc.is_dir():
        return f"{anc} is a file, so nothing can be created under it; give a path under a folder"
    try:
        fd, tmp = tempfile.mkstemp(dir=anc, prefix=".wt-write-check-")
    except OSError as e:
        return f"{anc} does not accept new files ({e.strerror or type(e).__name__}); give a folder you can write to"
    os.close(fd)
    os.unlink(tmp)
    return None


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
