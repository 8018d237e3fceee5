"""The width terminal answers are fitted to: the terminal's own on a TTY, a fixed 120 columns otherwise.

Why: tables fitted to a fixed 120 columns wrapped on a narrow terminal and wasted a wide one; output piped to a
file, a test or CI must not depend on the window it was started from, so it stays at 120.
"""

from __future__ import annotations

import os
import sys
from typing import IO

PIPE_WIDTH = 120  # output that is not a terminal (files, pipes, tests, CI): deterministic
MIN_WIDTH = 60  # narrower than this, a fitted table is no longer readable: let the terminal wrap instead


def terminal_width(stream: IO[str] | None = None) -> int:
    """Columns to fit terminal text to: the width of the terminal `stream` (default stdout) is, `COLUMNS` first as
    for every program (what shutil.get_terminal_size does, for this stream rather than the process's stdout);
    PIPE_WIDTH when the stream is not a terminal, whatever COLUMNS says."""
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    if not tty:
        return PIPE_WIDTH
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    try:
        return max(MIN_WIDTH, os.get_terminal_size(stream.fileno()).columns)
    except (OSError, ValueError, AttributeError):  # a TTY that will not say its size
        return PIPE_WIDTH
