"""Where a campaign's `policies:` entries lead: a name, a YAML path or an inline variant → (name, config).

Why one module: `submit` (grid expansion), `campaign policies show` and the message for an unknown name must
agree on where a name resolves — the campaign's project `policy/` folder first, then the shipped
`campaigns/policy/` — and on what to suggest (close names from both). An inline variant's overrides are
checked against the policy registry's `Param` schemas here, so a bad one exits 2 at `plan` naming the campaign
file, the variant and the field.
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Any

from orchestrator.engine.spec import CampaignSpec, SpecError, shipped_config_root
from orchestrator.engine.spec_fields import PolicyVariant, check_name, is_policy_path, policy_entry_name
from policies import MECHANISMS, declared_mechanism, mechanism_of
from wtcommon.files import load_yaml_mapping

def policy_dirs(config_root: str | Path | None) -> list[Path]:
    """The folders a policy name is looked up in, in order: the project's `policy/`, then the shipped one."""
    dirs = [Path(config_root) / "policy"] if config_root else []
    shipped = shipped_config_root() / "policy"
    return dirs + ([shipped] if shipped.resolve() not in {d.resolve() for d in dirs} else [])


def known_policies(config_root: str | Path | None) -> list[str]:
    """Every policy name that resolves from `config_root` (project and shipped), sorted."""
    return sorted({p.stem for d in policy_dirs(config_root) if d.is_dir() for p in d.glob("*.yaml")})


def find_policy(name: str, config_root: str | Path | None) -> Path | None:
    """The YAML a policy name resolves to (project first, then shipped), or None."""
    for d in policy_dirs(config_root):
        if (d / f"{name}.yaml").is_file():
            return d / f"{name}.yaml"
    return None


def unknown_policy(name: str, config_root: str | Path | None) -> str:
    """'policy NAME not found in DIRS; did you mean A, B?' with close names from the project and shipped policies."""
    known = known_policies(config_root)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    where = " or ".join(str(d) for d in policy_dirs(config_root))
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return (f"policy {name!r} not found in {where}; {hint}known: {', '.join(known)} (or give a YAML path, "
            "relative to the campaign file)")


def project_root(start: Path) -> Path | None:
    """The project around `start` as `submit` finds a campaign's: the nearest folder (itself or above) holding a
    `policy/` or `recipe/` folder; None outside any project."""
    start = Path(start).resolve()
    for cand in (start, *start.parents):
        if (cand / "policy").is_dir() or (cand / "recipe").is_dir():
            return cand
    return None


def locate_policy(name: str, *, folder: Path | None = None, campaign: str | None = None,
                  cwd: Path | None = None) -> Path:
    """The YAML `campaign policies show NAME` shows: a path as given; a name in `folder` (`--dir`) only, else
    resolved as `submit` resolves it — the project of `campaign` (or of the current folder), then the shipped
    policies. SpecError with close names from both when it is not found."""
    if is_policy_path(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise SpecError(f"{path}: no such policy file")
        return path
    try:
        check_name(name, "policy")
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if folder is not None:
        path = Path(folder) / f"{name}.yaml"
        if path.is_file():
            return path
        known = sorted(p.stem for p in Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise SpecError(f"{path}: no such policy configuration; {hint}known: {', '.join(known)}")
    if campaign is not None:
        from orchestrator.engine.spec import resolve_campaign_path

        root: Path | None = resolve_campaign_path(campaign)[0]
    else:
        root = project_root(cwd or Path.cwd())
    found = find_policy(name, root)
    if found is None:
        raise SpecError(unknown_policy(name, root))
    return found


def _load(path: Path, what: str) -> dict[str, Any]:
    from orchestrator.engine.plugins import add_project_path, project_root_of_policy

    add_project_path(project_root_of_policy(path))  # its plugins: modules in the policy's own project
    return load_yaml_mapping(path, what=what, error=SpecError)


def _base_config(entry: str, spec: CampaignSpec, key: str, who: str = "") -> tuple[dict[str, Any], Path]:
    """A name or a YAML path (relative to the file `key` came from) → (its mapping, its file); `who` names the
    variant whose base it is, in messages."""
    where = f"{spec.file_for(key)}: key '{key}'{who}"
    if is_policy_path(entry):
        path = Path(entry).expanduser()
        if not path.is_absolute():
            path = Path(spec.file_for(key)).parent / path
        if not path.is_file():
            raise SpecError(f"{where}: policy file {entry} not found at {path.resolve()}; give a path relative to "
                            "the campaign file")
        return _load(path, "policy file"), path
    try:
        check_name(entry, "policy")  # names become paths: never outside the config tree
    except ValueError as exc:
        raise SpecError(f"{where}: {exc}") from None
    found = find_policy(entry, spec.config_root)
    if found is None:
        raise SpecError(f"{where}: {unknown_policy(entry, spec.config_root)}")
    return _load(found, "policy file"), found


def _override_schemas(cfg: dict[str, Any], variant: PolicyVariant, where: str) -> dict[str, dict[str, Any]]:
    """{block: {parameter: Param}} of the base's scorer, actuator and curriculum blocks, looked up in their
    registries (after the base's plugins are imported: they register what it names)."""
    from policies import PolicyConfigError
    from policies.curricula.registry import curriculum_class
    from policies.plugins import import_plugins
    from policies.registry import lookup

    try:
        import_plugins(cfg, where)
    except PolicyConfigError as exc:
        raise SpecError(str(exc)) from None
    schemas: dict[str, dict[str, Any]] = {}
    for part in ("scorer", "actuator", "curriculum"):
        blk = cfg.get(part)
        if isinstance(blk, dict) and "name" in blk:
            try:
                schemas[part] = dict(curriculum_class(blk["name"]).PARAMS if part == "curriculum"
                                     else lookup(part, blk["name"], variant.base).params)
            except PolicyConfigError as exc:
                raise SpecError(f"{where}: base {variant.base!r}: {exc}") from None
    return schemas


def apply_overrides(base: dict[str, Any], variant: PolicyVariant, where: str) -> dict[str, Any]:
    """The base config with the variant's parameter overrides, each checked against the registry's schema
    (`actuator.fraction`, `scorer.agg`, `curriculum.decay`, or a bare name that only one of the blocks declares);
    a curriculum's cross-field checks (e.g. band_low <= band_high) run on the merged parameters."""
    from policies import PolicyConfigError

    cfg = copy.deepcopy(base)
    schemas = _override_schemas(cfg, variant, where)
    known = [f"{part}.{p}" for part, ps in schemas.items() for p in ps]
    for key, value in variant.params.items():
        part, _, pname = str(key).rpartition(".")
        parts = [part] if part else [p for p, ps in schemas.items() if pname in ps]
        if len(parts) > 1:
            raise SpecError(f"{where}: params.{key}: {' and '.join(parts)} all take {pname!r}; write "
                            f"{' or '.join(f'{p}.{pname}' for p in parts)}")
        if not parts or parts[0] not in schemas or pname not in schemas[parts[0]]:
            mechs = ", ".join(schemas) or "no scorer, actuator or curriculum"
            raise SpecError(f"{where}: params.{key}: base {variant.base!r} has no such parameter; known: "
                            f"{', '.join(known) or f'none ({mechs})'}")
        try:
            checked = schemas[parts[0]][pname].check(value, f"{where}: params.{key}")
        except PolicyConfigError as exc:
            raise SpecError(str(exc)) from None
        blk = cfg[parts[0]]
        blk["params"] = {**(blk.get("params") or {}), pname: checked}
    if "curriculum" in schemas:
        _check_curriculum_block(cfg["curriculum"], where)
    cfg["name"] = variant.name
    shown = ", ".join(f"{k}={v}" for k, v in variant.params.items())
    cfg["description"] = variant.description or f"{variant.base} with {shown or 'its own parameters'}"
    return cfg


def _check_curriculum_block(blk: dict[str, Any], where: str) -> None:
    from policies import PolicyConfigError
    from policies.curricula.registry import check_curriculum

    try:
        check_curriculum(blk["name"], blk.get("params"))
    except PolicyConfigError as exc:
        raise SpecError(f"{where}: {exc}") from None


def resolve_policy(entry: str | PolicyVariant, spec: CampaignSpec, key: str) -> tuple[str, dict[str, Any], str]:
    """(name, config, mechanism) of one `policies:` entry: what the grid puts in each run (name in the run id,
    config in the run key and the training request)."""
    name = policy_entry_name(entry)
    if isinstance(entry, PolicyVariant):
        base, path = _base_config(entry.base, spec, key, f": policy variant {entry.name!r}: base")
        where = f"{spec.file_for(key)}: key '{key}': policy variant {entry.name!r} (base {entry.base})"
        cfg = apply_overrides(base, entry, where)
    else:
        cfg, path = _base_config(entry, spec, key)
        if is_policy_path(entry):
            cfg = {**cfg, "name": name}  # a policy named by path runs under its file's name
    mech = mechanism_of(cfg, name)
    if mech is None:
        raise SpecError(f"{path}: key 'mechanism': '{declared_mechanism(cfg, name)}' is not one of "
                        f"{'|'.join(MECHANISMS)}")
    return name, cfg, mech.value  # stored as its text: run keys hash the spec's JSON
