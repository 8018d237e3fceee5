"""A campaign on the post-cutoff suite asks for the base-model memorization probe by default (issue 52): the suite
declares `memorization_probe: true`; a campaign's `evaluation: {memorization: false}` still turns it off, and on
db12 nothing changes (off unless asked)."""

from __future__ import annotations

from orchestrator.base_probe import probe_on, requested
from orchestrator.session import plan


def test_the_post_cutoff_suite_turns_the_probe_on_unless_the_campaign_says_no(small_campaign):
    on = plan(small_campaign("pc_on", suite="db12_post_cutoff"))[1]
    off = plan(small_campaign("pc_off", suite="db12_post_cutoff", evaluation={"memorization": False}))[1]
    db12 = plan(small_campaign("plain", suite="db12"))[1]
    asked = plan(small_campaign("asked", suite="db12", evaluation={"memorization": True}))[1]
    assert all(probe_on(r) for r in on) and list(requested(on)) == ["m0"]
    assert not any(probe_on(r) for r in off) and requested(off) == {}
    assert not any(probe_on(r) for r in db12) and all(probe_on(r) for r in asked)
