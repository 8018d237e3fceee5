"""Ray Jobs executor (JobSubmissionClient), with token auth configured consistently.

Ray Jobs takes the entrypoint as one command string; we build it from an argv list with
`shlex.join`, so no caller ever composes a shell string (rule 6).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from collections.abc import Mapping, Sequence

from orchestrator.engine.executor.base import ClusterUnreachable, DuplicateSubmission, Executor, JobStatus, NoJobAgent
from orchestrator.engine.placement import Node
from wtcommon.polling import wait_until

_UNREACHABLE_HINTS = ("connection refused", "failed to connect", "max retries exceeded", "timed out",
                      "name or service not known", "connectionerror", "newconnectionerror", "cannot connect")


_AUTH_HINTS = ("authentication failed", "invalid authentication token", "unauthorized", "401 client error")


class ClusterAuthError(ClusterUnreachable):
    """The cluster answered but refused our token: a configuration error the user fixes (exit 2), not an outage."""

    exit_code = 2

    def __init__(self, address: str, token_file: Path | None, detail: str):
        src = (f"the token file {token_file}" if token_file else
               "RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH of the environment" if os.environ.get("RAY_AUTH_TOKEN")
               or os.environ.get("RAY_AUTH_TOKEN_PATH") else "no token")
        super().__init__(f"Ray at {address} refused authentication with {src}; give the cluster's own token: "
                         "`export RAY_AUTH_TOKEN_PATH=/path/to/the/cluster/token` (used for --ray-address unless the "
                         "work directory owns a local head), then run the command again. Ray said: "
                         + detail.split("\n")[0][-300:])


def configure_token_auth(token_file: Path | None) -> None:
    """Token auth for this process (the Ray client): RAY_AUTH_MODE=token + the workdir token file."""
    if token_file is None:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token_file)
    os.environ.pop("RAY_AUTH_TOKEN", None)
    try:  # refresh Ray's cached config/token if ray was already imported (as Ray itself does)
        # private names (not in Ray's stubs) that exist at runtime; a Ray without them is tolerated below
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except Exception:
        pass


def stage_gpus(argv: Sequence[str]) -> int:
    """GPUs a stage job's entrypoint must hold in Ray's own accounting, read from its run spec (`--run-spec`).

    A one-node verl run trains in a private Ray runtime on the GPUs its job reserved (docs/verl_on_cpu.md), so
    the reservation is the run's `gpus` for `train` and one of them for `evaluate`; Ray then refuses to
    oversubscribe, whoever else uses the cluster. A multi-node train stage holds 0 here and reserves its nodes
    in a placement group. 0 when the argv is not a stage command."""
    from orchestrator.engine.grid import RunSpec

    args = [str(a) for a in argv]
    if "orchestrator.engine.stages" not in args or "--run-spec" not in args:
        return 0
    stage = args[args.index("orchestrator.engine.stages") + 1]
    raw = args[args.index("--run-spec") + 1]
    try:
        spec = RunSpec.from_json(raw if raw.lstrip().startswith("{") else Path(raw).read_text())
    except (OSError, ValueError, TypeError, KeyError):
        return 0
    gpus, nnodes = int(spec.gpus or 0), spec.nnodes
    if stage != "train":
        return min(1, gpus)
    # a multi-node run reserves all its nodes' GPUs in one STRICT_SPREAD placement group that the stage creates
    # (training.reservation): its entrypoint holds none, or Ray would count one node twice
    return 0 if nnodes > 1 else gpus


class RayJobsExecutor(Executor):
    def __init__(self, address: str, *, token_file: Path | None = None, job_env: Mapping[str, str] | None = None):
        self.address = address if "://" in address else f"http://{address}"
        self.token_file = token_file
        self.job_env = dict(job_env or {})
        # local files/dirs shipped to every job via runtime_env (the researcher's plugin modules), so a
        # remote cluster's jobs import them too (orchestrator.engine.plugins.plugin_paths)
        self.py_modules: list[str] = []
        configure_token_auth(token_file)
        self._client = None
        self.agent_wait_s = 60.0

    @property
    def client(self):
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            from orchestrator.engine.quiet import quiet_libraries

            quiet_libraries()

            try:
                self._client = JobSubmissionClient(self.address)
            except Exception as exc:
                raise ClusterUnreachable(f"Ray at {self.address} is unreachable: {exc}") from None
        return self._client

    def _call(self, fn, *a, **kw):
        try:
            return self._call_unchecked(fn, *a, **kw)
        except ClusterUnreachable as exc:
            if any(h in str(exc).lower() for h in _AUTH_HINTS):
                raise ClusterAuthError(self.address, self.token_file, str(exc)) from None
            raise

    def _call_unchecked(self, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except (ConnectionError, TimeoutError) as exc:
            raise ClusterUnreachable(f"Ray at {self.address} is unreachable: {exc}") from None
        except RuntimeError as exc:
            msg = str(exc).lower()
            if any(h in msg for h in _UNREACHABLE_HINTS):
                raise ClusterUnreachable(f"Ray at {self.address} is unreachable: {exc}") from None
            raise
        except Exception as exc:  # requests exceptions
            if any(h in (type(exc).__name__ + str(exc)).lower() for h in _UNREACHABLE_HINTS):
                raise ClusterUnreachable(f"Ray at {self.address} is unreachable: {exc}") from None
            raise

    def ping(self) -> None:
        self._call(lambda: self.client.get_version())

    def submit(self, submission_id: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
               num_cpus: float = 0, num_gpus: float = 0) -> None:
        entrypoint = shlex.join([str(a) for a in argv])
        num_gpus = num_gpus or stage_gpus(argv)
        env_vars = {**self.job_env, **(env or {})}
        if self.token_file is not None:
            env_vars |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_file)}
        refused: list[str] = []

        def submitted() -> bool:
            try:
                self._call(self.client.submit_job, entrypoint=entrypoint, submission_id=submission_id,
                           runtime_env={"env_vars": env_vars, **({"py_modules": list(self.py_modules)}
                                                                 if self.py_modules else {})},
                           entrypoint_num_cpus=num_cpus,
                           entrypoint_num_gpus=num_gpus or None)
                return True
            except RuntimeError as exc:
                # Ray refuses a reused submission_id with HTTP 500 "... already exists": reattach.
                if "already exists" in str(exc) or "already been used" in str(exc):
                    raise DuplicateSubmission(submission_id) from None
                # A fresh head has no job agent for a few seconds: "No available agent ... try again later".
                if "try again later" in str(exc):
                    refused[:] = [str(exc)]
                    return False
                raise

        if not wait_until(submitted, self.agent_wait_s, interval_s=1.0):
            raise NoJobAgent(f"Ray at {self.address} has no job agent after {self.agent_wait_s:.0f} s: "
                             f"{refused[-1] if refused else ''}") from None

    def status(self, submission_id: str) -> JobStatus:
        try:
            info = self._call(self.client.get_job_info, submission_id)
        except RuntimeError as exc:
            if "does not exist" in str(exc) or "404" in str(exc) or "not found" in str(exc).lower():
                return JobStatus("MISSING", str(exc))
            raise
        return JobStatus(str(info.status.value if hasattr(info.status, "value") else info.status),
                         info.message or "", getattr(info, "driver_exit_code", None))

    def logs(self, submission_id: str) -> str:
        try:
            return self._call(self.client.get_job_logs, submission_id)
        except RuntimeError as exc:
            return f"<no logs: {exc}>"

    def nodes(self) -> list[Node] | None:
        """Alive nodes with Ray's own per-node GPU accounting (`/api/cluster_status`: the autoscaler monitor's
        `usageByNode`, refreshed every few seconds; a dead node drops out of it). None when the head does not
        report it (no monitor yet, an older Ray): the scheduler then uses the declared cluster."""
        from orchestrator.engine.placement import Node

        try:
            resp = self._call(lambda: self.client._do_request("GET", "/api/cluster_status", timeout=10))
            data = resp.json()["data"]
            usage = data["clusterStatus"]["loadMetricsReport"]["usageByNode"]
        except ClusterUnreachable:
            raise
        except Exception:
            return None
        if not usage:
            return None
        out = []
        for node_id, res in sorted(usage.items()):
            used_g, total_g = (res.get("GPU") or [0.0, 0.0])[:2]
            used_c, total_c = (res.get("CPU") or [0.0, 0.0])[:2]
            out.append(Node(node_id, float(total_g), float(total_g) - float(used_g), float(total_c),
                            float(total_c) - float(used_c)))
        return out

    def stop(self, submission_id: str) -> bool:
        try:
            return bool(self._call(self.client.stop_job, submission_id))
        except RuntimeError:
            return False
