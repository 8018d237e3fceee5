"""Terminal answers fit the terminal they are printed on; anything else (pipes, files, CI) gets 120 columns."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios

import pytest

from wtcommon.terminal import MIN_WIDTH, PIPE_WIDTH, terminal_width


@pytest.fixture
def tty():
    """A real pseudo-terminal whose size we set, as a terminal emulator does."""
    leader, follower = os.openpty()
    stream = os.fdopen(follower, "w")

    def size(cols: int) -> None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))

    yield stream, size
    stream.close()
    os.close(leader)


def test_a_terminal_gets_its_own_width(tty, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    stream, size = tty
    for cols in (90, 200):
        size(cols)
        assert terminal_width(stream) == cols
    size(30)
    assert terminal_width(stream) == MIN_WIDTH  # a fitted table narrower than this is unreadable
    monkeypatch.setenv("COLUMNS", "150")  # COLUMNS wins on a terminal, as for every program
    assert terminal_width(stream) == 150


def test_output_that_is_not_a_terminal_is_120_columns_whatever_columns_says(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    with open(tmp_path / "out.txt", "w") as f:
        assert terminal_width(f) == PIPE_WIDTH == 120
    assert terminal_width(io.StringIO()) == 120
    r, w = os.pipe()
    with os.fdopen(w, "w") as pipe:
        assert terminal_width(pipe) == 120
    os.close(r)
