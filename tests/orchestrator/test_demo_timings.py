"""`campaign demo --timings`: the stage rows are read from the ledger's attempts as a user reads them (count,
sum, mean, longest; the campaign's span from the first start to the last end), unfinished attempts left out."""

from __future__ import annotations

import re

from orchestrator.demo_timings import DemoTimings
from orchestrator.engine.ledger import Attempt
from orchestrator.engine.ledger.states import AttemptStatus


def _att(stage: str, started: float, ended: float | None, status: str = "succeeded") -> Attempt:
    """A ledger attempt with only what the code under test reads set."""
    return Attempt(id=0, campaign="c", run_key="k", attempt=1, stage=stage, submission_id="s", started_at=started,
                   ended_at=ended, status=AttemptStatus(status), reason="", failure_class="")


def test_stage_rows_sum_each_stage_and_the_campaign_spans_first_start_to_last_end() -> None:
    t = DemoTimings()
    t.add_stages([
        _att("train", 10.0, 40.0),
        _att("train", 12.0, 32.0),
        _att("evaluate", 40.0, 55.0),
        _att("evaluate", 50.0, None),  # still running: not a finished stage
    ])
    rows = {p.name: p for p in t.parts}
    assert rows["train stages"].wall_s == 50.0 and "2 jobs, mean 25.0 s, longest 30.0 s" in rows["train stages"].note
    assert rows["evaluate stages"].wall_s == 15.0 and "1 job," in rows["evaluate stages"].note
    assert rows["campaign: first stage start → last stage end"].wall_s == 45.0
    lines = t.lines()
    assert lines[-1].startswith("total") and "venv" in lines[-1]
    assert len({re.search(r"\d s\b", line).end() for line in lines}) == 1  # the seconds column is aligned


def test_no_finished_attempt_adds_no_stage_row() -> None:
    t = DemoTimings()
    t.add_stages([_att("train", 1.0, None)])
    assert t.parts == []
    with t.part("analysis"):
        pass
    assert [p.name for p in t.parts] == ["analysis"] and t.parts[0].wall_s >= 0
