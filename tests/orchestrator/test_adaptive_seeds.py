"""Adaptive seed allocation in a campaign: looks over records, ledger log, `campaign seeds-look`."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from analysis.aggregates import run_table
from analysis.records import read_records
from analysis.sequential.decisions import interim_decision
from analysis.sequential.design import SequentialDesign
from analysis.sequential.looks import look_at_runs, next_batch_seeds
from evaluation.suite import load_suite
from orchestrator.looks import read_looks, record_look
from tests.released import RELEASED


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    s = load_suite("db12")
    return run_table(read_records(RELEASED, suite=s), s)


def test_look_over_released_records_matches_direct_paired_test(runs):
    design = SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=1.0)
    dec = look_at_runs(runs, design, 0, "DB-12")
    assert len(dec) == 45  # 45 method-vs-reference comparisons in the release
    row = dec[(dec.campaign == "main") & (dec.model == "Qwen2.5-7B-Instruct") & (dec.policy == "gfpo")].iloc[0]
    r = runs[(runs.campaign == "main") & (runs.model == "Qwen2.5-7B-Instruct")]
    a = r[r.policy == "gfpo"].set_index("seed")["DB-12"]
    b = r[r.policy == "baseline"].set_index("seed")["DB-12"]
    d = (a - b.loc[a.index]).to_numpy()
    direct = interim_decision({"x": d}, 0, design)["x"]
    assert row["reference"] == "baseline" and row["n"] == 3
    assert row["mean"] == pytest.approx(d.mean()) and row["decision"] == direct.decision == "continue"
    mix = dec[dec.policy == "reward_gap"]
    assert set(mix["reference"]) == {"static"}
    nxt = next_batch_seeds(dec, design, 0)
    assert nxt and all(v == [4, 5, 6] for v in nxt.values())
    assert next_batch_seeds(dec, design, 3) == {}


def test_every_look_is_recorded_in_the_ledger_database(runs, tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    design = SequentialDesign(looks=(3, 6, 9, 12), equivalence_margin=1.0)
    dec = look_at_runs(runs[runs.campaign == "main"], design, 0, "DB-12")
    assert record_look(url, "paper", dec, design) == len(dec) == 16
    assert record_look(url, "paper", dec, design) == 16  # idempotent per (campaign, look, comparison)
    back = read_looks(url, "paper")
    assert len(back) == 16 and set(back["decision"]) <= {"continue", "superior", "inferior", "equivalent"}
    assert read_looks(url, "other").empty


def test_stopped_comparisons_stop_receiving_seeds():
    """Two comparisons in one group: one decided (huge effect), one open; the open one and the
    shared reference get the next batch; a group with every comparison decided gets nothing."""
    rng = np.random.default_rng(0)
    rows = []
    for g, effects in (("g1", {"sel": 5.0, "rw": 0.0}), ("g2", {"sel": 5.0})):
        for seed in range(1, 7):
            base = 50 + rng.normal(0, 1)
            rows.append({"campaign": g, "model": "m", "regime": "", "step": 8, "policy": "baseline",
                         "mechanism": "none", "seed": seed, "A": base})
            for pol, eff in effects.items():
                mech = "select" if pol == "sel" else "reweight"
                rows.append({"campaign": g, "model": "m", "regime": "", "step": 8, "policy": pol, "mechanism": mech,
                             "seed": seed, "A": base + eff + rng.normal(0, 0.05 if eff else 1.0)})
    design = SequentialDesign(looks=(3, 6, 9, 12))
    dec = look_at_runs(pd.DataFrame(rows), design, 1, "A")
    got = dec.set_index(["campaign", "policy"])["decision"].to_dict()
    assert got[("g1", "sel")] == "superior" and got[("g2", "sel")] == "superior" and got[("g1", "rw")] == "continue"
    assert next_batch_seeds(dec, design, 1) == {("g1", "m", ""): [7, 8, 9]}


def test_cli_seeds_look(tmp_path, campaign_cli):
    p = campaign_cli(["seeds-look", "paper", "--look", "0", "--workdir", str(tmp_path), "--records",
                      str(RELEASED), "--margin", "1.0"])
    assert p.returncode == 0, p.stderr
    assert "recorded 45 decisions" in p.stdout and "next batch" in p.stdout
    assert len(read_looks(f"sqlite:///{tmp_path / 'ledger.db'}", "paper")) == 45
    bad = campaign_cli(["seeds-look", "paper", "--look", "9", "--workdir", str(tmp_path), "--records", str(RELEASED)])
    assert bad.returncode == 2 and "look" in bad.stderr and "Traceback" not in bad.stderr
