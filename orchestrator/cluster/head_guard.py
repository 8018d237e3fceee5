"""Keeps a local Ray head's temp dir private (0700, and nothing under it open to group or others) for as
long as the head lives.

Why a process: Ray makes the directories it creates world-writable (`try_make_directory_shared`: 0777),
again whenever a job starts a runtime env, and offers no option to stop it. This guard, started with the
head by `local_head`, re-applies the modes: the temp dir and the session's top directories every 0.2 s,
the whole tree every 2 s. Its argv names the temp dir, so stopping the head stops it; it exits by itself
when the head's GCS server is gone.
"""

from __future__ import annotations

import argparse
import os
import stat
import time
from pathlib import Path

TOP_S, TREE_S = 0.2, 2.0


def _private(path: str, mode: int) -> None:
    """Clear the group/other bits of one entry (files keep their owner bits: 0644 -> 0600, 0777 -> 0700)."""
    if mode & 0o077:
        try:
            os.chmod(path, stat.S_IMODE(mode) & 0o700)
        except OSError:
            pass  # gone meanwhile, or not ours


def _top(tmp: Path) -> None:
    """The temp dir, its direct entries and those of the latest session: where Ray re-chmods."""
    for d in (tmp, tmp / "session_latest"):
        try:
            _private(str(d), os.stat(d).st_mode)
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        _private(e.path, e.stat(follow_symlinks=False).st_mode)
        except OSError:
            continue


def _tree(tmp: Path) -> None:
    for root, dirs, files in os.walk(tmp):
        for name in dirs + files:
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode):
                _private(p, st.st_mode)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def guard(tmp: Path, gcs_pid: int) -> None:
    last_tree = 0.0
    while _alive(gcs_pid):
        _top(tmp)
        if time.monotonic() - last_tree >= TREE_S:
            _tree(tmp)
            last_tree = time.monotonic()
        time.sleep(TOP_S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--temp-dir", required=True, type=Path)
    ap.add_argument("--gcs-pid", required=True, type=int)
    a = ap.parse_args()
    guard(a.temp_dir, a.gcs_pid)


if __name__ == "__main__":
    main()
