"""A `seeds: {design: sequential}` campaign driven end to end: `campaign submit` runs the first
batch, takes the interim look, records it in the ledger database and submits the next batch only
for the comparisons still open (and their reference); decided comparisons stop receiving seeds.
Real local Ray head + SQLite ledger; the noop recipe's `simulate:` block stands in for training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.sequential.design import SequentialDesign
from analysis.sequential.family import familywise_look

REPO = Path(__file__).resolve().parents[2]
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))

# two batches of 2 seeds (4 policies: 8 runs, then 4): the smallest design with a look that decides some comparisons
# and leaves one open. At n=2 a paired interval is wide (1 degree of freedom), so gfpo's effect is large and its and
# baseline's noise small enough to be declared superior at look 0; maxvar (effect 1.0, noisy) stays open.
SEEDS = {"design": "sequential", "max": 4, "batch": 2, "equivalence_margin": 1.5}
SIM = {"base": 50.0, "effects": {"gfpo": 20.0, "topk": 0.0, "maxvar": 1.0}, "seed_sd": 2.0, "noise_sd": 0.2,
       "noise_sd_by_policy": {"maxvar": 2.5, "gfpo": 0.01, "baseline": 0.01}}


def _campaign(tree: Path, name: str) -> Path:
    (tree / "recipe" / "noop_sim.yaml").write_text(yaml.safe_dump({"name": "noop_sim", "simulate": SIM}))
    spec = yaml.safe_load((tree / "small.yaml").read_text())
    spec.update(name=name, recipe="noop_sim", steps=1, policies=["baseline", "gfpo", "topk", "maxvar"], seeds=SEEDS)
    p = tree / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


def _runs_and_looks(wd: Path, campaign: str) -> tuple[list[tuple[str, str]], list[tuple]]:
    """(run_id, state) of every ledger run and the recorded looks, read through the ledger's own API."""
    from orchestrator.engine.ledger import open_ledger
    from orchestrator.looks import read_looks

    led = open_ledger(wd)
    runs = [(r.run_id, r.state) for r in led.runs(campaign)]
    led.close()
    lk = read_looks(f"sqlite:///{wd / 'ledger.db'}", campaign)
    cols = ["look", "comparison", "n", "decision", "mean", "rci_low", "rci_high"]
    return runs, [tuple(r) for r in lk[cols].itertuples(index=False)] if not lk.empty else []


def _db12_diffs(records: Path, policy: str, seeds: list[int]) -> np.ndarray:
    """DB-12 (mean of the three domain means) per seed, policy minus baseline, from the records by hand."""
    r = pd.read_parquet(records)
    dom = r.groupby(["policy", "seed", "domain"])["accuracy"].mean().groupby(["policy", "seed"]).mean()
    return np.array([dom[(policy, s)] - dom[("baseline", s)] for s in seeds])


@pytest.mark.slow
def test_sequential_campaign_spends_seeds_only_on_open_comparisons(tree: Path, tmp_path: Path, head) -> None:
    addr, tok = head
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(tok), "RAY_AUTH_MODE": "token"}
    wd = tmp_path / "wd"
    camp = _campaign(tree, "seq")
    p = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd), "--max-parallel",
                        "4"],
                       env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "interim look 0" in p.stdout and "sequential seeds" in p.stdout

    runs, looks = _runs_and_looks(wd, "seq")
    assert {s for _, s in runs} == {"recorded"}
    seeds_of: dict[str, set[int]] = {}
    for rid, _ in runs:
        pol, seed = rid.split("/")[2], int(rid.rsplit("/s", 1)[1])
        seeds_of.setdefault(pol, set()).add(seed)

    look0 = {c.split(":")[1].split("-")[0]: (n, d) for lk, c, n, d, *_ in looks if lk == 0}
    assert set(look0) == {"gfpo", "topk", "maxvar"} and all(n == 2 for n, _ in look0.values())
    assert look0["gfpo"][1] == "superior" and look0["topk"][1] == "equivalent"
    # decided comparisons got no more seeds; the open one and its reference got the next batch
    assert seeds_of["gfpo"] == seeds_of["topk"] == {1, 2}
    # maxvar (effect 1.0, noisy) is open at 2 seeds: it and baseline, only, get seeds 3-4
    assert look0["maxvar"][1] == "continue"
    assert seeds_of["maxvar"] == seeds_of["baseline"] == {1, 2, 3, 4}
    look1 = [row for row in looks if row[0] == 1]
    assert [r[1].split(":")[1] for r in look1] == ["maxvar-baseline"] and look1[0][2] == 4
    assert look1[0][3] in {"superior", "inferior", "equivalent", "inconclusive"}  # the last look decides or ends
    assert len(runs) == sum(len(v) for v in seeds_of.values())

    # every recorded look matches a paired test computed from the records by hand
    # family-wise by default: Holm step-down over the campaign's 3 comparisons (alpha/3 first, alpha/2 for the rest
    # once one is rejected, also at later looks)
    design = SequentialDesign.from_mapping(SEEDS)
    assert design.familywise == "holm" and design.per_comparison(3).alpha == pytest.approx(0.05 / 3)
    records = wd / "results" / "seq" / "records.parquet"
    rejected = 0
    for lk in sorted({row[0] for row in looks}):
        at = [row for row in looks if row[0] == lk]
        data = {comp: _db12_diffs(records, comp.split(":")[1].split("-")[0], list(range(1, n + 1)))
                for _, comp, n, *_ in at}
        ref, _ = familywise_look(data, lk, design, 3, rejected_before=rejected)
        for _, comp, _n, decision, mean, lo, hi in at:
            assert mean == pytest.approx(data[comp].mean(), abs=1e-9)
            assert (lo, hi, decision) == (pytest.approx(ref[comp].rci_low), pytest.approx(ref[comp].rci_high),
                                          ref[comp].decision)
        rejected += sum(row[3] in ("superior", "inferior") for row in at)

    # resuming a finished sequential campaign adds no run and no look
    again = subprocess.run([CAMPAIGN, "resume", "seq", "--ray-address", addr, "--workdir", str(wd)],
                           env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _runs_and_looks(wd, "seq") == (runs, looks)
    st = json.loads(subprocess.run([CAMPAIGN, "status", "seq", "--workdir", str(wd), "--json"],
                                   capture_output=True, text=True).stdout)
    assert st["states"] == {"recorded": len(runs)}

    # resubmitting the spec (first batch only) neither re-adds nor counts the later batches as removed
    re = subprocess.run([CAMPAIGN, "submit", str(camp), "--ray-address", addr, "--workdir", str(wd), "--no-wait"],
                        env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    # (submit's summary names only the categories that have runs: issue 27)
    assert re.returncode == 0 and re.stdout.strip() == "seq: 0 new, 8 unchanged", re.stdout

    # the looks are visible from the CLI and, with their adjusted intervals, first in the report
    lk = subprocess.run([CAMPAIGN, "looks", "seq", "--workdir", str(wd), "--json"], capture_output=True, text=True)
    assert lk.returncode == 0 and len(json.loads(lk.stdout)) == len(looks)
    assert (wd / "results" / "seq" / "sequential_looks.csv").is_file()
    html_out = tmp_path / "report.html"
    rep = subprocess.run([CAMPAIGN, "report", str(records), "--out", str(html_out), "--resamples", "200"],
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    doc = html_out.read_text()
    i_seq, i_forest = doc.index("Sequential seed design: adjusted intervals"), doc.index("Forest plot")
    assert i_seq < i_forest and "seq/m0/:maxvar-baseline" in doc
    m = looks[-1]
    assert f"[{m[5]:+.3f}, {m[6]:+.3f}]" in doc
    # a hand look on a campaign the orchestrator is running sequentially is refused (it would corrupt its log)
    hand = subprocess.run([CAMPAIGN, "seeds-look", "seq", "--look", "0", "--workdir", str(wd)], capture_output=True,
                          text=True)
    assert hand.returncode == 2 and "campaign looks seq" in hand.stderr


# ---- fast: the look/batch bookkeeping on a real SQLite ledger, runs recorded by hand ----------

def _record(sess, campaign: str, runs_dir: Path) -> int:
    """Walk every planned run through the ledger's state machine with its simulated records."""
    from analysis.records import write_records
    from orchestrator.engine.grid import RunSpec
    from orchestrator.engine.stages import eval_request
    from training.backend import Checkpoint
    from training.noop import simulated_records

    n = 0
    for row in sess.ledger.runs(campaign, ["planned"]):
        spec = RunSpec.from_dict(json.loads(row.spec_json))
        path = runs_dir / f"{row.run_key}.parquet"
        write_records(simulated_records(eval_request(spec, runs_dir, Checkpoint(spec.steps, runs_dir))), path)
        for st in ("queued", "training", "trained", "evaluating", "recorded"):
            sess.ledger.transition(campaign, row.run_key, st)
        sess.ledger.update(campaign, row.run_key, outputs={"records": str(path)})
        n += 1
    return n


def test_a_crash_between_look_and_batch_is_recovered_without_a_second_look(tree: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrator.adaptive as adaptive
    from orchestrator.looks import read_looks
    from orchestrator.session import Session, plan

    spec, runs = plan(_campaign(tree, "seqf"))
    assert sorted({r.seed for r in runs}) == [1, 2]  # only the first batch is planned
    sess = Session(tmp_path / "wd")
    sess.submit(spec, runs)
    with pytest.raises(adaptive.AdaptiveError, match="still pending"):
        adaptive.advance(sess, "seqf")  # never look while runs are outstanding
    assert _record(sess, "seqf", tmp_path) == 8

    real_add = adaptive._add_runs
    monkeypatch.setattr(adaptive, "_add_runs", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        adaptive.advance(sess, "seqf")  # look 0 recorded, then the orchestrator dies
    monkeypatch.setattr(adaptive, "_add_runs", real_add)
    assert len(read_looks(sess.ledger.url, "seqf")) == 3 and len(sess.ledger.runs("seqf")) == 8

    step = adaptive.advance(sess, "seqf")  # recovery: the batch look 0 asked for, no second look
    assert step.look is None and sorted(step.added) == ["seqf/m0/baseline/s3", "seqf/m0/baseline/s4",
                                                        "seqf/m0/maxvar/s3", "seqf/m0/maxvar/s4"]
    assert len(read_looks(sess.ledger.url, "seqf")) == 3
    with pytest.raises(adaptive.AdaptiveError, match="4 run\\(s\\) still pending"):
        adaptive.advance(sess, "seqf")
    _record(sess, "seqf", tmp_path)
    last = adaptive.advance(sess, "seqf")
    assert last.look == 1 and last.finished and list(last.decisions["policy"]) == ["maxvar"]
    assert adaptive.advance(sess, "seqf").finished and len(sess.ledger.runs("seqf")) == 12
    sess.close()


def test_bad_sequential_inputs_are_named(tree: Path, tmp_path: Path) -> None:
    from orchestrator.adaptive import AdaptiveError, aggregate_of
    from orchestrator.engine.spec import load_campaign
    from orchestrator.engine.stages import StageConfigError, eval_request
    from orchestrator.session import plan
    from training.backend import Checkpoint
    from training.noop import simulated_records

    camp = _campaign(tree, "seqb")
    raw = yaml.safe_load(camp.read_text())
    raw["seeds"]["aggregate"] = "NOPE"
    camp.write_text(yaml.safe_dump(raw))
    with pytest.raises(AdaptiveError, match="seeds.aggregate.*NOPE.*DB-12"):
        aggregate_of(load_campaign(camp))
    raw["seeds"]["aggregate"] = "Math-Heavy-6"
    camp.write_text(yaml.safe_dump(raw))
    assert aggregate_of(load_campaign(camp)) == "Math-Heavy-6"
    (tree / "recipe" / "noop_sim.yaml").write_text(yaml.safe_dump({"name": "noop_sim", "simulate": {"efects": {}}}))
    _, runs = plan(camp)
    with pytest.raises(StageConfigError, match="simulate.*efects"):
        simulated_records(eval_request(runs[0], tmp_path, Checkpoint(1, tmp_path)))


def test_a_campaign_begun_under_the_earlier_default_keeps_its_familywise_procedure(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Looks are immutable: a campaign whose spec names no `familywise` and whose first look was taken when the
    default was Bonferroni takes its later looks under Bonferroni, not the new Holm default (no design error)."""
    from dataclasses import replace

    import orchestrator.adaptive as adaptive
    from orchestrator.engine.spec import CampaignSpec
    from orchestrator.looks import read_looks
    from orchestrator.session import Session, plan

    spec, runs = plan(_campaign(tree, "seqo"))
    sess = Session(tmp_path / "wd")
    sess.submit(spec, runs)
    _record(sess, "seqo", tmp_path)
    new_default = CampaignSpec.sequential_design
    monkeypatch.setattr(CampaignSpec, "sequential_design",
                        lambda self: replace(new_default(self), familywise="bonferroni"))
    adaptive.advance(sess, "seqo")  # look 0 under the earlier default
    monkeypatch.setattr(CampaignSpec, "sequential_design", new_default)
    _record(sess, "seqo", tmp_path)
    last = adaptive.advance(sess, "seqo")
    assert last.look == 1
    looks = read_looks(sess.ledger.url, "seqo")
    assert {json.loads(j)["familywise"] for j in looks["design_json"]} == {"bonferroni"}
    alphas = list(last.decisions["alpha_comparison"])
    assert alphas and alphas == pytest.approx([0.05 / 3] * len(alphas))
    sess.close()
