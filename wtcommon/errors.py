"""The root of every error Windtunnel raises on purpose, and the exit code each kind means.

Why one tree: a command catches `WindtunnelError` and exits with its `exit_code`, instead of catching a dozen
unrelated classes; a test (`tests/test_code_rules.py`) keeps every exception class of our packages inside it.
The kinds keep their standard bases (`UserError` is a `ValueError`, the others `RuntimeError`s), so code that
catches those still does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WindtunnelError(Exception):
    """An error Windtunnel raises on purpose; its message says what happened and what to do."""

    exit_code: int = 1


class UserError(WindtunnelError, ValueError):
    """Bad input (a spec, records, a config, an option): nothing was written. Exit 2."""

    exit_code = 2


class ClusterError(WindtunnelError, RuntimeError):
    """The cluster could not be reached or refused us; no run was marked failed. Exit 3."""

    exit_code = 3


class RunFailed(WindtunnelError, RuntimeError):
    """Work was attempted and failed (a stage, a training launch, a driver that lost its lease). Exit 1."""

    exit_code = 1


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


__all__ = ["ClusterError", "RunFailed", "UserError", "WindtunnelError",
           "as_user_error"]
