"""The driver: `tune()` runs (or resumes) one Optuna study per policy with exactly the requested trials.

Every trial is a real orchestrated run: ledger rows in campaign `<campaign>.tune.<policy>@<validation suite>`,
registered and driven by the campaign path (`orchestrator.campaign.submit` and `drive`: Ray jobs, the evaluation
stage), run dirs under `<workdir>/tune`. Pruning on intermediate checkpoints: the reference
runs are trained and evaluated first (once, shared by every trial); then all seeds of a trial run together, and
on every scheduler poll (`drive(on_tick=...)`) the paired intermediate value (intermediate.py) is
reported once every seed has it (`trial.report(value, s)`, s = the training step). When the pruner says so
(`MedianPruner`, `n_warmup_steps` in training steps), the trial's unfinished runs are stopped through the
scheduler's cancel path (Ray job stopped, ledger row `cancelled`, reason "pruned by tuning trial N at step s")
and `optuna.TrialPruned` is raised; a pruned trial counts against the budget like any other. The final
objective is unchanged (final step, all seeds).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.engine.grid import RunSpec, expand
from orchestrator.engine.ledger.states import TERMINAL, RunState
from orchestrator.engine.paths import run_dir
from orchestrator.engine.spec import CampaignSpec, load_campaign
from orchestrator.engine.workdir import Workdir
from tuning.intermediate import _heldout_values, _Intermediate, paired_intermediate, paired_score
from tuning.report import DEFAULT_ATTR, _storage, report, study_name
from tuning.request import TuneError, TuneRequest
from tuning.space import apply_params, default_params, grid_size, search_space, suggest
from tuning.validation import HELDOUT, HELDOUT_AGG, _check_validation, _suite_tag, validation_run


def _base_runs(spec: CampaignSpec, policy: str, seeds: Sequence[int] | None,
               data_root: Path) -> tuple[list[RunSpec], list[RunSpec]]:
    runs = expand(spec, data_root=data_root)
    mine = [r for r in runs if r.policy.name == policy]
    if not mine:
        raise TuneError(f"{spec.source}: policy {policy!r} is not in the campaign's grid; add it to `policies:`")
    ref_name = mine[0].reference
    if ref_name == policy:
        raise TuneError(f"policy {policy!r} is a reference (mechanism none); tune the policies compared against it")
    refs = [r for r in runs if r.policy.name == ref_name]
    if not refs:
        raise TuneError(f"{spec.source}: reference {ref_name!r} of {policy!r} is not in the campaign; add it to "
                        "`policies:`")
    keep = set(seeds) if seeds else None
    group = (mine[0].group, mine[0].model, mine[0].regime)  # one configuration: the first model/regime cell
    mine = [r for r in mine if (r.group, r.model, r.regime) == group and (keep is None or r.seed in keep)]
    refs = [r for r in refs if (r.group, r.model, r.regime) == group and (keep is None or r.seed in keep)]
    return sorted(mine, key=lambda r: r.seed), sorted(refs, key=lambda r: r.seed)


class _Runner:
    """One tuning campaign as a client of the campaign path: runs registered with `orchestrator.campaign.submit`,
    retried and cancelled through the scheduler as `campaign retry|cancel` do, driven with `drive`, their
    records read with `Session.records_frame`."""

    def __init__(self, req: TuneRequest, spec: CampaignSpec, campaign: str):
        from orchestrator.campaign import cluster_address, open_session

        self.req, self.spec, self.campaign = req, spec, campaign
        # the tuning campaigns' run dirs go under <workdir>/tune; their rows go in the work dir's own ledger; the
        # cluster is --ray-address, else the one `campaign submit` recorded for the work dir, else a local head
        wd = Workdir(Path(req.workdir), req.ledger_url)
        tune_wd = wd.sub("tune")
        self.session = open_session(tune_wd.root, tune_wd.ledger_url, cluster_address(wd.root, req.ray_address))
        self.runs: dict[str, RunSpec] = {}  # every run registered this session, by run_key (first one kept)
        self.retried: set[str] = set()

    def run(self, runs: list[RunSpec], on_tick: Callable[[dict[str, int]], None] | None = None) -> pd.DataFrame:
        """Drive `runs` to recorded; `on_tick` is called on every scheduler poll (intermediate pruning)."""
        from rich.console import Console

        from analysis.aggregates import run_table
        from evaluation.suite import load_suite
        from orchestrator.campaign import drive, submit

        for r in runs:
            self.runs.setdefault(r.run_key, r)
        submit(self.session, self.spec, list(self.runs.values()), campaign=self.campaign)
        wanted = {r.run_key for r in runs}
        # failed (e.g. in an earlier session, data fixed since): one more chance each; cancelled = stopped by an
        # earlier trial's pruning (same params, same runs): this trial needs them whole
        stale = [row for row in self.session.ledger.runs(self.campaign, [RunState.failed, RunState.cancelled])
                 if row.run_key in wanted and (row.state == RunState.cancelled or row.run_key not in self.retried)]
        if stale:
            self.retried |= {row.run_key for row in stale if row.state == RunState.failed}
            self.session.scheduler(self.campaign).retry(stale)
        # quiet: the tuner's own lines (on_event) are its progress; polled twice a second for pruning
        drive(self.session, self.campaign, console=Console(stderr=True), quiet=True,
              timeout_s=self.req.run_timeout_s, max_parallel=self.req.max_parallel, poll_s=0.5, on_tick=on_tick,
              conclude=False)
        failed = [f"{row.run_id} ({row.state}: {row.reason or 'not finished'})"
                  for row in self.session.ledger.runs(self.campaign)
                  if row.run_key in wanted and row.state != RunState.recorded]
        if failed:
            raise TuneError(f"tuning runs did not finish: {', '.join(failed)}")
        records = self.session.records_frame(self.campaign, wanted)  # all recorded here: RecordsMissing otherwise
        if records is None:
            raise TuneError(f"tuning campaign {self.campaign!r}: no run to score")
        return run_table(records, load_suite(runs[0].suite))

    def cancel(self, runs: list[RunSpec], reason: str) -> list[str]:
        """Stop `runs` that are not finished through the scheduler's cancel path; their run_ids."""
        keys = {r.run_key for r in runs}
        rows = [row for row in self.session.ledger.runs(self.campaign) if row.run_key in keys
                and row.state not in TERMINAL]
        self.session.scheduler(self.campaign).cancel(rows, reason=reason)
        return [row.run_id for row in rows]

    def heldout(self, runs: list[RunSpec]) -> pd.DataFrame:
        """Held-out reward per run x logged step from each run's verified metrics (run_key, seed, step, value)."""
        import json

        rows = []
        for r in runs:
            man = run_dir(self.session.workdir, r) / "train_done.json"
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


@dataclass
class _Plan:
    """One policy's study plan, validated before any run starts: its base runs, the reference's, its search space."""

    policy: str
    mine: list[RunSpec]
    refs: list[RunSpec]
    space: dict[str, dict[str, Any]]


@dataclass
class _Validation:
    """What a trial is scored on: the validation suite, its evaluation settings, the aggregate maximised."""

    suite: str
    evaluation: dict[str, Any]
    agg: str


def tune(req: TuneRequest) -> dict[str, dict[str, Any]]:
    """Run (or resume) one study per policy with exactly `req.trials` trials each; returns the report."""
    import optuna

    _check_request(req)
    spec = load_campaign(req.campaign, list(req.overrides))
    val = _Validation(*_check_validation(spec, req))
    url = Workdir(Path(req.workdir), req.ledger_url).ledger_url
    Path(req.workdir).mkdir(parents=True, exist_ok=True)
    data_root = Path(req.workdir) / "data"
    say = req.on_event or (lambda _m: None)
    plans: dict[str, _Plan] = {}
    for policy in req.policies:  # validate everything before the first run starts
        mine, refs = _base_runs(spec, policy, req.seeds, data_root)
        plans[policy] = _Plan(policy, mine, refs, search_space(mine[0].policy.cfg, policy))
    if req.prune and any(p.mine[0].backend != "local" for p in plans.values()):
        # verl merges its FSDP shards to HF checkpoints only after training and logs validation per data
        # source: no intermediate value appears while it trains, so its trials run full length
        say(f"note: intermediate-checkpoint pruning reads the local backend's checkpoints and metrics; "
            f"{spec.backend} trials run full length")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for plan in plans.values():
        _tune_policy(req, spec, url, plan, val, say)
    return report(url, spec.name)


def _check_request(req: TuneRequest) -> None:
    """Refuse a request with no trial, no policy or a negative pruning warm-up before anything is read."""
    if req.trials < 1:
        raise TuneError(f"--trials: must be >= 1, got {req.trials}")
    if not req.policies:
        raise TuneError("--policy: name at least one policy to tune")
    if req.prune_warmup_steps is not None and req.prune_warmup_steps < 0:
        raise TuneError(f"--prune-warmup-steps: must be >= 0 training steps, got {req.prune_warmup_steps}")


def _tune_policy(req: TuneRequest, spec: CampaignSpec, url: str, plan: _Plan, val: _Validation,
                 say: Callable[[str], None]) -> None:
    """One policy's study, created or resumed, run until it holds exactly `req.trials` finished trials."""
    import optuna

    # the validation suite is part of the tuning campaign's name: run_keys identify training only,
    # so a study on another validation suite must not reuse these rows' evaluation settings
    camp = f"{spec.name}.tune.{plan.policy}@{_suite_tag(val.suite)}"
    runner = _Runner(req, spec, camp)
    ref_runs = [validation_run(r, camp, val.suite, val.evaluation) for r in plan.refs]
    mine, space = plan.mine, plan.space
    study = optuna.create_study(
        study_name=study_name(spec.name, plan.policy), storage=_storage(url), direction="maximize",
        load_if_exists=True, sampler=_sampler(space, req.trials, req.sampler_seed), pruner=_pruner(req, mine[0].steps),
    )
    for key, value in (("policy", plan.policy), ("campaign", spec.name), ("aggregate", val.agg),
                       ("validation_suite", val.suite), ("budget", req.trials), ("policy_cfg", mine[0].policy.cfg)):
        study.set_user_attr(key, value)
    if not study.trials:
        dflt = default_params(mine[0].policy.cfg, space)
        if dflt:
            study.enqueue_trial(dflt, user_attrs={DEFAULT_ATTR: True})
    done = [t for t in study.trials if t.state.is_finished()]
    left = req.trials - len(done)
    if left <= 0:
        runner.close()
        return
    try:
        study.optimize(_objective(runner, plan, ref_runs, val, say), n_trials=left, catch=(TuneError,))
    finally:
        runner.close()


def _objective(runner: _Runner, plan: _Plan, ref_runs: list[RunSpec], val: _Validation,
               say: Callable[[str], None]) -> Callable[[Any], float]:
    """The study's objective: one trial's runs (all seeds together), pruned on the paired intermediate value at
    every scheduler poll, scored by the paired final value against the reference runs."""
    import optuna

    mine, space, policy, agg = plan.mine, plan.space, plan.policy, val.agg
    seeds = [r.seed for r in mine]

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, space)
        cfg = apply_params(mine[0].policy.cfg, params)
        t0 = time.time()
        ref_tab, ref_vals = _ref_values(runner, ref_runs, val.suite, agg)  # recorded after the first trial: no work
        trial_runs = [validation_run(b, runner.campaign, val.suite, val.evaluation, cfg, trial.number) for b in mine]
        inter = _Intermediate(runner, trial_runs, val.suite, agg, say)
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
        if val.suite == HELDOUT:
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

    return objective
