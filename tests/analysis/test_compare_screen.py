"""`campaign compare` on a terminal answers in one screen (issue 27): on the released 171 runs its full Markdown is
~450 lines; a terminal gets the first aggregate's comparisons with the smallest Holm p and how to see the rest,
while `--all`, a pipe or `--out` get every table. Cost: two CLI runs in a pseudo-terminal, ~8 CPU-s."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path
from tests.released import RELEASED

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))


def _on_terminal(args: list[str], cols: int = 120) -> tuple[int, list[str]]:
    """Run `campaign ARGS` with stdout on a real pseudo-terminal `cols` wide: (exit code, lines printed)."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen([CAMPAIGN, *args], stdout=follower, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                         env=env, cwd=REPO)
    os.close(follower)
    chunks = []
    while True:
        try:
            b = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command has exited
            break
        if not b:
            break
        chunks.append(b)
    os.close(leader)
    rc = p.wait(timeout=120)
    return rc, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n").rstrip("\n").splitlines()


def test_compare_on_a_terminal_fits_one_screen_and_says_how_to_see_the_rest() -> None:
    rc, lines = _on_terminal(["compare", str(RELEASED)])
    assert rc == 0
    assert len(lines) <= 40 and max(map(len, lines)) <= 120, "\n".join(lines)
    assert lines[0] == "## Paired comparisons (DB-12): the 15 of 45 with the smallest Holm p"
    table = [ln for ln in lines if ln.startswith("| ") and "policy" not in ln]
    assert len(table) == 15 and "p Holm" in lines[2]
    holm = [float(ln.split("|")[lines[2].split("|").index(" p Holm ")]) for ln in table]
    assert holm == sorted(holm)  # the smallest Holm p first
    text = "\n".join(lines)
    assert "30 more comparisons and the other aggregates (Macro-12, Item-12, Math-Heavy-6)" in text
    assert "--all prints every table" in text and text.count("small n:") == 1

    rc, every = _on_terminal(["compare", str(RELEASED), "--all"])
    assert rc == 0 and len(every) > 400 and "--all prints every table" not in "\n".join(every)
    assert every[0] == "## Paired comparisons vs campaign-local reference (DB-12)"
