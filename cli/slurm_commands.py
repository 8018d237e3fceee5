"""`campaign slurm`: run a campaign on Slurm allocations (orchestrator.cluster.slurm writes and submits the job).

Exit codes: 0 submitted (the job id and its log printed), 2 bad input (a spec that does not load, a bad shape),
3 Slurm refused or is not installed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.groups import command
from cli.options import LedgerUrlOpt, WorkdirOpt


def slurm_cmd(
    workdir: WorkdirOpt,
    campaign: Annotated[Path, typer.Argument(metavar="CAMPAIGN", help="campaign file")],
    nodes: int = typer.Option(1, "--nodes", min=1, help="nodes of the allocation (Ray head on the first)"),
    gpus: int = typer.Option(0, "--gpus", min=0, help="GPUs per node, requested as --gres=gpu:N (0: none)"),
    cpus: int = typer.Option(8, "--cpus", min=1, help="CPUs per node (about 8 per GPU for verl)"),
    time_limit: str | None = typer.Option(None, "--time", metavar="TIME", help="each allocation's time limit "
                                          "(sbatch --time, e.g. 24:00:00)"),
    signal_s: int = typer.Option(300, "--signal", min=10, metavar="SECONDS", help="SIGTERM this many seconds "
                                 "before the time limit: the in-flight stages drain and are recorded as infra"),
    partition: str | None = typer.Option(None, "--partition", metavar="NAME"),
    chain: int = typer.Option(1, "--chain", min=1, help="submit this many allocations, each starting after the "
                              "previous one ended (--dependency=afterany): a campaign longer than one allocation"),
    sbatch_arg: list[str] = typer.Option([], "--sbatch-arg", metavar="OPTION", help="a further sbatch option, "
                                         "e.g. --sbatch-arg=--account=myproj (repeatable)"),
    ledger_url: LedgerUrlOpt = None,
) -> None:
    """Write W/slurm/<campaign>.sbatch and submit it: each allocation starts a Ray head on its first node and
    workers on the others, checks them (`campaign doctor`), drives the campaign (`campaign submit` against the
    shared work dir: a later allocation resumes it) and stops its Ray processes. Prints the job ids and logs."""
    from cli.campaign_checks import plan_campaign
    from orchestrator.cluster.slurm import SlurmRequest, submit_allocations

    req = SlurmRequest(campaign=campaign, workdir=workdir, nodes=nodes, gpus_per_node=gpus, cpus_per_node=cpus,
                       time_limit=time_limit, signal_s=signal_s, partition=partition, ledger_url=ledger_url,
                       sbatch_args=tuple(sbatch_arg))
    req.check()  # every value bound for the batch script, before anything is read, written or submitted
    spec, _ = plan_campaign(str(campaign), None, data_root=workdir / "data")  # a bad spec: exit 2 before sbatch
    jobs = submit_allocations(req, spec.name, chain=chain)
    typer.echo(f"batch script: {jobs[0].script}")
    for j in jobs:
        after = f" (after {j.dependency})" if j.dependency else ""
        typer.echo(f"submitted slurm job {j.job_id}{after}: log {j.log}")
    typer.echo(f"follow it: campaign status {spec.name} --workdir {workdir}")


def register(app: typer.Typer) -> None:
    """Attach `campaign slurm` to the main app."""
    command(app, "slurm", slurm_cmd)
