"""The verl run's private Ray runtime: the `ray_kwargs.ray_init` overrides, the one-node runtime's temp dir, and the
environment verl's process starts in (docs/verl_on_cpu.md, "Isolation").

Why a module of its own: how a run is kept out of the shared cluster (its own GCS, loopback only, an object
store sized to it, its files out of `/tmp/ray`) is one decision, read by `training.verl_launcher` when it builds
and runs the `main_ppo` command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.backend import TrainingConfigError

# CPUs of each node of a multi-node run's private runtime: verl's workers, rollout servers and TransferQueue
# actors ask for CPUs there, not in the shared cluster (whose bundle holds 1 CPU per node), as the one-node
# runtime's `ray_init.num_cpus` does.
PRIVATE_NODE_CPUS = 16

# Object store of a one-node private runtime (`ray_init.object_store_memory`) unless the recipe sets its own: a share
# per GPU of the run, 512 MiB for a CPU run. Ray's default is 30% of the node's RAM for *each* runtime, so eight
# one-GPU runs on one node would each claim it. A run that outgrows it spills objects to its temp dir (slower,
# not wrong).
OBJECT_STORE_MIN_BYTES = 512 * 1024**2
OBJECT_STORE_BYTES_PER_GPU = 2 * 1024**3

# Ray's unix sockets (`<temp dir>/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store`) must fit in 107 bytes
# (sockaddr_un); the part after the temp dir takes up to this many.
RAY_SOCKET_MAX = 107
RAY_SESSION_SUFFIX = len("/session_2026-12-01_18-20-41_323245_4194304/sockets/plasma_store")


def private_temp_dir(train_dir: Path) -> Path:
    """A fresh temp dir for one launch's one-node private Ray runtime (its sessions, logs, sockets and spilled
    objects), removed by the launcher when the launch ends: `<train dir>/ray-XXXXXX` when Ray's socket paths fit
    under it, else a short `/tmp/wt-rt-XXXXXX` (a run dir in a work dir is usually too deep). Never Ray's shared
    default `/tmp/ray`, where every launch left a session behind."""
    import tempfile

    room = RAY_SOCKET_MAX - RAY_SESSION_SUFFIX - len("/ray-XXXXXXXX")
    train_dir = Path(train_dir).resolve()
    if len(str(train_dir)) <= room:
        return Path(tempfile.mkdtemp(prefix="ray-", dir=train_dir))
    base = tempfile.gettempdir() if len(tempfile.gettempdir()) <= room else "/tmp"
    return Path(tempfile.mkdtemp(prefix="wt-rt-", dir=base))


# A one-node private runtime on 127.0.0.1 only. `ray_init._node_ip_address="127.0.0.1"` is not enough: `ray.init`
# turns a loopback address into the host's (`ray/_private/services.py::resolve_ip_for_localhost`). With this
# variable Ray's node address is 127.0.0.1 (`services.get_node_ip_address`), and its GCS, raylet, workers,
# dashboard agent and runtime-env agent then listen on loopback only (seen with `ss -ltnp`, Ray 2.60).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

# Ray Job env vars that point a process at the shared cluster (ray dashboard/modules/job/job_supervisor.py::
# _get_driver_env_vars). Removed from verl's env so its `ray.init` starts the run's private runtime.
CLUSTER_ENV_VARS = ("RAY_ADDRESS", "RAY_JOB_CONFIG_JSON_ENV_VAR")


def runtime_overrides(ov: dict[str, Any], private_address: str | None = None, *, ray_temp_dir: Path | None = None,
                      run_gpus: int = 0) -> dict[str, Any]:
    """`ov` with `ray_kwargs.ray_init` for the run's private Ray runtime (docs/verl_on_cpu.md, "Isolation").

    verl's `main_ppo` calls `ray.init(**ray_kwargs.ray_init)` (`verl/trainer/main_ppo.py:57-74`).
    One node: `address=local` makes that a fresh single-node runtime owned by this run, never the cluster the
    job runs on: `num_cpus`/`num_gpus` are then legal (Ray refuses them when connecting to a cluster,
    `ray/_private/worker.py`), and every named actor (TransferQueue's controller in its fixed namespace
    `transfer_queue`, `transfer_queue/interface.py:200`; verl's rollout servers) lives in a GCS no other
    run can see. GPUs: the runtime autodetects the job's `CUDA_VISIBLE_DEVICES`, which Ray sets from the
    job's `entrypoint_num_gpus` reservation, so it sees exactly the GPUs reserved for this run.
    The one-node runtime keeps its files in `ray_temp_dir` (never `/tmp/ray`), listens on 127.0.0.1 only
    (`LOOPBACK_ENV`, set by `build_command`), serves no dashboard, and gets an
    object store sized to the run (`OBJECT_STORE_*`; a recipe's own `ray_kwargs.ray_init.object_store_memory`
    wins).
    `nnodes > 1`: verl connects to `private_address`, the run's own runtime started on the nodes its placement
    group holds ("Two nodes"); its resources are those nodes', so `num_cpus`/`num_gpus` are dropped."""
    nnodes = int(ov.get("trainer.nnodes") or 1)
    out = dict(ov)
    if nnodes > 1:
        if not private_address:
            raise TrainingConfigError(
                f"trainer.nnodes: {nnodes}: a multi-node verl run trains in a private runtime spanning the nodes its "
                "placement group holds (docs/verl_on_cpu.md, 'Two nodes'); run it as a Ray Job (campaign submit)")
        for k in [k for k in out if k.lstrip("+").startswith("ray_kwargs.ray_init.num_")]:
            del out[k]
        out.update({"+ray_kwargs.ray_init.address": private_address})
        return out
    out.update({"+ray_kwargs.ray_init.address": "local", "+ray_kwargs.ray_init.include_dashboard": False})
    if "ray_kwargs.ray_init.num_cpus" not in out:
        out["ray_kwargs.ray_init.num_cpus"] = 64
    if not any(k.lstrip("+") == "ray_kwargs.ray_init.object_store_memory" for k in out):
        out["+ray_kwargs.ray_init.object_store_memory"] = max(OBJECT_STORE_MIN_BYTES,
                                                             OBJECT_STORE_BYTES_PER_GPU * max(0, run_gpus))
    if ray_temp_dir is not None:
        out["+ray_kwargs.ray_init._temp_dir"] = str(ray_temp_dir)
    return out


def private_runtime_env(parent: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """The environment of verl's process: the parent's (the Ray Job's) without the variables that attach
    to the shared cluster, plus the run's own variables."""
    env = {k: v for k, v in parent.items() if k not in CLUSTER_ENV_VARS}
    env.update(extra)
    return env
