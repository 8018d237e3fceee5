"""The list of real components the suite proves (tests/components.py) stays whole: every component is declared by a
test (a `component` marker, or a fixture that starts it) and recorded where it answers (`started`), so a component
dropped from the suite, or a stand-in put where it was, fails here or at the session's end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.components import COMPONENTS, FIXTURE_COMPONENTS, missing

TESTS = Path(__file__).resolve().parent
MARK = re.compile(r"""pytest\.mark\.component\(["']([\w-]+)["']\)""")
RECORD = re.compile(r"""(?:component_)?started\(["']([\w-]+)["']""")


def _sources() -> str:
    return "\n".join(p.read_text() for p in TESTS.rglob("*.py") if p.name != "components.py")


def test_every_component_is_declared_by_a_test_and_recorded_where_it_answers() -> None:
    src = _sources()
    declared = set(MARK.findall(src)) | set(FIXTURE_COMPONENTS.values())
    recorded = set(RECORD.findall(src))
    assert set(COMPONENTS) - declared == set(), "components no test declares"
    assert set(COMPONENTS) - recorded == set(), "components never recorded"
    assert declared <= set(COMPONENTS) and recorded <= set(COMPONENTS)


def test_a_declared_component_that_was_never_recorded_is_named() -> None:
    declared = {"ray-head": {"t::a"}, "verl-hf": {"t::b"}, "slurm": set()}
    records = {"ray-head": [{"component": "ray-head", "test": "t::a", "evidence": "x"}]}
    assert missing(declared, records) == {"verl-hf": {"t::b"}}
    assert missing(declared, {**records, "verl-hf": records["ray-head"]}) == {}
