"""Library loggers that print INFO chatter into our commands' output, turned down to warnings.

Why: MLflow logs `Creating initial MLflow database tables` and alembic's migrations at INFO, Ray's job client
`Uploading package` per job; none of it is an answer or a problem of the user's, and it buried the ones that
are. MLflow configures its logger when imported, so this is called after importing it."""

from __future__ import annotations

import logging

NOISY = ("mlflow", "alembic", "ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk",
         "ray.dashboard.modules.job")


def quiet_libraries() -> None:
    """Warnings and errors of the noisy libraries still reach stderr; their INFO lines do not."""
    for name in NOISY:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)
