"""`campaign head status|stop`: the work dir's local Ray head, seen and stopped on its own.

Why: a head outlives the command that started it (it is reused by the next one), and one whose start was
interrupted must be visible and stoppable without `ray stop`, which kills every Ray on the machine. `stop`
stops exactly this work dir's head, by the PIDs of its processes (`orchestrator.cluster.local_head`).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from cli.console import out
from cli.groups import command, subgroup
from cli.options import WorkdirOpt

def status_cmd(
    workdir: WorkdirOpt,
    as_json: bool = typer.Option(False, "--json", help="print the status as one JSON object"),
) -> None:
    """Whether the work dir's head runs (or was left starting), its address, temp dir, ports and PIDs."""
    from orchestrator.cluster.local_head import head_status

    st = head_status(workdir)
    if as_json:
        typer.echo(json.dumps(st, sort_keys=True))
        return
    out.print(f"local Ray head of {Path(workdir).resolve()}: [bold]{st['state']}[/]", highlight=False)
    if st["address"]:
        out.print(f"  address {st['address']} (GCS {st['gcs']}), temp dir {st['temp_dir']} "
                  f"(mode {st['temp_dir_mode'] or 'absent'})", highlight=False)
    if st["ports"]:
        out.print("  ports (all on 127.0.0.1): " + ", ".join(f"{k} {v}" for k, v in sorted(st["ports"].items())),
                  highlight=False)
    if st["pids"]:
        t = Table("PID", "process")
        for pid, name in sorted(st["pids"].items()):
            t.add_row(str(pid), name)
        out.print(t)


def stop_cmd(
    workdir: WorkdirOpt,
) -> None:
    """Stop this work dir's head (running or left half-started) by its processes' PIDs, never `ray stop`."""
    from orchestrator.cluster.local_head import stop_head

    pids = stop_head(workdir)
    if pids:
        out.print(f"stopped the local Ray head of {Path(workdir).resolve()}: {len(pids)} processes "
                  f"(PIDs {', '.join(map(str, pids))})", highlight=False)
    else:
        out.print(f"no local Ray head runs for {Path(workdir).resolve()}", highlight=False)


def register(app: typer.Typer) -> None:
    head = subgroup(app, "head", "the work dir's local Ray head: status (processes, address, ports) and stop")
    command(head, "status", status_cmd)
    command(head, "stop", stop_cmd)
