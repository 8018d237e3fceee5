"""The checked value types campaign specs are built from: safe names (anything that becomes part of a path),
seed lists, `policies:` entries (names, YAML paths, inline `PolicyVariant`s) and step counts.

Why a module: each is validated the same way wherever it appears (campaign and group level of
`orchestrator.engine.spec`), and policy resolution and grid expansion check names with the same `check_name`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from orchestrator.engine.ranges import SEED_LIMIT, check_steps

# One safe pattern for every name that becomes part of a path (campaign, group label, policy, model,
# recipe, suite): no separators, no `..`, no whitespace or control characters.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
# SEED_LIMIT (orchestrator.engine.ranges): numpy/torch seeds are uint32; a larger seed would be truncated silently


def check_name(value: Any, what: str) -> str:
    """`value` if it is a safe name, else ValueError saying why and what is allowed."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {value!r} is not a safe name: use letters, digits and _ . + - "
                         "(starting with a letter or digit, at most 128 characters, no '/' or '..')")
    return value


def check_seeds(v: list[Any] | None) -> list[int] | None:
    """Seeds are distinct plain integers in [0, 2**32)."""
    if v is None:
        return v
    for s in v:
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"seed {s!r} is not an integer; write seeds as integers, e.g. [1, 2, 3]")
        if not 0 <= s < SEED_LIMIT:
            raise ValueError(f"seed {s} is out of range; seeds must be >= 0 and < 2**32")
    if len(set(v)) != len(v):
        raise ValueError(f"seeds {v} contain duplicates; list each seed once")
    return v


def _unique_names(v: list[Any], what: str) -> list[Any]:
    for x in v:
        check_name(x, what)
    dup = sorted({x for x in v if v.count(x) > 1})
    if dup:
        plural = "policies" if what == "policy" else f"{what}s"
        raise ValueError(f"{plural} {dup} listed more than once; list each once")
    return v


class PolicyVariant(BaseModel):
    """A policy declared inline in a campaign: `{name: topk_f03, base: topk, params: {fraction: 0.3}}`.

    Why: varying one parameter used to mean shadowing a shipped YAML, and both generations then carried the same
    name everywhere (run ids, records, MLflow). A variant has its own name; `base` is a policy name or a YAML
    path; `params` override the base's scorer/actuator parameters (`actuator.fraction`, or a bare `fraction`
    when only one of the two declares it), checked against the registry's schemas when the grid is expanded
    (orchestrator.engine.policy_resolve)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    base: str
    params: dict[str, Any] = Field(default_factory=dict)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name_safe(cls, v: str) -> str:
        return check_name(v, "policy variant name")


def is_policy_path(entry: str) -> bool:
    """A `policies:` entry naming a YAML file (relative to the campaign file) rather than a policy name."""
    return entry.endswith((".yaml", ".yml"))


def policy_entry_name(entry: str | PolicyVariant) -> str:
    """The name an entry of `policies:` gives its runs: a variant's `name`, a path's file stem, else the name."""
    if isinstance(entry, PolicyVariant):
        return entry.name
    return Path(entry).stem if is_policy_path(entry) else entry


def _policy_entries(v: Any) -> Any:
    """`policies:` items are names, YAML paths or inline variants; a malformed variant names its field."""
    if not isinstance(v, list):
        return v
    out: list[Any] = []
    for i, x in enumerate(v):
        if isinstance(x, PolicyVariant):
            pass
        elif isinstance(x, dict):
            try:
                x = PolicyVariant.model_validate(x)
            except ValidationError as exc:
                e = exc.errors()[0]
                field = ".".join(str(p) for p in e["loc"]) or "?"
                msg = ("unknown key; a variant takes name, base, params and description"
                       if e["type"] == "extra_forbidden" else str(e["msg"]).removeprefix("Value error, "))
                raise ValueError(f"policy variant {x.get('name', i)!r}: {field}: {msg} (write e.g. "
                                 "{name: topk_f03, base: topk, params: {fraction: 0.3}})") from None
        elif isinstance(x, str):
            if not is_policy_path(x):
                check_name(x, "policy")
        else:
            raise ValueError(f"policy entry {x!r}: give a policy name, a YAML path or a variant "
                             "{name: ..., base: ..., params: {...}}")
        out.append(x)
    names = [policy_entry_name(x) for x in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"policies {dup} listed more than once; list each once (give a variant its own name)")
    return out


# The grid's name and seed lists, validated the same way wherever they appear (campaign and group level).
Seeds = Annotated[list[int], BeforeValidator(lambda v: check_seeds(v) if isinstance(v, list) else v)]
ModelNames = Annotated[list[str], AfterValidator(lambda v: _unique_names(v, "model"))]
# names, YAML paths (relative to the campaign file) or inline variants (PolicyVariant)
PolicyNames = Annotated[list[str | PolicyVariant], BeforeValidator(_policy_entries)]
RecipeName = Annotated[str, AfterValidator(lambda v: check_name(v, "recipe"))]
PolicyName = Annotated[str, AfterValidator(lambda v: check_name(v, "policy"))]


def _steps(v: Any) -> Any:
    problem = check_steps("steps", v)
    if problem:
        raise ValueError(problem.removeprefix("steps: "))
    return v


# steps and save_freq: whole numbers in [1, orchestrator.engine.ranges.STEPS_MAX] (1e9 and 10**30 are typos, not plans)
StepCount = Annotated[int, BeforeValidator(_steps)]
