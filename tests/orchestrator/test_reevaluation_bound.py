"""A run whose evaluate stage keeps scoring under other settings than the driver's is re-evaluated once, then
failed with the reason (retried under the retry cap), never re-evaluated without end: the loop seen when
Windtunnel was upgraded under a running campaign (the stage jobs computed the evaluation key with newer code
than the driver; attempt 236 before it was stopped)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from orchestrator.engine.scheduler.watch import Watching


class _Ledger:
    def __init__(self) -> None:
        self.moves: list[tuple[str, str]] = []

    def end_attempt(self, *a, **k) -> None:
        pass

    def transition(self, campaign, run_key, to, **k):
        self.moves.append((str(to), k.get("reason", "")))
        return SimpleNamespace(run_key=run_key, state=to)

    def release(self, *a) -> None:
        pass


class _Driver(Watching):
    def __init__(self, workdir: Path) -> None:
        self.workdir, self.campaign, self.owner = workdir, "c", "me"
        self.ledger = _Ledger()
        self.verifiers = {"evaluate": lambda spec, wd: None}  # the records were scored under other settings
        self.failed: list[tuple[str, str]] = []

    def _fail(self, row, stage, reason, klass, logs=""):
        self.failed.append((reason, klass))

    def _notify(self, r, what):
        pass


def test_a_run_scored_again_under_other_settings_is_failed_with_the_reason_not_looped(tmp_path: Path) -> None:
    spec = SimpleNamespace(campaign="c", run_key="k1", eval_key="driver-key")
    done = tmp_path / "runs" / "c" / "k1" / "eval_done.json"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"eval_key": "stage-key"}))
    drv = _Driver(tmp_path)
    row = SimpleNamespace(run_key="k1", submission_id="s1", outputs={})
    drv._succeeded(row, "evaluate", spec)  # the spec changed while it was evaluated: once again, as before
    assert [m for m, _ in drv.ledger.moves] == ["trained"] and not drv.failed
    drv._succeeded(row, "evaluate", spec)  # submitted with these settings, scored under others again
    assert len(drv.failed) == 1 and drv.failed[0][1] == "error"
    reason = drv.failed[0][0]
    assert "stage-key" in reason and "driver-key" in reason and "campaign resume" in reason
    assert len(drv.ledger.moves) == 1  # no second re-evaluation
