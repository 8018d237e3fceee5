"""The consoles and the one error exit every `campaign` command uses.

User errors print one line to stderr and exit non-zero (2 = bad input, 3 = cluster unreachable)
with no traceback. The message is printed as plain text, never as Rich markup, so a file name,
a Hydra override or a list like `[1, 2]` in it is shown exactly as written.
"""

from __future__ import annotations

import math
from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

out = Console()
err = Console(stderr=True)


def fail(msg: str, code: int = 2) -> NoReturn:
    err.print(Text.assemble(("error:", "bold red"), " ", msg), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def signed(v: object, digits: int = 4) -> str:
    """A float with its sign (NaN spelled out: missing is never shown as 0); anything else as str."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:+.{digits}f}"
    return str(v)
