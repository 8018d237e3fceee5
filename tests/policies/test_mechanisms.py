"""The mechanism set has one home (issue 23): `policies.MECHANISMS` / `policies.mechanism_of`, read by the policy
loader, the campaign grid and the records schema, without paying for torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.schema import MECHANISMS as RECORD_MECHANISMS
from policies import MECHANISMS, Mechanism, PolicyConfigError, declared_mechanism, load_policy, mechanism_of

REPO = Path(__file__).resolve().parents[2]


def test_records_add_only_unknown_to_the_policies_mechanisms() -> None:
    assert MECHANISMS == ("none", "select", "reweight", "mix", "curriculum")  # curriculum: issue 34
    assert RECORD_MECHANISMS == (*MECHANISMS, "unknown")


@pytest.mark.parametrize(("cfg", "name", "expected"), [
    ({"mechanism": "select"}, None, "select"),
    ({"name": "baseline"}, None, "none"),  # the baseline may leave its mechanism out
    ({}, "baseline", "none"),
    ({"name": "gfpo"}, None, ""),  # any other policy must declare one: "" is refused by the callers
    ({"mechanism": "boost"}, "baseline", "boost"),  # a declared value is returned as written, for the message
])
def test_mechanism_of_reads_what_the_config_declares(cfg: dict, name: str | None, expected: str) -> None:
    assert declared_mechanism(cfg, name) == expected
    mech = mechanism_of(cfg, name)  # the enum member, or None for what is not one (refused by the callers)
    assert (mech is None and expected not in MECHANISMS) or (isinstance(mech, Mechanism) and mech.value == expected)


def test_the_loader_refuses_a_mechanism_outside_the_set() -> None:
    allowed = r"allowed: \['none', 'select', 'reweight', 'mix', 'curriculum'\]"
    with pytest.raises(PolicyConfigError, match=r"mechanism: got 'boost'; " + allowed):
        load_policy({"name": "x", "mechanism": "boost"})


def test_naming_mechanisms_does_not_import_torch() -> None:
    """The grid and the records schema import `policies` for the mechanism set; the policy runtime (torch, about
    4 s to import) loads only when a policy is built. Costs one Python start (about 1 CPU second)."""
    code = "import sys, policies, analysis.schema, orchestrator.engine.grid; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
