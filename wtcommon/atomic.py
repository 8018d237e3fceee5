"""Atomic file output: write beside the target, then `os.replace`, so a failure never leaves half a file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path, mode: int | None = None) -> Iterator[Path]:
    """Yield a temp path in the target's directory; on success move it onto `path`, on error delete it.

    The file gets `mode` (e.g. 0o600 for a file naming a credential) or, by default, the usual
    0o666 minus the umask. The temp name is unique, so concurrent writers never share one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # mkstemp makes 0600; give the file normal permissions
    os.chmod(tmp_path, mode)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def json_file_text(obj: Any, indent: int | None = None) -> str:
    """How Windtunnel writes a JSON file: sorted keys (files diff cleanly), `str` for what JSON cannot hold."""
    return json.dumps(obj, indent=indent, sort_keys=True, default=str)


def atomic_write_json(path: str | Path, obj: Any, *, indent: int | None = None) -> None:
    """`obj` as `json_file_text` into `path`, atomically: the one JSON writer (issue 37)."""
    atomic_write_text(path, json_file_text(obj, indent))


def atomic_write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> None:
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data)


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def unwritable(path: str | Path, kind: str = "folder") -> str | None:
    """Why `path` cannot be written as a `kind` ("folder" or "file"), or None when it can: checked before the
    work, so a bad --out, cache or work dir is refused before anything is computed or written. The nearest
    existing folder is probed by creating and removing a temporary file (permission bits alone do not tell, e.g.
    for root on /proc or a read-only mount)."""
    path = Path(path)
    if any(len(part.encode()) > 255 for part in path.parts):  # NAME_MAX: stat() would raise ENAMETOOLONG
        return "a file or folder name longer than 255 bytes, which no common filesystem takes; give a shorter path"
    if kind == "folder" and path.exists() and not path.is_dir():
        return "it is a file, and this option takes a folder; give a folder path (or remove the file)"
    if kind == "file" and path.is_dir():
        return "it is a folder; give a file path inside it"
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
