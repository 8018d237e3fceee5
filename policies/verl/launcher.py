"""What the verl launcher needs to activate the plugin (called by training's verl launcher)."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence

import yaml

from policies.errors import PolicyConfigError

PLUGIN_MODULE = "policies.verl.plugin"
ENTRY_POINT = "windtunnel"
# where a launch's processes put their weight-transfer sockets (its own Ray temp dir; policies/verl/vllm_cpu.py)
IPC_DIR_ENV = "WINDTUNNEL_IPC_DIR"
# set in every process of a launched run: the plugin then serves verl's `vllm` rollout name through the
# per-request-seeded server (policies/verl/vllm_seeded.py); verl used outside Windtunnel keeps its own
SEEDED_ROLLOUT_ENV = "WINDTUNNEL_ROLLOUT_SEEDS"
SEEDED_ROLLOUT_VALUE = "per-request"  # a string to Hydra (a bare 1 would reach Ray as an int and be refused)


def launcher_env() -> dict[str, str]:
    """Environment for the `main_ppo` process: import the plugin with plain importlib before entry points,
    so a broken plugin aborts `import verl` instead of being skipped silently (VERL.md §2)."""
    return {"VERL_USE_EXTERNAL_MODULES": PLUGIN_MODULE, SEEDED_ROLLOUT_ENV: SEEDED_ROLLOUT_VALUE}


def launcher_overrides(policy_path: str | Path, *, seed: int | None = None, domains: Sequence[str] | None = None,
                       domain_key: str = "domain") -> list[str]:
    """Hydra override strings for `python -m verl.trainer.main_ppo` that activate the policy plugin.

    Every policy, `baseline` included, runs through `windtunnel_sync` so selectors and their baseline share
    one code path (for `mechanism: none` the hook writes nothing). The policy file is passed by absolute
    path; the env-var override propagates the plugin import to Ray workers when attaching to a cluster."""
    path = Path(policy_path).resolve()
    if not path.is_file():
        raise PolicyConfigError(f"{path}: policy file not found")
    if any(c in str(path) for c in " ,=[]{}'\""):
        raise PolicyConfigError(f"{path}: policy path contains characters Hydra overrides cannot carry; move the file")
    out = [
        "trainer.v1.trainer_mode=windtunnel_sync",
        f"+windtunnel.policy={path}",
        f"+windtunnel.domain_key={domain_key}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE}",
        f"+ray_kwargs.ray_init.runtime_env.env_vars.{SEEDED_ROLLOUT_ENV}={SEEDED_ROLLOUT_VALUE}",
    ]
    if seed is not None:
        out.append(f"+windtunnel.seed={int(seed)}")
    # the caller's domains (the verl launcher passes the ones it wrote); the file is read only when none are given
    doms = list(domains) if domains is not None else list((yaml.safe_load(path.read_text()) or {}).get("domains") or [])
    if doms:
        out.append(f"+windtunnel.domains=[{','.join(doms)}]")
    return out
