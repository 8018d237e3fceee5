"""Executors for stage jobs: the Ray Jobs API (local head or cluster)."""

from __future__ import annotations

from orchestrator.engine.executor.base import (ClusterUnreachable, DuplicateSubmission, Executor, JobStatus,
                                              submission_id)
from orchestrator.engine.executor.ray_jobs import RayJobsExecutor

__all__ = ["ClusterUnreachable", "DuplicateSubmission", "Executor", "JobStatus", "RayJobsExecutor", "submission_id"]
