"""A trial's paired objective, and the same quantity at intermediate training steps (what pruning reads).

Objective (`paired_score`): mean over seeds of the paired validation-aggregate difference (trial - reference)
at each run's final step. While a trial's Ray jobs train, the driver reads each run's intermediate signal on
every scheduler poll (`_Intermediate.poll`):
  * benchmark validation suite: each newly completed intermediate checkpoint (the local backend's
    `checkpoints/global_step_N/completed.json`, written last) is evaluated by the driver on the
    validation suite with the evaluator and the same generation cache as the evaluate stage (so the
    stage later re-uses those generations); the value is the validation aggregate at that step;
  * `heldout`: the held-out reward rows (`val/...`) the training backend appends to `metrics.jsonl`
    every `trainer.eval_freq` steps (flushed per step).
Either way the intermediate value is the same quantity as the final objective, measured at an
earlier training step, so pruning compares like with like. (The verl backend merges HF checkpoints
only after training, so its trials show no intermediate value and run full length; said at start.) Paired as the
objective is: the value at step s is the mean over the trial's seeds of (trial - reference) at s
(`paired_intermediate`).
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from orchestrator.engine.grid import RunSpec
from tuning.validation import HELDOUT
from wtcommon.metrics import read_metrics_jsonl

if TYPE_CHECKING:
    from tuning.runner import _Runner

# the metrics keys `heldout` (validation.py) scores on, preferred first
_HELDOUT_KEYS = ("val/sampled_reward_mean", "val/reward_mean")


def paired_score(trial_runs: pd.DataFrame, ref_runs: pd.DataFrame, aggregate: str) -> tuple[float, int]:
    """Mean over common seeds of (trial - reference) on `aggregate` at each run's final step.

    Both frames: `analysis.aggregates.run_table` rows. Returns (score, n_seeds); NaN when a side
    is missing or its aggregate is NaN (missing is never 0).
    """
    def last(df: pd.DataFrame) -> pd.Series:
        if df.empty:
            return pd.Series(dtype=float)
        d = df.sort_values("step").groupby("seed").tail(1).set_index("seed")
        return d[aggregate].astype(float)

    a, b = last(trial_runs), last(ref_runs)
    seeds = a.index.intersection(b.index)
    if len(seeds) == 0:
        return math.nan, 0
    diff = (a.loc[seeds] - b.loc[seeds]).to_numpy()
    return (float(diff.mean()) if np.all(np.isfinite(diff)) else math.nan), int(len(seeds))


def paired_intermediate(trial_vals: pd.DataFrame, ref_vals: pd.DataFrame, value: str,
                        seeds: Sequence[int]) -> dict[int, float]:
    """step -> mean over `seeds` of (trial - reference) at that training step.

    Both frames have columns seed, step, `value` (one row per run x step; the last row wins). A step
    is included only when every one of `seeds` has a finite value on both sides: a mean over just
    the seeds that happen to be ahead would not be comparable across trials (missing is never 0).
    """
    want = sorted({int(x) for x in seeds})
    if not want or trial_vals.empty or ref_vals.empty:
        return {}

    def table(df: pd.DataFrame) -> pd.DataFrame:
        d = df.assign(seed=df["seed"].astype(int), step=df["step"].astype(int))
        return d.groupby(["step", "seed"])[value].last().astype(float).unstack("seed").reindex(columns=want)

    diff = table(trial_vals) - table(ref_vals)  # aligned on (step, seed); NaN where either side lacks it
    ok = diff.notna().all(axis=1) & np.isfinite(diff.to_numpy()).all(axis=1)
    return {int(step): float(row.mean()) for step, row in diff[ok].iterrows()}


def _metrics_rows(path: Path) -> list[dict[str, Any]]:
    """The complete rows of a metrics file that may still be being written (a torn last line is skipped)."""
    if not path.is_file():
        return []
    return read_metrics_jsonl(path, torn_tail="skip")[0]


def _heldout_values(path: Path) -> list[tuple[int, float]]:
    """(step, held-out reward in points) of every held-out validation row of a metrics file so far."""
    out = []
    for obj in _metrics_rows(path):
        key = next((k for k in _HELDOUT_KEYS if k in obj), None)
        if key is not None:
            out.append((int(obj.get("step", 0)), 100.0 * float(obj[key])))
    return out


class _Intermediate:
    """Intermediate validation values of runs while they train (module docstring: what and why).

    `poll()` returns seed, step, value rows for every step seen so far. Checkpoint evaluations are
    done once per (run, step) and kept; a checkpoint that fails a health gate has no value (NaN),
    so its step is never reported (the evaluate stage then fails the run loudly)."""

    def __init__(self, runner: _Runner, runs: list[RunSpec], vsuite: str, agg: str, say: Callable[[str], None]):
        self.runner, self.runs, self.vsuite, self.agg, self.say = runner, runs, vsuite, agg, say
        self.values: dict[tuple[str, int], float] = {}

    def _train_dir(self, r: RunSpec) -> Path:
        from orchestrator.engine.paths import run_dir

        return run_dir(self.runner.session.workdir, r) / "train"

    def poll(self) -> pd.DataFrame:
        for r in self.runs:
            if self.vsuite == HELDOUT:
                for step, value in _heldout_values(self._train_dir(r) / "metrics.jsonl"):
                    self.values[(r.run_key, step)] = value
                continue
            for done in sorted((self._train_dir(r) / "checkpoints").glob("global_step_*/completed.json")):
                step = int(done.parent.name.rsplit("_", 1)[1])
                if step >= r.steps or (r.run_key, step) in self.values:
                    continue  # the final checkpoint is the evaluate stage's (it is not a pruning point)
                try:
                    self.values[(r.run_key, step)] = self._evaluate(r, done.parent, step)
                except OSError:
                    continue  # the checkpoint went away (a restarted attempt): try again next poll
        seed = {r.run_key: r.seed for r in self.runs}
        return pd.DataFrame([{"seed": seed[k], "step": st, self.agg: v} for (k, st), v in self.values.items()],
                            columns=["seed", "step", self.agg])

    def _evaluate(self, r: RunSpec, ckpt: Path, step: int) -> float:
        """The validation aggregate of one intermediate checkpoint: the evaluate stage's evaluator, data and cache."""
        from analysis.aggregates import run_table
        from evaluation.evaluator import EvaluationError, evaluate_checkpoint
        from evaluation.suite import load_suite
        from orchestrator.engine.stages import _resolve, run_meta

        workdir = self.runner.session.workdir
        opts = r.evaluation
        try:  # lm-eval's and transformers' progress bars would bury the tuner's own lines; failures raise
            with contextlib.redirect_stderr(io.StringIO()):
                ev = evaluate_checkpoint(
                    ckpt, suite=r.suite, data_dir=_resolve(opts.data_dir, workdir) or workdir / "data" / "eval",
                    backend=opts.backend, run_meta=run_meta(r, step), limit=opts.limit,
                    cache_dir=workdir / "cache" / "eval", max_gen_toks=opts.max_gen_toks,
                    gates=opts.gates,
                    progress=False)
        except EvaluationError as exc:
            self.say(f"{r.run_id} step {step}: no intermediate value ({str(exc)[:200]})")
            return math.nan
        return float(run_table(ev.records, load_suite(r.suite))[self.agg].iloc[0])
