"""The `noop` training backend: no model, the same stage, ledger and executor path as a real one.

Why: fault, scheduling and tracking tests need runs that take the whole campaign path (Ray Jobs,
stage locks, verified outputs, retries) in a second. The recipe steers it: `sleep_s` (how long
training takes), `fail: config` (a deterministic configuration error, never retried) or any other
true `fail` (a transient failure, retried). Each real execution appends a line to the run dir's
`executions.log`, so a test can prove nothing ran twice. Evaluation scores nothing (every score missing)
unless the recipe declares `simulate:`; `eval_sleep_s` is how long evaluating a checkpoint takes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.backend import (Checkpoint, EvalRequest, TrainingBackend, TrainingConfigError,
                              TrainRequest, TrainResult)
from training.registry import register_backend

if TYPE_CHECKING:
    import pandas as pd


def log_execution(run_dir: Path, stage: str) -> None:
    """One line per real execution of `stage` in `run_dir/executions.log` (pid and time)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "executions.log", "a") as f:
        f.write(f"{stage} {os.getpid()} {time.time()}\n")


@register_backend("noop")
class NoopBackend(TrainingBackend):
    """A checkpoint per run holding its run_key, and one metrics line per step."""

    needs_train_files = False  # no data is read
    needs_eval_data = False
    any_recipe = True  # it reads only its own knobs (sleep_s, fail, eval_sleep_s, simulate)
    runs_curricula = True  # it trains nothing: a curriculum or budget changes no job path
    runs_dynamic_sampling = True
    runs_rollout_budget = True
    runs_difficulty_prepass = True
    multi_node = True  # it reserves a multi-node run's nodes exactly as verl does (orchestrator.engine.placement)

    def train(self, req: TrainRequest) -> TrainResult:
        from training.reservation import reserved_nodes

        r = req.recipe
        log_execution(req.out_dir.parent, "train")
        with reserved_nodes(req.model, req.out_dir, req.run_key):  # a multi-node run's nodes
            time.sleep(r.sleep_s)
        if r.fail == "config":
            raise TrainingConfigError(f"noop recipe configured to fail deterministically (run {req.run_id})")
        if r.fail:
            raise RuntimeError(f"noop recipe configured to fail (run {req.run_id})")
        ckpt = req.out_dir / "checkpoints" / f"global_step_{req.total_steps}"
        ckpt.mkdir(parents=True, exist_ok=True)
        (ckpt / "config.json").write_text(json.dumps({"noop": True, "run_key": req.run_key}))
        (ckpt / "model.safetensors").write_bytes(req.run_key.encode())
        metrics = req.out_dir / "metrics.jsonl"
        metrics.write_text("".join(json.dumps({"step": s, "noop": 1.0}) + "\n" for s in range(1, req.total_steps + 1)))
        compute = {"wall_s": r.sleep_s, "gpu_s": 0.0, "rollout_tokens": 0, "update_tokens": 0}
        return TrainResult([Checkpoint(req.total_steps, ckpt)], metrics, compute)

    def evaluate(self, req: EvalRequest) -> pd.DataFrame:
        """`simulated_records`, after `eval_sleep_s` (no item log: nothing is generated)."""
        log_execution(req.run_dir, "evaluate")
        time.sleep(req.recipe.eval_sleep_s)
        return simulated_records(req)


_SIMULATE_KEYS = {"base", "effects", "seed_sd", "noise_sd", "noise_sd_by_policy"}


def _simulated_accuracy(sim: dict[str, Any], req: EvalRequest, benchmark: str) -> float:
    """A noop recipe's `simulate:` block: base + effects[policy] + a seed term shared by every policy
    of that seed (so runs pair up as real ones do) + per-run noise; deterministic in (seed, policy,
    benchmark). For testing adaptive designs through the real orchestrator without training."""
    import zlib

    import numpy as np

    from training.errors import StageConfigError

    unknown = set(sim) - _SIMULATE_KEYS
    if unknown:
        raise StageConfigError(f"recipe {req.recipe_name!r}: key 'simulate': unknown {sorted(unknown)}; "
                               f"known: {sorted(_SIMULATE_KEYS)}")
    seed, policy = req.run_meta.seed, req.run_meta.policy
    b = zlib.crc32(benchmark.encode())
    shared = np.random.default_rng([seed, b]).normal(0.0, float(sim.get("seed_sd", 2.0)))
    sd = float((sim.get("noise_sd_by_policy") or {}).get(policy, sim.get("noise_sd", 0.5)))
    noise = np.random.default_rng([seed, zlib.crc32(policy.encode()), b]).normal(0.0, sd)
    acc = float(sim.get("base", 50.0)) + float((sim.get("effects") or {}).get(policy, 0.0)) + shared + noise
    return float(np.clip(acc, 0.0, 100.0))


def simulated_records(req: EvalRequest) -> pd.DataFrame:
    """Noop runs have no model: every score is missing (NaN), never zero, unless the recipe
    declares `simulate:` (scores drawn from a stated distribution, marked harness 'noop-simulated')."""
    import numpy as np
    import pandas as pd

    from evaluation.suite import load_suite

    suite = load_suite(req.suite)
    sim = req.recipe.simulate
    rows = [{**req.run_meta.columns(), "benchmark": b.id, "domain": b.domain, "n_items": b.n_items,
             "n_correct": np.nan, "accuracy": _simulated_accuracy(sim, req, b.id) if sim else np.nan,
             "parse_rate": np.nan, "truncation_rate": np.nan, "suite_version": suite.version,
             "harness_version": "noop-simulated" if sim else "noop"} for b in suite.benchmarks]
    return pd.DataFrame(rows)
