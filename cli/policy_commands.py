"""`campaign policies [check|show NAME|validate FILE]`: the policy library from the command line.

Imports of torch/verl happen inside the commands so `campaign --help` stays fast. User errors print one
line to stderr and exit 2; a failed plugin self-check exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.console import out
from cli.groups import callback, command


from campaigns import config_root
from wtcommon.errors import UserError

DEFAULT_DIR = config_root() / "policy"


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _schema(entry) -> str:
    return "; ".join(f"{k}: {p.allowed()} (default {p.default!r})" for k, p in entry.params.items()) or "-"


def _configs(folder: Path) -> list:
    """(path, policy) of every YAML in `folder`; a project's folder puts its project on the import path first, so
    its policies' `plugins:` import as they do in `show` and `submit`."""
    from orchestrator.engine.plugins import add_project_path, project_root_of_policy
    from policies import load_policy

    if not folder.is_dir():
        raise UserError(f"{folder}: policy folder not found (use --dir)")
    paths = sorted(folder.glob("*.yaml"))
    if paths and folder.resolve() != DEFAULT_DIR.resolve():  # a project's: its plugins import from it, as in `show`
        add_project_path(project_root_of_policy(paths[0]))
    return [(path, load_policy(path)) for path in paths]  # PolicyConfigError: exit 2


def _listed_folders(folder: Path | None) -> list[Path]:
    """The policy folders `campaign policies` lists, in the order a name resolves: `--dir` (or the current folder's
    project `policy/`), then the shipped ones (issue 58: a project's own were missing, and --dir hid the shipped)."""
    from orchestrator.engine.policy_resolve import policy_dirs, project_root

    if folder is not None:
        if not folder.is_dir():
            raise UserError(f"--dir {folder}: policy folder not found; give a folder of policy YAMLs")
        return [folder] + ([DEFAULT_DIR] if folder.resolve() != DEFAULT_DIR.resolve() else [])
    root = project_root(Path.cwd())
    return [d for d in policy_dirs(root) if d.is_dir()]


def _curriculum_schema(cls) -> str:
    return "; ".join(f"{k}: {p.allowed()} (default {p.default!r})" for k, p in cls.PARAMS.items()) or "-"


def _curricula_table() -> Table:
    """Every registered curriculum (shipped, and a plugin's once imported) with its signal and parameter schema."""
    from policies import CURRICULA

    t = Table(title="Curricula")
    for c in ("name", "signal", "parameters"):
        t.add_column(c, no_wrap=c == "name", overflow="fold")
    for name, cls in sorted(CURRICULA.items()):
        t.add_row(name, cls.signal, _curriculum_schema(cls))
    return t


def _options(p) -> str:
    c = p.config
    opts = []
    if p.mechanism == "select":
        opts += [f"loss_norm={p.loss_norm}"] + (["recompute_advantages"] if p.recompute_advantages else [])
    if p.control:
        opts.append(f"control={p.control['name']}")
    if p.warmup_step:
        opts.append(f"warmup={p.warmup_step}")
    if c.get("curriculum"):
        opts.append(f"curriculum={c['curriculum']['name']}({_params(c['curriculum'].get('params') or {})})")
    if c.get("dynamic_sampling"):
        opts.append(f"dynamic_sampling({_params(c['dynamic_sampling'])})")
    return ", ".join(opts) or "-"


def list_all(ctx: typer.Context, folder: Annotated[Path | None, typer.Option(
        "--dir", metavar="DIR", help="a folder of policy YAMLs, listed before the shipped ones (default: the current "
        "folder's project `policy/`)")] = None) -> None:
    """List scorers, actuators, curricula (with parameter schemas) and the named configurations: the project's
    own (its plugins imported, so its scorer, actuator or curriculum is listed too), then the shipped ones."""
    if ctx.invoked_subcommand is not None:
        return
    from policies import ACTUATORS, SCORERS

    folders = _listed_folders(folder)
    rows = [(d, path, p) for d in folders for path, p in _configs(d)]  # plugins imported before the tables
    t = Table(title="Scorers")
    for c in ("name", "granularity", "reads", "parameters"):
        t.add_column(c, no_wrap=c in ("name", "mechanism"), overflow="fold")
    for name, e in sorted(SCORERS.items()):
        t.add_row(name, e.cls.granularity, ", ".join(e.cls.reads), _schema(e))
    out.print(t)
    t = Table(title="Actuators")
    for c in ("name", "mechanism", "granularity", "parameters"):
        t.add_column(c, no_wrap=c in ("name", "mechanism"), overflow="fold")
    for name, e in sorted(ACTUATORS.items(), key=lambda kv: (kv[1].cls.mechanism, kv[0])):
        t.add_row(name, e.cls.mechanism, e.cls.granularity, _schema(e))
    out.print(t)
    out.print(_curricula_table())
    t = Table(title="Configurations (" + "; then ".join(str(d) for d in folders) + ")")
    for c in ("name", "from", "mechanism", "scorer", "actuator", "params", "options"):
        t.add_column(c, no_wrap=c in ("name", "mechanism"), overflow="fold")
    seen: set[str] = set()
    for d, _path, p in rows:
        c = p.config
        where = "shipped" if d.resolve() == DEFAULT_DIR.resolve() else "project"
        if p.name in seen:
            where += " (shadowed: the name resolves to the one above)"
        seen.add(p.name)
        t.add_row(p.name, where, p.mechanism, (c.get("scorer") or {}).get("name", "-"),
                  (c.get("actuator") or {}).get("name", "-"),
                  _params((c.get("actuator") or {}).get("params", {})), _options(p))
    out.print(t)


def show(name: Annotated[str, typer.Argument(help="configuration name or YAML path")],
         folder: Annotated[Path | None, typer.Option("--dir", metavar="DIR",
                                                     help="look the name up in this folder only")] = None,
         campaign: Annotated[str | None, typer.Option(
             "--campaign", help="resolve the name as this campaign's submit does (default: the current folder's "
             "project)")] = None,
         as_json: Annotated[bool, typer.Option("--json",
                                               help="print the resolved config as JSON")] = False) -> None:
    """Show one configuration fully resolved (defaults filled), with its semantics. A name resolves as
    `submit` resolves it: the project's `policy/` folder first, then the shipped policies."""
    from orchestrator.engine.plugins import add_project_path, project_root_of_policy
    from orchestrator.engine.policy_resolve import locate_policy
    from policies import load_policy

    path = locate_policy(name, folder=folder, campaign=campaign)  # SpecError: exit 2
    add_project_path(project_root_of_policy(path))
    p = load_policy(path)  # PolicyConfigError: exit 2
    if as_json:
        out.print_json(json.dumps(p.config, default=str))
        return
    desc = p.config.get("description") or ""
    out.print(f"[bold]{p.name}[/bold] ({p.mechanism})" + (f" - {desc}" if desc else ""))
    for key in ("scorer", "actuator"):
        blk = p.config.get(key)
        if blk:
            obj = getattr(p, key)
            out.print(f"  {key}: {blk['name']}({_params(blk['params'])})")
            out.print(f"    {(type(obj).__doc__ or '').strip().splitlines()[0]}", markup=False)
    blk = p.config.get("curriculum")
    if blk:
        _show_curriculum(blk)
    for key in ("loss_norm", "recompute_advantages", "warmup_step", "control", "domains", "search_space",
                "dynamic_sampling"):
        if p.config.get(key) not in (None, [], {}):
            out.print(f"  {key}: {p.config[key]}", markup=False)
    out.print(f"  passes over (B, L) per step: {p.passes:g}")


def _show_curriculum(blk: dict) -> None:
    """A policy's curriculum block: the rule, its parameters as resolved, what it reads and each knob's schema."""
    from policies.curricula.registry import curriculum_class

    cls = curriculum_class(blk["name"])
    out.print(f"  curriculum: {blk['name']}({_params(blk.get('params') or {})})", markup=False)
    doc = (cls.__doc__ or "").strip().splitlines()
    if doc:
        out.print(f"    {doc[0]}", markup=False)
    out.print(f"    signal: {cls.signal}", markup=False)
    for k, spec in cls.PARAMS.items():
        note = f" - {spec.doc}" if spec.doc else ""
        out.print(f"    {k}: {spec.allowed()} (default {spec.default!r}){note}", markup=False)


def validate(files: Annotated[list[Path], typer.Argument(help="policy YAML files")],
             rollout_n: Annotated[int | None, typer.Option("--rollout-n",
                                                           help="cross-check against rollout.n")] = None) -> None:
    """Validate policy YAMLs strictly: every problem of every file is listed (exit 2), each naming the file
    and field. A policy's `plugins:` modules are imported (that runs their code) from its project
    directory: the folder above `policy/` (or the YAML's own folder)."""
    from orchestrator.engine.plugins import add_project_path, project_root_of_policy
    from policies import load_policy
    from policies.problems import policy_problems

    if rollout_n is not None and rollout_n < 2:
        raise UserError(f"--rollout-n: got {rollout_n}; GRPO needs at least 2 samples per prompt")
    problems = []
    for f in files:
        add_project_path(project_root_of_policy(f))
        found = policy_problems(f, rollout_n=rollout_n)
        problems += found
        if not found:
            p = load_policy(f, rollout_n=rollout_n)
            out.print(f"ok {f} ({p.name}, {p.mechanism})")
    if problems:
        raise UserError(f"{len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems))


def check() -> None:
    """Import the verl plugin the way verl does and assert `windtunnel_sync` is registered (exit 1 if not)."""
    from policies.verl.checks import self_check

    for line in self_check():  # PluginCheckError: exit 1
        out.print(f"ok  {line}", markup=False)


def register(app: typer.Typer) -> None:
    """Attach `campaign policies ...`."""
    policies_app = typer.Typer(help="Data policies: list scorers, actuators, curricula and named configurations; "
                               "plugin check.",
                               invoke_without_command=True, no_args_is_help=False)
    callback(policies_app, list_all)
    command(policies_app, "show", show)
    command(policies_app, "validate", validate)
    command(policies_app, "check", check)
    app.add_typer(policies_app, name="policies")
