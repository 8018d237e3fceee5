"""`campaign tune`: equal-budget Optuna studies per policy, pruned on intermediate checkpoints
(tuning/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.console import err, out, signed as _fmt
from cli.errors import as_user_error
from cli.groups import command
from cli.options import LedgerUrlOpt, RayAddressOpt, WorkdirOpt
from cli.writable import out_dir_callback
from wtcommon.errors import UserError


def _report_table(rep: dict) -> Table:
    t = Table(title="tuning studies (validation score = paired difference vs reference)")
    for c in ("policy", "trials", "budget", "states", "default", "best", "moved by", "best params"):
        t.add_column(c)
    for pol, r in sorted(rep.items()):
        t.add_row(pol, str(r["trials"]), str(r["budget"]),
                  ", ".join(f"{k.lower()} {v}" for k, v in sorted(r["states"].items())),
                  _fmt(r["default_value"]), _fmt(r["best_value"]), _fmt(r["moved_by"]),
                  json.dumps(r["best_params"], default=str))
    return t


def tune_cmd(
    workdir: WorkdirOpt,
    campaign: Annotated[Path, typer.Argument(metavar="CAMPAIGN",
                                             help="campaign file or directory (the grid that names the policies)")],
    policy: list[str] = typer.Option([], "--policy",
                                     help="policy to tune (repeat; every one gets the same budget)"),
    trials: int = typer.Option(8, "--trials", help="trials per policy (trial 0 = the YAML's own setting)"),
    validation_suite: str | None = typer.Option(None, "--validation-suite",
                                                   help="held-out suite name or path (never the test suite), or "
                                                        "'heldout': "
                                                        "the training backend's held-out reward"),
    validation_data: Path | None = typer.Option(None, "--validation-data", help="benchmark Parquet folder of it"),
    aggregate: str | None = typer.Option(None, "--aggregate", help="validation aggregate; default its first"),
    seeds: str | None = typer.Option(None, "--seeds",
                                     help="comma-separated seeds per trial; default the campaign's"),
    ledger_url: LedgerUrlOpt = None,
    ray_address: RayAddressOpt = None,
    no_prune: bool = typer.Option(False, "--no-prune", help="never stop a trial early"),
    prune_warmup_steps: int | None = typer.Option(
        None, "--prune-warmup-steps", help="training steps before a trial may be pruned at an intermediate "
                                           "checkpoint (MedianPruner n_warmup_steps); default half the run"),
    report_only: bool = typer.Option(False, "--report", help="show the studies of this campaign and exit"),
    write: bool = typer.Option(True, "--write/--no-write", help="write <policy>_tuned.yaml for each study"),
    out_dir: Path | None = typer.Option(None, "--out-dir", callback=out_dir_callback,
                                        help="where tuned YAMLs go; default <campaign root>/policy"),
    sampler_seed: int = typer.Option(0, "--sampler-seed"),
    max_parallel: int | None = typer.Option(None, "--max-parallel"),
    override: list[str] = typer.Option([], "--set", help="Hydra override of the campaign (repeat)"),
) -> None:
    """Tune each policy with an equal trial budget on a validation suite; write tuned policy YAMLs."""
    from orchestrator.engine.spec import load_campaign
    from orchestrator.engine.workdir import Workdir
    from tuning.report import equal_budgets, report, write_tuned_policy
    from tuning.request import TuneError, TuneRequest
    from tuning.runner import tune
    from orchestrator.engine.ranges import check_count, check_seed
    from orchestrator.cluster.ray_address import parse_ray_address

    for problem in (check_count("--trials", trials), check_seed("--sampler-seed", sampler_seed),
                    check_count("--max-parallel", max_parallel), check_count("--prune-warmup-steps",
                                                                              prune_warmup_steps, minimum=0)):
        if problem:
            raise UserError(problem)
    if ray_address is not None:
        parse_ray_address(ray_address)
    try:
        seed_list = [int(x) for x in seeds.split(",")] if seeds else None
    except ValueError:
        raise UserError(f"--seeds {seeds!r}: give comma-separated integers, e.g. --seeds 1,2,3") from None
    with as_user_error():  # ours (TuneError, SpecError: 2; LeaseLost: 4) as they are; Optuna's ValueError: 2
        spec = load_campaign(campaign, list(override))
        url = Workdir(workdir, ledger_url).ledger_url
        if report_only:
            rep = report(url, spec.name)
            if not rep:
                raise UserError(f"no tuning study for campaign {spec.name!r} in {url}; run `campaign tune` first")
        else:
            rep = tune(TuneRequest(
                campaign=campaign, policies=policy, trials=trials, workdir=workdir,
                validation_suite=validation_suite,
                validation_data=validation_data, aggregate=aggregate, seeds=seed_list, ledger_url=ledger_url,
                ray_address=ray_address, overrides=override, sampler_seed=sampler_seed, prune=not no_prune,
                prune_warmup_steps=prune_warmup_steps,
                max_parallel=max_parallel, on_event=lambda m: err.print(m, highlight=False)))
            rep = {p: r for p, r in rep.items() if p in policy}
    out.print(_report_table(rep))
    if not equal_budgets(rep):
        err.print("[yellow]warning:[/yellow] policies have unequal trial counts; the comparison is not "
                  "equal-budget")
    if write and not report_only:
        dest = out_dir or Path(spec.config_root) / "policy"
        for pol, r in sorted(rep.items()):
            try:
                path = write_tuned_policy(r, pol, dest)
                out.print(f"wrote {path} (use it as policy '{path.stem}')")
            except TuneError as exc:
                err.print(f"[yellow]{exc}[/yellow]")


def register(app: typer.Typer) -> None:
    """Attach this area's commands to the main app."""
    command(app, "tune", tune_cmd)
