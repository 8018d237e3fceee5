"""The one place the command line turns an error into an exit code.

Every command is wrapped when it is registered (`cli.groups.command`, used by each area's `register()`), so the
main app and an app a test builds from `register()` alone exit alike: a `WindtunnelError` prints its message as
one plain line on stderr and exits with the error's `exit_code` (2 bad input, 3 cluster unreachable, 4 driver
lease lost, 1 work failed; wtcommon/errors.py). Commands do not catch our errors themselves
(tests/test_code_rules.py refuses an `except` in cli/ that exits); where a library raises its own exception on
bad input (a `ValueError` from a parser, say), the command turns it into a `UserError` at that call.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from cli.console import fail
from wtcommon.errors import WindtunnelError, as_user_error  # as_user_error: re-exported for the commands

F = TypeVar("F", bound=Callable[..., Any])

# every exit code a command may end with, as docs/guide/cli.md's table states them (tests/test_exit_codes.py
# checks the two agree, every error class's code is here, and every command's --help ends with this line)
EXIT_CODES: dict[int, str] = {0: "done", 1: "runs or a check failed", 2: "bad input (nothing written)",
                              3: "cluster unreachable", 4: "driver lease lost", 5: "drained on SIGTERM"}
EXIT_EPILOG = "Exit codes: " + "; ".join(f"{c} {m}" for c, m in EXIT_CODES.items()) + " (docs/guide/cli.md)."


def exits_cleanly(fn: F) -> F:
    """`fn` with every WindtunnelError mapped to its exit code (no traceback). Wrapping twice wraps once."""
    if getattr(fn, "exits_cleanly", False):
        return fn

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WindtunnelError as exc:
            fail(str(exc), exc.exit_code)
        except OSError as exc:  # a path argument no filesystem takes, wherever it is first opened: bad input
            if exc.errno != errno.ENAMETOOLONG:
                raise
            name = str(exc.filename or "")
            fail(f"{name[:60]}{'…' if len(name) > 60 else ''}: a file name longer than the filesystem allows "
                 f"({len(name)} characters); pass a shorter path", 2)

    command.exits_cleanly = True  # type: ignore[attr-defined]
    return command  # type: ignore[return-value]


__all__ = ["EXIT_CODES", "EXIT_EPILOG", "as_user_error", "exits_cleanly"]
