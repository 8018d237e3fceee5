"""`campaign` commands for the policy area."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
