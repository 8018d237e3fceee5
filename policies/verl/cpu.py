"""The CPU walls of verl 0.9.1 (VERL.md §8), each passed through a verl seam so its trainer runs on CPU.

Installed by the plugin on import (every verl process imports it: `VERL_USE_EXTERNAL_MODULES`) only when
`WINDTUNNEL_VERL_CPU=1`, which the CPU recipe sets; a GPU run never touches any of this. Nothing in
site-packages is edited. Walls and where each is handled:

1. TransferQueue storage units + Ray CPUs (`transfer_queue/interface.py:init`, each unit a `num_cpus=1`
   actor; `tq.init` hangs without free CPUs): recipe keys `transfer_queue.backend.SimpleStorage.
   num_data_storage_units=1` and the private runtime's `ray_kwargs.ray_init.num_cpus` (launcher).
2. Fake GPU (`verl/single_controller/ray/base.py:210,241` hard-code `use_gpu=True` for resource pools):
   `+ray_kwargs.ray_init.num_gpus=1` in the run's private Ray runtime; `WindtunnelCPUPlatform.
   ray_resource_name() == "GPU"` so worker groups ask for exactly that logical resource.
3./4. `cpu:gloo` process group (`verl/utils/distributed.py:89` builds `cpu:gloo,<device>:<backend>`, which
   is `cpu:gloo,cpu:gloo` -> "Duplicate device type cpu" for a CPU device): `install()` wraps
   `initialize_global_process_group_ray` (in `verl.utils.distributed` and the name imported into
   `verl.workers.engine_workers`, `:38`) to default to `backend="cpu:gloo"`.
5. FSDP engine registered only for cuda/npu (`verl/workers/engine/fsdp/transformer_impl.py:1143`):
   `install()` registers verl's own `FSDPEngineWithLMHead` for `device="cpu"` through `EngineRegistry.register`.
6. flash-attention default (`verl/workers/config/model.py:185`): recipe keys
   `+actor_rollout_ref.model.override_config.attn_implementation=sdpa` and `...model.use_remove_padding=false`.
7. `current_device()` (`verl/utils/device.py:get_device_id` -> `model.to(get_device_id())`, FSDP init):
   the platform below returns `"cpu"`; selected with `VERL_PLATFORM=windtunnel_cpu`
   (`verl/plugin/platform/platform_manager.py:_detect_platform_name`).
8. Rollout: `policies.verl.hf_rollout` (registered through verl's rollout registries).
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from typing import Any

import torch

CPU_ENV = "WINDTUNNEL_VERL_CPU"
PLATFORM_NAME = "windtunnel_cpu"


def enabled() -> bool:
    return os.environ.get(CPU_ENV, "") == "1"


class _CPUDeviceModule(types.ModuleType):
    """`torch.cpu` plus no-op stand-ins for the `torch.cuda` calls verl makes through
    `get_torch_device()` (empty_cache, memory stats, seeding, streams' synchronize)."""

    def __init__(self) -> None:
        super().__init__("windtunnel_cpu_device")

    def __getattr__(self, name: str) -> Any:
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
            return lambda *a, **k: 0
        if name == "mem_get_info":
            return lambda *a, **k: (0, 0)
        if name in ("manual_seed", "manual_seed_all"):
            return lambda seed: torch.manual_seed(seed)
        if name == "get_rng_state":
            return lambda *a, **k: torch.get_rng_state()
        if name == "set_rng_state":
            return lambda state, *a, **k: torch.set_rng_state(state)
        if name == "is_initialized":
            return lambda: True
        if name == "get_device_name":  # `verl/utils/flops_counter.py:get_device_flops` tests `key in name`
            return lambda *a, **k: "CPU"
        # empty_cache, reset_peak_memory_stats, ipc_collect, set_per_process_memory_fraction, ...
        return lambda *a, **k: None


_DEVICE_MODULE = _CPUDeviceModule()


class _CPUDevice:
    """The device half of the CPU platform: device "cpu", one of it, and no-op device calls (wall 7)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return enabled()  # never auto-detected on a GPU machine unless the CPU recipe asked for it

    def current_device(self) -> Any:
        return "cpu"  # wall 7: `model.to(get_device_id())`

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: Any) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None


class _CPURuntime:
    """The runtime half of the CPU platform: gloo, the Ray resource "GPU" (wall 2), no profiler, IPC or CUDA."""

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # wall 2: the fake GPU of the run's private Ray runtime

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def rollout_env_vars(self) -> dict[str, str]:
        return {}

    def get_collective_module(self) -> Any:
        return None

    def cudart(self) -> Any:
        return None


def _platform_cls() -> type:
    """The platform class: the two halves above on verl's `PlatformBase`, built here because verl is imported
    only on the CPU path."""
    from verl.plugin.platform.platform_base import PlatformBase

    class WindtunnelCPUPlatform(_CPUDevice, _CPURuntime, PlatformBase):
        """verl platform for CPU: device "cpu", gloo, Ray resource "GPU" (the private runtime's fake GPU)."""

    return WindtunnelCPUPlatform


def _gloo_default(fn):
    @functools.wraps(fn)
    def wrapper(timeout_second=None, backend=None):
        return fn(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    wrapper.__windtunnel_cpu__ = True
    return wrapper


_INSTALLED = False


def register_platform() -> None:
    """Register the CPU platform. Must run before anything imports verl's engines: they read the
    platform at import time (`verl/workers/engine/fsdp/transformer_impl.py:89`)."""
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get(PLATFORM_NAME) is None:
        PlatformRegistry.register(PLATFORM_NAME)(_platform_cls())


def install() -> None:
    """Register the FSDP engine for cpu and default the process group to gloo (after `register_platform`).
    Idempotent; only called when `WINDTUNNEL_VERL_CPU=1`."""
    global _INSTALLED
    if _INSTALLED:
        return
    register_platform()
    import verl.utils.distributed as vdist

    if not getattr(vdist.initialize_global_process_group_ray, "__windtunnel_cpu__", False):
        vdist.initialize_global_process_group_ray = _gloo_default(vdist.initialize_global_process_group_ray)
    import verl.workers.engine_workers as ew  # binds the name at import (`engine_workers.py:38`)

    ew.initialize_global_process_group_ray = vdist.initialize_global_process_group_ray

    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    registry = EngineRegistry._engines.get("language_model", {})
    for backend in ("fsdp", "fsdp2"):
        if "cpu" not in registry.get(backend, {}):
            EngineRegistry.register(model_type="language_model", backend=backend, device="cpu")(FSDPEngineWithLMHead)
    _INSTALLED = True
