"""Training backends by name. Apart from `backend.py` (the interface the backends import), so that the
backends import the interface and only this registry imports the backends: no cycle."""

from __future__ import annotations

from orchestrator.training.backend import TrainingBackend, TrainingConfigError


def get_backend(name: str) -> TrainingBackend:
    """`local` (CPU GRPO on tiny models), `verl` (GPU, `verl.trainer.main_ppo`) or `noop` (no model: the
    campaign path alone, for tests)."""
    if name == "noop":
        from orchestrator.training.noop import NoopBackend

        return NoopBackend()
    if name == "local":
        from orchestrator.training.local import LocalBackend

        return LocalBackend()
    if name == "verl":
        from orchestrator.training.verl_launcher import VerlBackend

        return VerlBackend()
    raise TrainingConfigError(f"unknown training backend {name!r}; choose 'local' (CPU) or 'verl' (GPU)")
