"""The one error type of the policy library, so callers (CLI, launcher) can turn it into exit code 2."""

from __future__ import annotations
from wtcommon.errors import UserError


class PolicyConfigError(UserError):
    """A policy configuration or batch is invalid; the message names the policy, the field and the fix."""
