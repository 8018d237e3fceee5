"""Campaign integrity on a real local Ray head with the `noop` backend (issue 16): a changed spec
supersedes the earlier generation (never collected), two work dirs never share a job, a recorded run
whose records vanished is an error and is re-recorded on resume, one stage execution per run dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analysis.records import records_baselines

import pandas as pd
import pytest
import yaml

from wtcommon.polling import wait_until

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture
def on_head(head, monkeypatch: pytest.MonkeyPatch) -> str:
    addr, tok = head
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tok))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    return addr


def _session(wd: Path, addr: str, track: bool = False):
    from orchestrator.session import Session

    return Session(wd, ray_address=addr, track=track)


def _drive(sess, campaign: str, timeout_s: float = 240) -> dict[str, int]:
    cfg = sess.default_config(campaign)
    cfg.poll_s, cfg.max_parallel = 0.3, 2
    return sess.scheduler(campaign, cfg).run(timeout_s=timeout_s)


def _executions(wd: Path, campaign: str, run_key: str) -> list[str]:
    return (wd / "runs" / campaign / run_key / "executions.log").read_text().split()[0::3]


def test_resubmit_with_changed_recipe_collects_only_the_new_generation(tree: Path, tmp_path: Path,
                                                                       on_head: str, small_campaign) -> None:
    from orchestrator.session import plan, records_spec_hash, spec_hash

    (tree / "recipe" / "noop_b.yaml").write_text(yaml.safe_dump({"name": "noop_b", "sleep_s": 0.6}))
    camp = small_campaign("gen", policies=["baseline", "gfpo", "static"], seeds=[1])  # 3 runs
    sess = _session(tmp_path / "wd", on_head, track=True)  # MLflow kept in step while driving
    spec, runs = plan(camp)
    sess.submit(spec, runs)
    cfg = sess.default_config("gen")
    cfg.poll_s, cfg.max_parallel = 0.3, 2
    sched = sess.scheduler("gen", cfg)
    sched.enqueue()
    # step until the first run is recorded: at max_parallel 2 the third run is admitted only when a slot frees, in
    # that same step at the earliest, so it cannot be recorded yet — a mixed generation whatever the timing
    def one_recorded() -> bool:
        sched.step()
        return bool(sess.ledger.runs("gen", ["recorded"]))

    assert wait_until(one_recorded, 180, 0.3)
    first = {r.run_key: r.state for r in sess.ledger.runs("gen")}
    assert "recorded" in first.values() and set(first.values()) != {"recorded"}, first  # a mixed generation

    # the same campaign with another recipe: every run_id gets a new run_key
    camp.write_text(yaml.safe_dump({**yaml.safe_load(camp.read_text()), "recipe": "noop_b"}))
    spec2, runs2 = plan(camp)
    diff = sess.submit(spec2, runs2)
    assert len(diff.changed) == 3 and not diff.new
    new_keys = {r.run_key for r in runs2}
    assert not new_keys & set(first)
    counts = _drive(sess, "gen")
    assert counts == {"recorded": 3}

    old = sess.ledger.superseded("gen")
    assert {r.run_key for r in old} == set(first) and all(r.superseded_by in new_keys for r in old)
    assert {r.run_key for r in sess.ledger.runs("gen")} == new_keys  # superseded rows are never current
    # a superseded run's in-flight job was stopped, not left running
    assert not [a for a in sess.ledger.attempts("gen") if a.run_key in first and a.status == "running"]

    out = sess.collect_records("gen")
    recs = pd.read_parquet(out)
    assert set(recs["run_key"]) == new_keys and len(recs) == 3 * 12
    assert recs.groupby(["run_id", "benchmark"]).size().max() == 1  # one run per cell: no generation mix
    assert records_spec_hash(out) == spec_hash(sess.ledger.campaign_spec("gen"))
    assert records_baselines(out) is None  # default `baselines:` are not written: the file keeps its bytes

    from orchestrator import tracking  # MLflow: the new generation FINISHED, every old run ended and tagged

    ml = tracking.client(tracking.default_uri(tmp_path / "wd"))
    every = ml.search_runs([ml.get_experiment_by_name("gen").experiment_id])
    parents = [r for r in every if r.data.tags.get(tracking.CAMPAIGN_RUN_TAG) == "true"]
    cells = [r for r in every if r.data.tags.get(tracking.CAMPAIGN_RUN_TAG) != "true"]
    assert len(parents) == 1  # the campaign's parent run, every cell's run nested under it
    assert {r.data.tags.get(tracking.PARENT_TAG) for r in cells} == {parents[0].info.run_id}
    status = {r.data.tags[tracking.RUN_KEY_TAG]: (r.info.status, r.data.tags.get("windtunnel.superseded_by", ""))
              for r in cells}
    assert {k: v for k, v in status.items() if k in new_keys} == {k: ("FINISHED", "") for k in new_keys}
    old_runs = {k: v for k, v in status.items() if k not in new_keys}
    assert all(st in ("FINISHED", "KILLED") and sup in new_keys for st, sup in old_runs.values()), old_runs
    assert len(cells) == len(status)  # one MLflow run per cell, never two
    # superseded runs never look current in MLflow; names lead with policy and seed
    state = {r.data.tags[tracking.RUN_KEY_TAG]: r.data.tags.get("windtunnel.state") for r in cells}
    assert all(state[k] == "superseded" for k in old_runs) and all(state[k] == "recorded" for k in new_keys)
    assert {r.info.run_name for r in cells if r.data.tags[tracking.RUN_KEY_TAG] in new_keys} == {
        f"{p} s1 · gen/{runs2[0].model}" for p in ("baseline", "gfpo", "static")}
    sess.close()


def test_same_campaign_from_two_workdirs_on_one_head_never_reattaches(
        tree: Path, tmp_path: Path, on_head: str, small_campaign) -> None:
    from orchestrator.session import plan

    camp = small_campaign("twin", policies=["baseline"], seeds=[1],
                     retries={"max_attempts": 1, "backoff_s": 0.1, "backoff_max_s": 0.2})
    sids = []
    for wd in (tmp_path / "wd1", tmp_path / "wd2"):
        sess = _session(wd, on_head)
        spec, runs = plan(camp)
        sess.submit(spec, runs)
        assert _drive(sess, "twin") == {"recorded": 1}, [(r.run_id, r.reason) for r in sess.ledger.runs("twin")]
        att = sess.ledger.attempts("twin")
        assert [(a.stage, a.status) for a in att] == [("train", "succeeded"), ("evaluate", "succeeded")]
        assert all(a.status == "succeeded" for a in att)
        sids.append({a.submission_id for a in att})
        for r in sess.ledger.runs("twin"):  # each work dir ran its own jobs, once each
            assert sorted(_executions(wd, "twin", r.run_key)) == ["evaluate", "train"]
        sess.close()
    assert not sids[0] & sids[1]


def test_recorded_run_without_records_is_an_error_and_resume_rerecords_it(tree: Path, tmp_path: Path,
                                                                          on_head: str, small_campaign) -> None:
    from orchestrator.session import RecordsMissing, plan

    camp = small_campaign("lost", policies=["baseline"], seeds=[1], baselines={"mix": "baseline"})
    wd = tmp_path / "wd"
    sess = _session(wd, on_head)
    spec, runs = plan(camp)
    sess.submit(spec, runs)
    assert _drive(sess, "lost") == {"recorded": 1}
    assert len(pd.read_parquet(sess.collect_records("lost"))) == 12
    # the campaign's own `baselines:` travel with its records: compare/verdicts/report on the file pair by them
    assert records_baselines(wd / "results" / "lost" / "records.parquet")["mix"] == "baseline"
    gone = sess.ledger.runs("lost")[0]
    Path(gone.outputs["records"]).unlink()
    with pytest.raises(RecordsMissing, match=gone.run_id.replace("/", ".")):
        sess.collect_records("lost")
    assert len(pd.read_parquet(wd / "results" / "lost" / "records.parquet")) == 12  # nothing half-written

    assert _drive(sess, "lost") == {"recorded": 1}  # what `campaign resume` runs: reopen, re-record
    assert len(pd.read_parquet(sess.collect_records("lost"))) == 12
    assert sorted(_executions(wd, "lost", gone.run_key)) == ["evaluate", "evaluate", "train"]  # not retrained
    assert any(e.kind == "reopened" for e in sess.ledger.events("lost", gone.run_key))
    sess.close()


def test_changed_evaluation_settings_reevaluate_without_retraining(
        tree: Path, tmp_path: Path, on_head: str, small_campaign) -> None:
    """Issue 24: a gate or generation limit is not part of a run's identity (no retraining), but a changed one
    re-evaluates the runs already scored — `submit` says how many — and every record names its settings."""
    from evaluation.settings import evaluation_hash
    from orchestrator.campaign import submit_preview
    from orchestrator.session import plan

    camp = small_campaign("evalgen", policies=["baseline"], seeds=[1, 2])
    wd = tmp_path / "wd"
    sess = _session(wd, on_head)
    spec, runs = plan(camp)
    sess.submit(spec, runs)
    assert _drive(sess, "evalgen") == {"recorded": 2}
    first = pd.read_parquet(sess.collect_records("evalgen"))
    assert first["eval_hash"].nunique() == 1 and first["eval_hash"].iloc[0] != ""
    ckpts = {r.run_key: json.loads((wd / "runs" / "evalgen" / r.run_key / "train_done.json").read_text())
             ["checkpoints"][0]["path"] for r in runs}
    mtimes = {k: (Path(p) / "model.safetensors").stat().st_mtime_ns for k, p in ckpts.items()}

    # only the evaluation block changes: same run_keys, and both runs are to be re-evaluated
    camp.write_text(yaml.safe_dump({**yaml.safe_load(camp.read_text()),
                                    "evaluation": {"gates": {"min_parse_rate": 0.3}, "max_gen_toks": 64}}))
    spec2, runs2 = plan(camp)
    assert [r.run_key for r in runs2] == [r.run_key for r in runs]
    preview = submit_preview(spec2, runs2, wd, None)
    assert preview.counts() == {"new": 0, "changed": 0, "unchanged": 2, "reevaluate": 2, "removed": 0}
    assert ("evaluation.gates.min_parse_rate", None, 0.3) in preview.changes[runs[0].run_id]  # said plainly
    assert any(line.startswith("  re-evaluate ") and "max_gen_toks" in line for line in preview.lines(dry_run=True))
    diff = sess.submit(spec2, runs2)
    assert len(diff.unchanged) == 2 and sorted(diff.reevaluate) == sorted(r.run_id for r in runs)
    assert _drive(sess, "evalgen") == {"recorded": 2}
    second = pd.read_parquet(sess.collect_records("evalgen"))
    want = evaluation_hash(runs2[0].eval_key, wd / "data" / "eval")
    assert set(second["eval_hash"]) == {want} and want != first["eval_hash"].iloc[0]
    for r in runs:  # trained once, evaluated twice; the checkpoints untouched
        assert sorted(_executions(wd, "evalgen", r.run_key)) == ["evaluate", "evaluate", "train"]
        assert (Path(ckpts[r.run_key]) / "model.safetensors").stat().st_mtime_ns == mtimes[r.run_key]
    assert any("evaluation settings changed" in e.detail or e.kind == "reopened"
               for e in sess.ledger.events("evalgen", runs[0].run_key))
    # submitting the same spec again re-evaluates nothing
    assert submit_preview(spec2, runs2, wd, None).counts()["reevaluate"] == 0
    sess.close()


def test_two_executions_of_a_stage_in_one_run_dir_cannot_overlap(tree: Path, tmp_path: Path, small_campaign) -> None:
    """An orphaned stage process (its node lost to the orchestrator) and a retry in the same run dir."""
    from orchestrator.engine.stages import write_run_spec
    from orchestrator.session import plan

    (tree / "recipe" / "noop_slow.yaml").write_text(yaml.safe_dump({"name": "noop_slow", "sleep_s": 4}))
    _, runs = plan(small_campaign("lock", policies=["baseline"], seeds=[1], recipe="noop_slow"))
    wd = tmp_path / "wd"
    path = write_run_spec(runs[0], wd)
    argv = [sys.executable, "-m", "orchestrator.engine.stages", "train", "--run-spec", str(path), "--workdir", str(wd)]
    log = wd / "runs" / "lock" / runs[0].run_key / "executions.log"
    first = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_until(log.exists, 60)
    second = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err[-2000:]
    assert second.returncode == 1
    assert "windtunnel-stage-error: busy" in second.stderr and "Traceback" not in second.stderr
    assert _executions(wd, "lock", runs[0].run_key) == ["train"]
    # once the first is done, a rerun finds its verified outputs and skips (no second execution)
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1])["ok"]
    assert _executions(wd, "lock", runs[0].run_key) == ["train"]


def test_a_newer_attempt_fences_an_orphan_of_an_older_one(tree: Path, tmp_path: Path, small_campaign) -> None:
    """A stage process whose node was lost runs on (re-parented to init) holding the run dir's lock: the retry
    (a newer attempt) does not fail `busy` against it, and the orphan's late finish writes no manifest."""
    from orchestrator.engine.stages import write_run_spec
    from orchestrator.session import plan

    (tree / "recipe" / "noop_slow.yaml").write_text(yaml.safe_dump({"name": "noop_slow", "sleep_s": 4}))
    _, runs = plan(small_campaign("fence", policies=["baseline"], seeds=[1], recipe="noop_slow"))
    wd = tmp_path / "wd"
    path = write_run_spec(runs[0], wd)
    rd = wd / "runs" / "fence" / runs[0].run_key
    argv = [sys.executable, "-m", "orchestrator.engine.stages", "train", "--run-spec", str(path), "--workdir", str(wd),
            "--attempt"]
    orphan = subprocess.Popen([*argv, "wt-x-train-a1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    assert wait_until((rd / "executions.log").exists, 60)
    retry = subprocess.run([*argv, "wt-x-train-a2"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert retry.returncode == 0, retry.stderr[-2000:]
    assert "fenced wt-x-train-a1" in retry.stderr
    _, err = orphan.communicate(timeout=120)
    assert orphan.returncode == 1 and "windtunnel-stage-error: fenced" in err and "Traceback" not in err
    assert json.loads((rd / "train_done.json").read_text())["attempt"] == "wt-x-train-a2"
    # an older attempt never takes the run dir back, even once the lock is free
    late = subprocess.run([*argv, "wt-x-train-a1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert late.returncode == 1 and "windtunnel-stage-error: fenced" in late.stderr
    assert json.loads((rd / "train_done.json").read_text())["attempt"] == "wt-x-train-a2"


def test_an_attempt_cancelled_while_pending_does_nothing_when_ray_starts_it(
        tree: Path, tmp_path: Path, small_campaign) -> None:
    """Ray queues the stop of a PENDING job until its supervisor starts; the stage then exits before any work."""
    from orchestrator.engine.stages import cancel_attempt, write_run_spec
    from orchestrator.session import plan

    _, runs = plan(small_campaign("cx", policies=["baseline"], seeds=[1], recipe="noop"))
    wd = tmp_path / "wd"
    path = write_run_spec(runs[0], wd)
    rd = wd / "runs" / "cx" / runs[0].run_key
    cancel_attempt(rd, "wt-x-train-a1")
    argv = [sys.executable, "-m", "orchestrator.engine.stages", "train", "--run-spec", str(path), "--workdir", str(wd),
            "--attempt"]
    p = subprocess.run([*argv, "wt-x-train-a1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "windtunnel-stage-error: cancelled" in p.stderr
    assert not (rd / "executions.log").exists() and not (rd / "train_done.json").exists()
    p = subprocess.run([*argv, "wt-x-train-a2"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and (rd / "train_done.json").exists()  # a later attempt (a retry) runs


def test_a_run_failed_at_evaluation_is_queued_again_when_its_evaluation_settings_change(
        tree: Path, small_campaign) -> None:
    """The gate that failed it was the old one: with the new settings it is re-evaluated (to_reevaluate is pure:
    ledger rows and planned runs in, the runs to re-evaluate out)."""
    from orchestrator.engine.ledger.base import RunRow
    from orchestrator.session import plan, to_reevaluate

    camp = small_campaign("gate", policies=["baseline"], seeds=[1])
    _, old = plan(camp)
    camp.write_text(yaml.safe_dump({**yaml.safe_load(camp.read_text()),
                                    "evaluation": {"gates": {"min_parse_rate": 0.2}}}))
    _, new = plan(camp)
    row = RunRow(campaign="gate", run_key=old[0].run_key, run_id=old[0].run_id, state="failed", order=0, gpus=0,
                 spec_json=old[0].to_json(), stage="evaluate")
    assert to_reevaluate([row], new, tree) == ([], new)
    assert to_reevaluate([row], old, tree) == ([], [])  # same settings: the failure stands
    trained_fail = RunRow(**{**row.__dict__, "stage": "train"})
    assert to_reevaluate([trained_fail], new, tree) == ([], [])  # a training failure is not an evaluation's
