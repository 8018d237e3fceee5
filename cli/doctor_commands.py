"""`campaign doctor`: check a Ray cluster before submitting to it (orchestrator.cluster.doctor does the work).

Exit codes: 0 every check passed (warnings allowed), 2 a problem (each listed with its node and fix, or a token
the cluster refuses), 3 the cluster is unreachable.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from cli.console import err, out
from cli.groups import command
from wtcommon.errors import UserError
from cli.options import RayAddressOpt, WorkdirOpt

_STYLE = {"ok": "green", "warning": "yellow", "FAIL": "bold red"}


def _executor(workdir: Path, ray_address: str | None):
    """The cluster `submit` would use: --ray-address, else the one recorded in the work directory, else the work
    directory's running local head (never started here: the doctor only looks)."""
    from orchestrator.campaign import cluster_address
    from orchestrator.cluster.local_head import running_head
    from orchestrator.session import Session

    ray_address = cluster_address(workdir, ray_address)
    if not ray_address and running_head(workdir) is None:
        raise UserError(f"no cluster to check: pass --ray-address http://HEAD:8265 (with RAY_AUTH_TOKEN_PATH set "
                        f"to the "
                        f"cluster's token), or submit a campaign with --workdir {workdir} first (its cluster is "
                        f"recorded)")
    return Session(workdir=workdir, ray_address=ray_address).executor


def doctor_cmd(
    workdir: WorkdirOpt,
    ray_address: RayAddressOpt = None,
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="seconds the nodes' checks may take"),
    as_json: bool = typer.Option(False, "--json", help="the findings as JSON (node, check, result, status, "
                                                        "fix)"),
) -> None:
    """Check every alive node of the cluster: Python/Windtunnel/torch/verl/vLLM/Ray versions against this
    machine's, GPUs and CPUs, the shared work directory (a nonce file written on each node and read back
    here), the token, and every verl internal the plugin relies on. Exit 2 listing each problem and its fix.
    The work directory is the one the campaign will use: one shared filesystem, at the same path on every node."""
    from orchestrator.cluster.doctor import as_dicts, check, problems
    from orchestrator.engine.executor.ray_jobs import ClusterAuthError
    from orchestrator.cluster.ray_address import parse_ray_address

    if ray_address is not None:
        parse_ray_address(ray_address)  # bad input (exit 2), before anything is written
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        rows = check(_executor(workdir, ray_address), workdir, deep=True, timeout_s=timeout)
    except ClusterAuthError as exc:  # the cluster answered: a token to fix (exit 2); unreachable exits 3
        raise UserError(f"token: {exc}") from exc
    bad = problems(rows)
    if as_json:
        typer.echo(json.dumps({"ok": not bad, "findings": as_dicts(rows)}, indent=2))
    else:
        t = Table(title=f"campaign doctor: {len({r.node for r in rows if r.node != 'cluster'})} nodes")
        for c in ("node", "check", "result", "fix"):
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(r.node, r.check, Text(f"{r.status}: {r.result}" if r.status != "ok" else r.result,
                                             style=_STYLE.get(r.status, "")), r.fix)
        out.print(t)
    if bad:
        for r in bad:
            err.print(Text.assemble(("problem:", "bold red"), f" {r.node}: {r.check}: {r.result} — fix: {r.fix}"),
                      highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Attach `campaign doctor` to the main app."""
    command(app, "doctor", doctor_cmd)
