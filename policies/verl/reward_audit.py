"""An audit of the reward function verl calls: with `WINDTUNNEL_REWARD_AUDIT_DIR=<dir>` in a verl run's
environment, every call of `evaluation.reward.compute_score` appends one JSON line to
`<dir>/calls-<pid>.jsonl` (data source, ground truth, score, status). A relative `<dir>` in a recipe's `env:` is
made the run's own by the verl launcher (`<run>/train/<dir>`), so each run of a campaign is audited apart.

Why: verl calls the reward inside its reward-loop workers (`experimental/reward_loop/reward_manager/naive.py:
run_single`, in a thread pool), where nothing is logged per call. Comparing the lines with the trainer's
`windtunnel/rollouts` metric shows the reward ran exactly once for every rollout. The plugin installs the
wrapper on `import verl` in every process of the run, before verl's `load_extern_object` (`trainer/ppo/
reward.py:get_custom_reward_fn`) looks `compute_score` up by name, so verl calls the wrapper. Off by default.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from pathlib import Path
from typing import Any
from collections.abc import Callable

AUDIT_ENV = "WINDTUNNEL_REWARD_AUDIT_DIR"
_LOCK = threading.Lock()


def audited(fn: Callable[..., Any], out_dir: Path) -> Callable[..., Any]:
    """`fn` that appends one line per call to `<out_dir>/calls-<pid>.jsonl` after computing the result."""

    @functools.wraps(fn)
    def wrapper(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, **kwargs: Any) -> Any:
        res = fn(data_source, solution_str, ground_truth, extra_info, **kwargs)
        score = res["score"] if isinstance(res, dict) else res
        line = json.dumps({"data_source": str(data_source), "ground_truth": str(ground_truth), "score": float(score),
                           "status": res.get("status") if isinstance(res, dict) else None})
        with _LOCK:  # verl runs the reward in an executor's threads
            out_dir.mkdir(parents=True, exist_ok=True)
            with open(out_dir / f"calls-{os.getpid()}.jsonl", "a") as fh:
                fh.write(line + "\n")
        return res

    wrapper.__wrapped_for_audit__ = True  # type: ignore[attr-defined]
    return wrapper


def install(environ: dict[str, str] | None = None) -> bool:
    """Wrap `evaluation.reward.compute_score` when the audit variable is set; True when installed."""
    env = os.environ if environ is None else environ
    target = env.get(AUDIT_ENV)
    if not target:
        return False
    from evaluation import reward

    if not getattr(reward.compute_score, "__wrapped_for_audit__", False):
        reward.compute_score = audited(reward.compute_score, Path(target))
    return True


def read_calls(out_dir: Path) -> list[dict[str, Any]]:
    """Every audited call under `out_dir` (all processes)."""
    return [json.loads(line) for f in sorted(Path(out_dir).glob("calls-*.jsonl")) for line in f.read_text().splitlines()
            if line]
