"""The local trainer's resumable state, written into each checkpoint beside the weights: the optimizer's moments
(safetensors), the prompt order, the mixer's and the curriculum's state, and the compute spent so far (JSON,
and the curriculum's own npz + JSON sidecar from `policies.curricula.state`). Never pickle.

Why: a run killed after a checkpoint resumes from it and then trains exactly as the uninterrupted run would
(same prompts proposed, same weights), instead of restarting from step 0 and spending its rollouts again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.backend import TrainingError

STATE_DIR = "trainer_state"
_OPTIM = "optimizer.safetensors"
_META = "trainer_state.json"
_CURRICULUM = "curriculum.npz"


def _rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return json.loads(json.dumps(rng.bit_generator.state, default=int))


def order_state(order: Any) -> dict[str, Any]:
    """A `ShuffledOrder`'s position: its generator state, this epoch's permutation and the cursor."""
    return {"rng": _rng_state(order.rng), "perm": order.perm.tolist(), "pos": int(order.pos)}


def load_order_state(order: Any, state: dict[str, Any]) -> None:
    order.rng.bit_generator.state = state["rng"]
    order.perm, order.pos = np.asarray(state["perm"], dtype=np.int64), int(state["pos"])


def save_trainer_state(ckpt_dir: Path, *, step: int, optim: torch.optim.Optimizer, extra: dict[str, Any],
                       curriculum: Any = None) -> None:
    """Write the state into `<ckpt_dir>/trainer_state/` (the caller's temp checkpoint dir: renamed as a whole)."""
    from safetensors.torch import save_file

    d = Path(ckpt_dir) / STATE_DIR
    d.mkdir(parents=True, exist_ok=True)
    sd = optim.state_dict()
    tensors = {f"{i}.{k}": v.detach().clone().contiguous() for i, st in sd["state"].items() for k, v in st.items()
               if isinstance(v, torch.Tensor)}
    save_file(tensors, str(d / _OPTIM))
    meta = {"step": step, "param_groups": sd["param_groups"], "n_params": len(sd["state"]), **extra}
    (d / _META).write_text(json.dumps(meta, sort_keys=True, default=_json_default))
    if curriculum is not None:
        from policies.curricula.state import save_state

        save_state(d / _CURRICULUM, curriculum)


def _json_default(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON-serialisable")


def has_trainer_state(ckpt_dir: Path) -> bool:
    return (Path(ckpt_dir) / STATE_DIR / _META).is_file() and (Path(ckpt_dir) / STATE_DIR / _OPTIM).is_file()


def load_trainer_state(ckpt_dir: Path, optim: torch.optim.Optimizer, curriculum: Any = None) -> dict[str, Any]:
    """Restore the optimizer (and the curriculum) from a checkpoint's state; return the JSON part."""
    from safetensors.torch import load_file

    d = Path(ckpt_dir) / STATE_DIR
    meta = json.loads((d / _META).read_text())
    tensors = load_file(str(d / _OPTIM))
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        i, _, name = key.partition(".")
        state.setdefault(int(i), {})[name] = t
    if len(state) != meta["n_params"]:
        raise TrainingError(f"{d / _OPTIM}: optimizer state for {len(state)} parameters, expected "
                            f"{meta['n_params']}; delete the checkpoint to restart the run")
    optim.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    if curriculum is not None:
        from policies.curricula.state import load_state

        curriculum.load_state_dict(load_state(d / _CURRICULUM))  # a missing or foreign state: PolicyConfigError
    return meta
