"""Equal-budget tuning: one Optuna study per policy, every trial a real orchestrated run.

Why: the published study used one fixed setting per policy, so "policy A beats B" may only
mean "A's default happened to suit this model". Here every policy in a comparison gets the
same number of trials over the `search_space:` its YAML declares, trial 0 is the YAML's own
setting (so "how much tuning moved it" is measured inside the same budget), and the score is a
*validation* aggregate on a suite that is not the final test suite (refused otherwise).

A trial = the policy with the suggested params, trained and evaluated through the orchestrator
(ledger rows in campaign `<campaign>.tune.<policy>@<validation suite>`, Ray jobs, the evaluation stage), paired
by seed with the campaign-local reference (baseline for select/reweight, static for mix),
whose runs are shared by all trials (same run_key, trained once). Objective: mean over seeds
of the paired validation-aggregate difference (trial - reference).

Pruning on intermediate checkpoints: the reference runs are trained and evaluated first (once,
shared by every trial); then all seeds of a trial run together, and while their Ray jobs train, the
driver reads each run's intermediate signal on every scheduler poll (`Scheduler.run(on_tick=...)`):
  * benchmark validation suite: each newly completed intermediate checkpoint (the local backend's
    `checkpoints/global_step_N/completed.json`, written last) is evaluated by the driver on the
    validation suite with the evaluator and the same generation cache as the evaluate stage (so the
    stage later re-uses those generations); the value is the validation aggregate at that step;
  * `heldout`: the held-out reward rows (`val/...`) the training backend appends to `metrics.jsonl`
    every `trainer.eval_freq` steps (flushed per step).
Either way the intermediate value is the same quantity as the final objective, measured at an
earlier training step, so pruning compares like with like. (The verl backend merges HF checkpoints
only after training, so its trials show no intermediate value and run full length; said at start.) Paired as the
objective is: the value
at step s is the mean over the trial's seeds of (trial - reference) at s (`paired_intermediate`),
reported once every seed has it (`trial.report(value, s)`, s = the training step). When the pruner
says so (`MedianPruner`, `n_warmup_steps` in training steps), the trial's unfinished runs are
stopped through the scheduler's cancel path (Ray job stopped, ledger row `cancelled`, reason "pruned
by tuning trial N at step s") and `optuna.TrialPruned` is raised; a pruned trial counts against the
budget like any other. The final objective is unchanged (final step, all seeds).

The studies live in the ledger database (Optuna RDBStorage on the same SQLAlchemy URL), so
`campaign tune --report` and resumption need nothing but the ledger URL. Tuned parameters are
written as a new named policy YAML (`<policy>_tuned`) in the campaign's `policy/` folder, so a
follow-up campaign lists it under `policies:` like any other.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import yaml

from orchestrator.grid import RunSpec, expand, short_hash
from orchestrator.ledger import default_url
from orchestrator.ledger.states import TERMINAL, RunState
from orchestrator.spec import CampaignSpec, load_campaign
from wtcommon.metrics import read_metrics_jsonl

DEFAULT_ATTR = "is_default"
# `--validation-suite heldout`: score on the training backend's fixed held-out prompts of the training
# distribution (metrics.jsonl `val/sampled_reward_mean`, else `val/reward_mean`, in points), not on any
# benchmark of the test suite; evaluation on the campaign's suite still runs (records stay complete).
HELDOUT = "heldout"
HELDOUT_AGG = "heldout_reward"
_HELDOUT_KEYS = ("val/sampled_reward_mean", "val/reward_mean")


class TuneError(ValueError):
    """A tuning request that cannot run; the message names the policy, the key and the fix."""


# ---------------------------------------------------------------- search space and params


def search_space(policy_cfg: Mapping[str, Any], policy: str) -> dict[str, dict[str, Any]]:
    """The YAML's `search_space:` block ('scorer.P' / 'actuator.P' -> {low, high[, log, step]} | {choices})."""
    space = policy_cfg.get("search_space")
    if not space:
        raise TuneError(f"policy {policy!r}: no search_space block in its YAML; add e.g. "
                        "`search_space: {actuator.k: {low: 1, high: 4}}` or tune another policy")
    from policies import load_policy

    load_policy(dict(policy_cfg), domains=policy_cfg.get("domains"))  # strict validation, incl. the space
    out = {}
    for k, v in space.items():
        spec = dict(v)
        if "choices" not in spec:
            cur = _current(policy_cfg, str(k))
            ints = isinstance(spec["low"], int) and isinstance(spec["high"], int) and not isinstance(cur, float)
            spec["_kind"] = "int" if ints else "float"
        out[str(k)] = spec
    return out


def _current(policy_cfg: Mapping[str, Any], key: str) -> Any:
    part, _, name = key.partition(".")
    return ((policy_cfg.get(part) or {}).get("params") or {}).get(name)


def default_params(policy_cfg: Mapping[str, Any], space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The YAML's own values for the tuned keys (trial 0), clipped into the space when set."""
    out = {}
    for key, spec in space.items():
        v = _current(policy_cfg, key)
        if v is None:
            continue
        if "choices" in spec:
            if v in spec["choices"]:
                out[key] = v
        elif spec["low"] <= v <= spec["high"]:
            out[key] = v
    return out


def suggest(trial: Any, space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Ask an Optuna trial for every key of the space (int/float ranges, log scale, choices)."""
    out = {}
    for key, spec in space.items():
        if "choices" in spec:
            out[key] = trial.suggest_categorical(key, list(spec["choices"]))
        elif spec.get("_kind") == "int":
            out[key] = trial.suggest_int(key, spec["low"], spec["high"], step=int(spec.get("step", 1)),
                                         log=bool(spec.get("log", False)))
        else:
            kw: dict[str, Any] = {"log": bool(spec.get("log", False))}
            if spec.get("step") is not None and not kw["log"]:
                kw["step"] = float(spec["step"])
            out[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]), **kw)
    return out


def apply_params(policy_cfg: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the policy config with scorer/actuator params replaced by `params`."""
    cfg = copy.deepcopy(dict(policy_cfg))
    for key, v in params.items():
        part, _, name = key.partition(".")
        blk = cfg.setdefault(part, {})
        blk.setdefault("params", {})[name] = v.item() if hasattr(v, "item") else v
    return cfg


# ---------------------------------------------------------------- trial runs


def _key_obj(run: RunSpec, policy_name: str, policy_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Same fields as the grid's run_key (orchestrator.grid.expand), so equal params share runs."""
    return {"model": run.model_cfg, "recipe": run.recipe_cfg, "policy": {"name": policy_name, **policy_cfg},
            "seed": run.seed, "data": run.data, "steps": run.steps, "save_freq": run.save_freq, "regime": run.regime}


def validation_run(run: RunSpec, campaign: str, suite: str, evaluation: Mapping[str, Any],
                   policy_cfg: Mapping[str, Any] | None = None, trial: int | None = None) -> RunSpec:
    """The run as a tuning run: validation suite, all checkpoints evaluated, optional trial params.

    suite == "heldout": the run keeps the campaign's suite (the objective comes from training metrics)."""
    evaluation = {**dict(evaluation), "all_checkpoints": suite != HELDOUT}
    if suite == HELDOUT:
        suite = run.suite
    cfg = dict(policy_cfg) if policy_cfg is not None else dict(run.policy_cfg)
    if policy_cfg is not None:
        cfg.pop("search_space", None)
    key = short_hash(_key_obj(run, run.policy, cfg))
    label = f"{run.policy}~t{trial}" if trial is not None else run.policy
    rid = f"{run.group}/{run.model}/{label}{'@' + run.regime if run.regime else ''}/s{run.seed}"
    return dataclasses.replace(run, run_key=key, run_id=rid, campaign=campaign, policy_cfg=cfg, suite=suite,
                               evaluation={**dict(run.evaluation), **evaluation})


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


# ---------------------------------------------------------------- the driver


@dataclass
class TuneRequest:
    campaign: str | Path
    policies: Sequence[str]
    trials: int
    workdir: Path
    validation_suite: str | None = None
    validation_data: Path | None = None
    aggregate: str | None = None
    seeds: Sequence[int] | None = None
    ledger_url: str | None = None
    ray_address: str | None = None
    overrides: Sequence[str] = ()
    sampler_seed: int = 0
    prune: bool = True
    prune_warmup_steps: int | None = None  # MedianPruner n_warmup_steps in training steps; default half the run
    pruner: Any = None  # an optuna pruner instance overriding the default MedianPruner (tests, experiments)
    run_timeout_s: float | None = None
    out_dir: Path | None = None
    max_parallel: int | None = None
    on_event: Callable[[str], None] | None = field(default=None, repr=False)


def study_name(campaign: str, policy: str) -> str:
    return f"{campaign}:{policy}"


def _storage(url: str):
    import optuna

    engine_kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)


def _check_validation(spec: CampaignSpec, req: TuneRequest) -> tuple[str, dict[str, Any], str]:
    from evaluation.suite import SuiteError, load_suite

    vs = req.validation_suite or spec.evaluation.get("validation_suite")
    if vs == HELDOUT:
        return HELDOUT, {}, HELDOUT_AGG
    if not vs:
        raise TuneError(f"{spec.source}: no validation suite: tuning on the final test suite ({spec.suite}) would leak "
                        "into the comparison; pass --validation-suite NAME|PATH or set evaluation.validation_suite")
    try:
        val, test = load_suite(vs), load_suite(spec.suite)
    except SuiteError as exc:
        raise TuneError(str(exc)) from None
    if val.name == test.name or set(val.benchmark_ids) == set(test.benchmark_ids):
        raise TuneError(f"validation suite {vs!r} is the final test suite {spec.suite!r}; use a held-out suite")
    shared = sorted(set(val.benchmark_ids) & set(test.benchmark_ids))
    if shared:
        raise TuneError(f"validation suite {vs!r} shares benchmark(s) {shared} with the final test suite "
                        f"{spec.suite!r}; "
                        "tuning on them would leak into the comparison: use held-out benchmarks only")
    agg = req.aggregate or val.aggregate_names[0]
    if agg not in val.aggregate_names:
        raise TuneError(f"--aggregate {agg!r}: the validation suite {val.name!r} declares {val.aggregate_names}")
    data = req.validation_data or spec.evaluation.get("validation_data_dir") or shipped_data_dir(val.name)
    evaluation = {"data_dir": str(data)} if data else {}
    return str(vs), evaluation, agg


def shipped_data_dir(suite_name: str) -> Path | None:
    """`evaluation/fixtures/<suite>/` when the repo ships that suite's data (a manifest.json there), else None."""
    import evaluation

    d = Path(evaluation.__file__).resolve().parent / "fixtures" / suite_name
    return d if (d / "manifest.json").is_file() else None


def _suite_tag(vsuite: str) -> str:
    if vsuite == HELDOUT:
        return HELDOUT
    from evaluation.suite import load_suite

    return load_suite(vsuite).name


def _base_runs(spec: CampaignSpec, policy: str, seeds: Sequence[int] | None,
               data_root: Path) -> tuple[list[RunSpec], list[RunSpec]]:
    runs = expand(spec, data_root=data_root)
    mine = [r for r in runs if r.policy == policy]
    if not mine:
        raise TuneError(f"{spec.source}: policy {policy!r} is not in the campaign's grid; add it to `policies:`")
    ref_name = mine[0].reference
    if ref_name == policy:
        raise TuneError(f"policy {policy!r} is a reference (mechanism none); tune the policies compared against it")
    refs = [r for r in runs if r.policy == ref_name]
    if not refs:
        raise TuneError(f"{spec.source}: reference {ref_name!r} of {policy!r} is not in the campaign; add it to "
                        "`policies:`")
    keep = set(seeds) if seeds else None
    group = (mine[0].group, mine[0].model, mine[0].regime)  # one configuration: the first model/regime cell
    mine = [r for r in mine if (r.group, r.model, r.regime) == group and (keep is None or r.seed in keep)]
    refs = [r for r in refs if (r.group, r.model, r.regime) == group and (keep is None or r.seed in keep)]
    return sorted(mine, key=lambda r: r.seed), sorted(refs, key=lambda r: r.seed)


class _Runner:
    """Submits runs to one tuning campaign in the ledger and drives them to recorded/failed."""

    def __init__(self, req: TuneRequest, spec: CampaignSpec, campaign: str):
        from orchestrator.session import Session

        self.req, self.spec, self.campaign = req, spec, campaign
        self.session = Session(Path(req.workdir) / "tune", ledger_url=req.ledger_url or default_url(req.workdir),
                               ray_address=req.ray_address)
        self.rows: dict[str, dict[str, Any]] = {}
        self.retried: set[str] = set()

    def _config(self):
        cfg = self.session.default_config(self.campaign)
        if self.req.max_parallel:
            cfg.max_parallel = self.req.max_parallel
        cfg.poll_s = min(cfg.poll_s, 0.5)
        return cfg

    def run(self, runs: list[RunSpec], on_tick: Callable[[dict[str, int]], None] | None = None) -> pd.DataFrame:
        """Drive `runs` to recorded; `on_tick` is called on every scheduler poll (intermediate pruning)."""
        from analysis.aggregates import run_table
        from analysis.records import read_records
        from evaluation.suite import load_suite

        for r in runs:
            self.rows.setdefault(r.run_key, {"run_key": r.run_key, "run_id": r.run_id, "gpus": r.gpus,
                                            "spec_json": r.to_json()})
        self.session.ledger.upsert_campaign(self.campaign, self.spec.model_dump_json(), list(self.rows.values()))
        cfg = self._config()
        wanted = {r.run_key for r in runs}
        stale = [row for row in self.session.ledger.runs(self.campaign, [RunState.failed])
                 if row.run_key in wanted and row.run_key not in self.retried]
        # cancelled = stopped by an earlier trial's pruning (same params, same runs): this trial needs them whole
        stale += [row for row in self.session.ledger.runs(self.campaign, [RunState.cancelled]) if row.run_key in wanted]
        if stale:  # failed in an earlier session (e.g. data fixed since): one more chance each
            self.retried |= {row.run_key for row in stale if row.state == RunState.failed}
            self.session.scheduler(self.campaign, cfg).retry(stale)
        for attempt in range(6):  # a just-started head may not have its job agent yet
            try:
                self.session.scheduler(self.campaign, cfg).run(timeout_s=self.req.run_timeout_s, on_tick=on_tick)
                break
            except RuntimeError as exc:
                if "No available agent" not in str(exc) or attempt == 5:
                    raise
                time.sleep(5.0)
        suite = load_suite(runs[0].suite)
        frames, failed = [], []
        for row in self.session.ledger.runs(self.campaign):
            if row.run_key not in wanted:
                continue
            if row.state == RunState.recorded and row.outputs.get("records"):
                frames.append(read_records(row.outputs["records"], suite=suite))
            else:
                failed.append(f"{row.run_id} ({row.state}: {row.reason or 'not finished'})")
        if failed:
            raise TuneError(f"tuning runs did not finish: {', '.join(failed)}")
        return run_table(pd.concat(frames, ignore_index=True), suite)

    def cancel(self, runs: list[RunSpec], reason: str) -> list[str]:
        """Stop `runs` that are not finished through the scheduler's cancel path; their run_ids."""
        keys = {r.run_key for r in runs}
        rows = [row for row in self.session.ledger.runs(self.campaign) if row.run_key in keys
                and row.state not in TERMINAL]
        self.session.scheduler(self.campaign, self._config()).cancel(rows, reason=reason)
        return [row.run_id for row in rows]

    def heldout(self, runs: list[RunSpec]) -> pd.DataFrame:
        """Held-out reward per run x logged step from each run's verified metrics (run_key, seed, step, value)."""
        import json

        rows = []
        for r in runs:
            # run directories are <workdir>/runs/<campaign>/<run_key> (older layout: runs/<run_key>)
            cands = [self.session.workdir / "runs" / r.campaign / r.run_key / "train_done.json",
                     self.session.workdir / "runs" / r.run_key / "train_done.json"]
            man = next((c for c in cands if c.is_file()), cands[0])
            if not man.is_file():
                raise TuneError(f"run {r.run_id}: no verified training manifest at {man}")
            for step, value in _heldout_values(Path(json.loads(man.read_text())["metrics_path"])):
                rows.append({"run_key": r.run_key, "seed": r.seed, "step": step, HELDOUT_AGG: value})
        if not rows:
            return pd.DataFrame({"run_key": [r.run_key for r in runs], "seed": [r.seed for r in runs],
                                 "step": 0, HELDOUT_AGG: math.nan})
        return pd.DataFrame(rows)

    def close(self) -> None:
        self.session.close()


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
        from orchestrator.paths import run_dir

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
        from orchestrator.stages import _resolve, run_meta

        workdir = self.runner.session.workdir
        opts = r.evaluation
        try:  # lm-eval's and transformers' progress bars would bury the tuner's own lines; failures raise
            with contextlib.redirect_stderr(io.StringIO()):
                rec = evaluate_checkpoint(
                    ckpt, suite=r.suite, data_dir=_resolve(opts.get("data_dir"), workdir) or workdir / "data" / "eval",
                    backend=opts.get("backend", "hf"), run_meta=run_meta(r, step), limit=opts.get("limit"),
                    cache_dir=workdir / "cache" / "eval", max_gen_toks=opts.get("max_gen_toks"),
                    gates=opts.get("gates"),
                    progress=False)
        except EvaluationError as exc:
            self.say(f"{r.run_id} step {step}: no intermediate value ({str(exc)[:200]})")
            return math.nan
        return float(run_table(rec, load_suite(r.suite))[self.agg].iloc[0])


def grid_size(space: Mapping[str, Mapping[str, Any]]) -> int | None:
    """Number of distinct parameter sets of an all-discrete space (int ranges, choices); None if any is continuous."""
    n = 1
    for spec in space.values():
        if "choices" in spec:
            n *= len(spec["choices"])
        elif spec.get("_kind") == "int":
            n *= len(range(int(spec["low"]), int(spec["high"]) + 1, int(spec.get("step", 1))))
        else:
            return None
    return n


def _sampler(space: Mapping[str, Mapping[str, Any]], trials: int, seed: int):
    """TPE, except for a small discrete space the budget can cover: there TPE's random start repeats
    parameter sets (gfpo's k in 1..4 drew k=3 three times in 3 trials), wasting the equal budget, so
    Optuna's BruteForceSampler tries distinct sets in random order instead."""
    import optuna

    n = grid_size(space)
    if n is not None and n >= trials:
        import warnings

        with warnings.catch_warnings():  # experimental since Optuna 3.1; its behaviour here is what we rely on
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def _pruner(req: TuneRequest, steps: int):
    import optuna

    if not req.prune:
        return optuna.pruners.NopPruner()
    if req.pruner is not None:
        return req.pruner
    warm = req.prune_warmup_steps if req.prune_warmup_steps is not None else steps // 2
    # by training step: no pruning before `warm` steps of training; median of the completed trials at that step
    return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=warm)


def _ref_values(runner: _Runner, ref_runs: list[RunSpec], vsuite: str, agg: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and evaluate the reference runs (once, shared by all trials): (final table, per-step values)."""
    tab = runner.run(ref_runs)
    if vsuite == HELDOUT:
        tab = runner.heldout(ref_runs)
    return tab, tab[["seed", "step", agg]]


def tune(req: TuneRequest) -> dict[str, dict[str, Any]]:
    """Run (or resume) one study per policy with exactly `req.trials` trials each; returns the report."""
    import optuna

    if req.trials < 1:
        raise TuneError(f"--trials: must be >= 1, got {req.trials}")
    if not req.policies:
        raise TuneError("--policy: name at least one policy to tune")
    if req.prune_warmup_steps is not None and req.prune_warmup_steps < 0:
        raise TuneError(f"--prune-warmup-steps: must be >= 0 training steps, got {req.prune_warmup_steps}")
    spec = load_campaign(req.campaign, list(req.overrides))
    vsuite, veval, agg = _check_validation(spec, req)
    url = req.ledger_url or default_url(req.workdir)
    Path(req.workdir).mkdir(parents=True, exist_ok=True)
    data_root = Path(req.workdir) / "data"
    say = req.on_event or (lambda _m: None)
    plans = {}
    for policy in req.policies:  # validate everything before the first run starts
        mine, refs = _base_runs(spec, policy, req.seeds, data_root)
        plans[policy] = (mine, refs, search_space(mine[0].policy_cfg, policy))
    if req.prune and any(m[0][0].backend != "local" for m in plans.values()):
        # verl merges its FSDP shards to HF checkpoints only after training and logs validation per data
        # source: no intermediate value appears while it trains, so its trials run full length
        say(f"note: intermediate-checkpoint pruning reads the local backend's checkpoints and metrics; "
            f"{spec.backend} trials run full length")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for policy, (mine, refs, space) in plans.items():
        # the validation suite is part of the tuning campaign's name: run_keys identify training only,
        # so a study on another validation suite must not reuse these rows' evaluation settings
        camp = f"{spec.name}.tune.{policy}@{_suite_tag(vsuite)}"
        runner = _Runner(req, spec, camp)
        ref_runs = [validation_run(r, camp, vsuite, veval) for r in refs]
        study = optuna.create_study(
            study_name=study_name(spec.name, policy), storage=_storage(url), direction="maximize", load_if_exists=True,
            sampler=_sampler(space, req.trials, req.sampler_seed), pruner=_pruner(req, mine[0].steps),
        )
        study.set_user_attr("policy", policy)
        study.set_user_attr("campaign", spec.name)
        study.set_user_attr("aggregate", agg)
        study.set_user_attr("validation_suite", vsuite)
        study.set_user_attr("budget", req.trials)
        study.set_user_attr("policy_cfg", mine[0].policy_cfg)
        if not study.trials:
            dflt = default_params(mine[0].policy_cfg, space)
            if dflt:
                study.enqueue_trial(dflt, user_attrs={DEFAULT_ATTR: True})
        done = [t for t in study.trials if t.state.is_finished()]
        left = req.trials - len(done)
        if left <= 0:
            runner.close()
            continue
        seeds = [r.seed for r in mine]

        def objective(trial: optuna.Trial, mine=mine, space=space, ref_runs=ref_runs, runner=runner,
                      policy=policy, seeds=seeds) -> float:
            params = suggest(trial, space)
            cfg = apply_params(mine[0].policy_cfg, params)
            t0 = time.time()
            ref_tab, ref_vals = _ref_values(runner, ref_runs, vsuite, agg)  # recorded after the first trial: no work
            trial_runs = [validation_run(b, runner.campaign, vsuite, veval, cfg, trial.number) for b in mine]
            inter = _Intermediate(runner, trial_runs, vsuite, agg, say)
            reported: dict[int, float] = {}
            final_step = max(r.steps for r in trial_runs)

            def on_tick(_counts: dict[str, int], may_prune: bool = True) -> None:
                for step, value in sorted(paired_intermediate(inter.poll(), ref_vals, agg, seeds).items()):
                    if step in reported:
                        continue
                    reported[step] = value
                    trial.report(value, step)
                    trial.set_user_attr("intermediate", {str(k): v for k, v in reported.items()})
                    if may_prune and step < final_step and trial.should_prune():
                        reason = f"pruned by tuning trial {trial.number} at step {step}"
                        stopped = runner.cancel(trial_runs, reason)
                        trial.set_user_attr("pruned_at_step", step)
                        trial.set_user_attr("stopped_runs", stopped)
                        trial.set_user_attr("wall_s", round(time.time() - t0, 2))
                        say(f"{policy} trial {trial.number}: {reason} ({value:+.3f} vs reference); stopped {stopped}")
                        raise optuna.TrialPruned(reason)

            tab = runner.run(trial_runs, on_tick=on_tick)
            on_tick({}, may_prune=False)  # steps reached between the last poll and the end: recorded, not pruned
            if vsuite == HELDOUT:
                tab = runner.heldout(trial_runs)
            score, n = paired_score(tab, ref_tab, agg)
            curve = tab.groupby("step")[agg].mean()
            trial.set_user_attr("checkpoint_curve", {int(s): float(v) for s, v in curve.items()})
            trial.set_user_attr("seeds_used", n)
            trial.set_user_attr("wall_s", round(time.time() - t0, 2))
            if not math.isfinite(score):
                trial.set_user_attr("reason", f"validation aggregate {agg} is NaN (missing scores) after {n} seed(s)")
                say(f"{policy} trial {trial.number}: {params} -> NaN (missing scores)")
                return score
            say(f"{policy} trial {trial.number}: {params} -> {score:+.3f}")
            return score

        try:
            study.optimize(objective, n_trials=left, catch=(TuneError,))
        finally:
            runner.close()
    return report(url, spec.name)


# ---------------------------------------------------------------- report and tuned config


def report(url: str, campaign: str) -> dict[str, dict[str, Any]]:
    """Per policy: budget, trials by state, default and best validation score, best params."""
    import optuna

    out: dict[str, dict[str, Any]] = {}
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return out  # no ledger database yet: no study (do not create one by reading)
    storage = _storage(url)
    for s in optuna.get_all_study_summaries(storage):
        if not s.study_name.startswith(f"{campaign}:"):
            continue
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        policy = study.user_attrs.get("policy", s.study_name.split(":", 1)[1])
        states: dict[str, int] = {}
        for t in study.trials:
            states[t.state.name] = states.get(t.state.name, 0) + 1
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None
                    and math.isfinite(t.value)]
        default = [t for t in complete if t.user_attrs.get(DEFAULT_ATTR)]
        # `complete` holds finite values only (filtered above), so the casts below are exact
        best = max(complete, key=lambda t: cast(float, t.value)) if complete else None
        out[policy] = {
            "study": s.study_name, "budget": study.user_attrs.get("budget"), "trials": len(study.trials),
            "states": states,
            "aggregate": study.user_attrs.get("aggregate"),
            "validation_suite": study.user_attrs.get("validation_suite"),
            "default_value": default[0].value if default else math.nan,
            "best_value": best.value if best else math.nan, "best_params": dict(best.params) if best else {},
            "best_trial": best.number if best else None,
            "moved_by": (cast(float, best.value) - cast(float, default[0].value)) if (best and default) else math.nan,
            "policy_cfg": study.user_attrs.get("policy_cfg", {}),
        }
    return out


def equal_budgets(rep: Mapping[str, Mapping[str, Any]]) -> bool:
    """True when every policy's study has the same number of finished trials (the comparison is fair)."""
    return len({r["trials"] for r in rep.values()}) <= 1


def write_tuned_policy(rep_entry: Mapping[str, Any], policy: str, out_dir: Path, name: str | None = None) -> Path:
    """Write `<out_dir>/<policy>_tuned.yaml` (validated, atomic); a campaign then lists it by name."""
    from wtcommon.atomic import atomic_write_text
    from policies import load_policy

    if not rep_entry.get("best_params"):
        raise TuneError(f"policy {policy!r}: no completed trial with a finite score; nothing to write")
    cfg = apply_params(rep_entry["policy_cfg"], rep_entry["best_params"])
    cfg.pop("search_space", None)
    new = name or f"{policy}_tuned"
    cfg["name"] = new
    cfg["description"] = (f"{policy} tuned on {rep_entry['validation_suite']}:{rep_entry['aggregate']} "
                          f"(study {rep_entry['study']}, trial {rep_entry['best_trial']} of {rep_entry['trials']})")
    load_policy(cfg, domains=cfg.get("domains"))
    header = (f"# Written by `campaign tune` from study {rep_entry['study']}: best of {rep_entry['trials']} trials,\n"
              f"# validation {rep_entry['aggregate']} paired vs reference {rep_entry['best_value']:+.4f} "
              f"(default {rep_entry['default_value']:+.4f}). Params: {dict(rep_entry['best_params'])}\n")
    path = Path(out_dir) / f"{new}.yaml"
    atomic_write_text(path, header + yaml.safe_dump(cfg, sort_keys=False))
    return path
