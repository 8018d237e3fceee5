"""What `campaign plan` and `campaign submit` check before any compute: their options, the campaign expanded
into runs, the preflight (policies, seeds, recipes, resources, evaluation data) and, on a user's cluster,
`campaign doctor`'s quick part. Every problem is bad input (exit 2), found before anything is written; an
unreachable cluster exits 3. Heavy imports happen inside the functions so `campaign --help` stays fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from wtcommon.errors import UserError

if TYPE_CHECKING:
    from orchestrator.engine.grid import RunSpec
    from orchestrator.engine.placement import Node
    from orchestrator.engine.spec import CampaignSpec


def plan_campaign(campaign: str, overrides: list[str] | None,
                  data_root: Path | None = None) -> tuple[CampaignSpec, list[RunSpec]]:
    """Compose, validate and expand a campaign (SpecError/CorpusError, exit 2, naming file and key)."""
    from orchestrator.session import plan

    return plan(campaign, overrides or [], data_root=data_root)


def preflight(spec: CampaignSpec, runs: list[RunSpec], eval_data: Path | None, *, local_head: bool,
              ray_address: str | None = None, workdir: Path | None = None, runs_on_local_head: bool = False) -> None:
    """Policies, seeds, recipes, resources and (when `eval_data` is given) the evaluation data, before any
    compute; every problem is listed at once and nothing is written (exit 2). With `ray_address`, runs are
    checked against the live cluster's nodes (an unreachable cluster exits 3, a refused token 2)."""
    from orchestrator.preflight import Context, preflight as check_campaign

    nodes: list[Node] | None = None
    where = f"the live cluster at {ray_address}" if ray_address else ""
    if ray_address:
        from orchestrator.session import cluster_executor

        nodes = cluster_executor(ray_address, workdir).nodes()
    elif runs_on_local_head:
        # `submit` without --ray-address runs on the work dir's local head, which has no GPUs (CPU campaigns)
        from orchestrator.engine.placement import Node

        cpus = float(os.cpu_count() or 1)
        nodes, where = [Node("local-head", 0.0, 0.0, cpus, cpus)], ("the work dir's local head, which has no GPUs "
                                                                     "(GPU runs go to your cluster: --ray-address)")
    check_campaign(spec, runs, Context(data_dir=eval_data, local_cpus=os.cpu_count() if local_head else None,
                                       nodes=nodes, cluster_address=where))


def cluster_checks(address: str, workdir: Path, runs: list[RunSpec]) -> None:
    """`campaign doctor`'s quick part before any compute on a user's cluster: every node's versions against this
    machine's, the work dir shared with every node, and room for each run shape; exit 2 listing the problems."""
    from orchestrator.cluster.doctor import cheap_checks
    from orchestrator.session import cluster_executor

    needs = sorted({(f"model {r.model}", r.gpus_per_node, r.nnodes) for r in runs if r.gpus_per_node})
    bad = cheap_checks(cluster_executor(address, workdir), workdir.resolve(), needs=needs)
    if bad:
        raise UserError(f"{len(bad)} problem(s) with the cluster at {address} found before any compute (`campaign "
                        f"doctor "
                        f"--workdir {workdir}` shows every "
                        f"check):\n" + "\n".join(f"  - {r.node}: {r.check}: {r.result}; "
                                                                                   f"fix: {r.fix}" for r in bad))


def check_ray_address(ray_address: str | None) -> None:
    """A malformed --ray-address is bad input (exit 2), found before the campaign is planned or anything written."""
    from orchestrator.cluster.ray_address import parse_ray_address

    if ray_address is not None:
        parse_ray_address(ray_address)


def check_plan_options(fmt: str, as_json: bool, ray_address: str | None, *, sd: float | None, margin: float,
                       effect: float | None, gpu_budget: float | None, target_power: float | None,
                       prior: Path | None, familywise: str) -> str:
    """`campaign plan`'s options, in the order a user reads them (exit 2 on the first problem, before the
    campaign is planned); returns the output format (--json is --format json)."""
    from orchestrator.engine.ranges import check_open_probability, check_points, check_positive

    fmt = "json" if as_json else fmt
    if fmt not in ("table", "json", "csv"):
        raise UserError(f"--format: got {fmt!r}; choose table, json or csv")
    check_ray_address(ray_address)
    for problem in (check_points("--sd", sd), check_points("--margin", margin), check_points("--effect", effect),
                    check_positive("--gpu-hours", gpu_budget), check_open_probability("--power", target_power)):
        if problem:
            raise UserError(problem)
    if (target_power is None) != (effect is None) or (target_power is not None and prior is None and sd is None):
        raise UserError("--power and --effect go together, with --prior RECORDS or --sd S (the seed SD the simulation "
                        "needs), e.g. --prior ../shared/data/released_runs_171.csv --power 0.8 --effect 2.5")
    if gpu_budget is not None and target_power is None:
        raise UserError("--gpu-hours: give --power and --effect too (the budget is checked against the recommended "
                        "design)")
    if familywise not in ("holm", "bonferroni"):
        raise UserError(f"--familywise: got {familywise!r}; choose holm or bonferroni")
    return fmt
