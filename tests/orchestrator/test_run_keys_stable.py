"""Run keys and stored run specs stay byte-identical (issue 23, typed runs): every ledger and run dir names a
run by its `run_key`, the sha256 of its spec's JSON, so a change in how a `RunSpec` is built or written would
make every existing campaign retrain from scratch. The digests below were taken on main at 66c7f2b, before
`RunSpec` got a typed `PolicyRef` and the ledger started handing back parsed specs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from orchestrator.engine.grid import PolicyRef, RunSpec, expand
from orchestrator.engine.ledger import open_ledger
from orchestrator.engine.spec import load_campaign

REPO = Path(__file__).resolve().parents[2]

# campaign -> (runs, digest of "run_id run_key" lines, of the runs' spec JSON, of their config hashes)
SHIPPED = {
    "campaigns/demo.yaml": (8, "14306fd4d2946ea9", "9d7f3960a4cad058", "89773d7a1ec41c47"),
    "campaigns/demo_verl.yaml": (4, "795a48f705a9b421", "32d02b676579a6c2", "ecb374f98c82a807"),
    "campaigns/tune_demo.yaml": (8, "0293889fd7378fdb", "48d931bf582a34d4", "f6b413ce97faad7f"),
    "campaigns/paper": (591, "e2f89b9635fc0bda", "bda681440974809d", "2d3c85f060fa4c1d"),
}


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


@pytest.mark.parametrize("campaign", sorted(SHIPPED))
def test_shipped_campaigns_keep_their_run_keys_and_stored_specs(campaign: str) -> None:
    runs = expand(load_campaign(REPO / campaign))
    got = (len(runs), _digest([f"{r.run_id} {r.run_key}" for r in runs]), _digest([r.to_json() for r in runs]),
           _digest([r.config_hash for r in runs]))
    assert got == SHIPPED[campaign]


def test_the_ledger_hands_back_the_spec_it_stored(tmp_path: Path) -> None:
    """A row's `spec` is the submitted `RunSpec` (policy name, mechanism and config together), and its stored
    JSON keeps the three policy keys an older Windtunnel wrote and reads."""
    runs = expand(load_campaign(REPO / "campaigns/demo.yaml"))
    led = open_ledger(tmp_path)
    try:
        led.upsert_campaign("demo", "{}", [r.ledger_row() for r in runs])
        rows = {row.run_key: row for row in led.runs("demo")}
    finally:
        led.close()
    for r in runs:
        row = rows[r.run_key]
        assert row.spec == r and row.spec_json == r.to_json()
        assert isinstance(row.spec.policy, PolicyRef) and row.spec.policy.name == r.run_id.split("/")[2]
        stored = r.to_dict()
        assert (stored["policy"], stored["mechanism"], stored["policy_cfg"]) == (
            r.policy.name, r.policy.mechanism, r.policy.cfg)
        assert RunSpec.from_dict(stored) == r
