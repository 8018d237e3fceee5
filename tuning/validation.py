"""What a tuning study scores on, and a campaign run rewritten as a tuning run on it.

The score is a *validation* aggregate on a suite that is not the final test suite: tuning on the test suite,
or on any benchmark it shares, would leak into the comparison the tuned policies are then used in, so
`_check_validation` refuses it. `heldout` scores on the training backend's own held-out reward instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.engine.grid import PolicyRef, RunSpec
from wtcommon.hashing import digest
from orchestrator.engine.spec import CampaignSpec
from tuning.request import TuneError, TuneRequest

# `--validation-suite heldout`: score on the training backend's fixed held-out prompts of the training
# distribution (metrics.jsonl `val/sampled_reward_mean`, else `val/reward_mean`, in points), not on any
# benchmark of the test suite; evaluation on the campaign's suite still runs (records stay complete).
HELDOUT = "heldout"
HELDOUT_AGG = "heldout_reward"


def _check_validation(spec: CampaignSpec, req: TuneRequest) -> tuple[str, dict[str, Any], str]:
    from evaluation.suite import SuiteError, load_suite

    vs = req.validation_suite or spec.evaluation_options.validation_suite
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
    data = req.validation_data or spec.evaluation_options.validation_data_dir or shipped_data_dir(val.name)
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


def _key_obj(run: RunSpec, policy: PolicyRef) -> dict[str, Any]:
    """Same fields as the grid's run_key (orchestrator.engine.grid.expand), so equal params share runs."""
    return {"model": run.model_cfg.raw, "recipe": run.recipe_cfg.raw, "policy": policy.config,
            "seed": run.seed, "data": run.data, "steps": run.steps, "save_freq": run.save_freq, "regime": run.regime}


def validation_run(run: RunSpec, campaign: str, suite: str, evaluation: Mapping[str, Any],
                   policy_cfg: Mapping[str, Any] | None = None, trial: int | None = None) -> RunSpec:
    """The run as a tuning run: validation suite, all checkpoints evaluated, optional trial params.

    suite == "heldout": the run keeps the campaign's suite (the objective comes from training metrics)."""
    evaluation = {**dict(evaluation), "all_checkpoints": suite != HELDOUT}
    if suite == HELDOUT:
        suite = run.suite
    cfg = dict(policy_cfg) if policy_cfg is not None else dict(run.policy.cfg)
    if policy_cfg is not None:
        cfg.pop("search_space", None)
    policy = run.policy.with_cfg(cfg)
    key = digest(_key_obj(run, policy))
    label = f"{run.policy.name}~t{trial}" if trial is not None else run.policy.name
    rid = f"{run.group}/{run.model}/{label}{'@' + run.regime if run.regime else ''}/s{run.seed}"
    return dataclasses.replace(run, run_key=key, run_id=rid, campaign=campaign, policy=policy, suite=suite,
                               evaluation=run.evaluation.with_options(**evaluation))
