"""The one place the command line turns an error into an exit code.

Every command is wrapped (cli/__init__.py): a `WindtunnelError` prints its message as one plain line on stderr
and exits with the error's `exit_code` (2 bad input, 3 cluster unreachable, 4 driver lease lost, 1 work failed;
wtcommon/errors.py). Commands do not catch our errors themselves; where a library raises its own exception on
bad input (a `ValueError` from a parser, say), the command turns it into a `UserError` at that call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from cli.console import fail
from wtcommon.errors import UserError, WindtunnelError

F = TypeVar("F", bound=Callable[..., Any])


def exits_cleanly(fn: F) -> F:
    """`fn` with every WindtunnelError mapped to its exit code (no traceback)."""

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WindtunnelError as exc:
            fail(str(exc), exc.exit_code)

    return command  # type: ignore[return-value]


@contextmanager
def as_user_error(*kinds: type[Exception]) -> Iterator[None]:
    """A library's own exception of `kinds` (default ValueError) raised on bad input becomes a UserError
    (exit 2) with the same message; our own errors pass through unchanged."""
    caught = kinds or (ValueError,)
    try:
        yield
    except WindtunnelError:
        raise
    except caught as exc:
        raise UserError(str(exc)) from exc


__all__ = ["as_user_error", "exits_cleanly"]
