"""MLflow tracking on a real SQLite store: idempotent runs by run_key, JSONL ingestion, NaN left missing;
a campaign's cells tracked live from the ledger (created at start, streamed, final status, aggregates)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from orchestrator import tracking
from tests.components import started as component_started

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    """One SQLite store for the module: creating one runs MLflow's migrations (tens of seconds)."""
    return tracking.default_uri(tmp_path_factory.mktemp("mlflow"))


@pytest.mark.component("mlflow")
def test_ensure_run_is_idempotent_by_run_key(uri):
    a = tracking.ensure_run(uri, "camp", "key1", "camp/m/topk/s1", params={"recipe": {"lr": 1e-3}, "seed": 1})
    b = tracking.ensure_run(uri, "camp", "key1", "camp/m/topk/s1")
    c = tracking.ensure_run(uri, "camp", "key2", "camp/m/topk/s2")
    assert a == b != c
    run = tracking.client(uri).get_run(a)
    assert run.data.params["recipe.lr"] == "0.001" and run.data.tags[tracking.RUN_KEY_TAG] == "key1"
    component_started("mlflow", f"run {a} read back from {uri}")


def test_metrics_jsonl_ingested_per_step_and_nan_stays_missing(uri, tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "reward/mean": 0.25, "val/x": float("nan"), "name": "ignored"},
            {"step": 2, "reward/mean": 0.5, "acc@1": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{\"step\": 3, \"torn")  # torn last line skipped
    rid = tracking.ensure_run(uri, "camp2", "k", "r")
    assert tracking.log_metrics_file(uri, rid, path) == 3
    hist = tracking.client(uri).get_metric_history(rid, "reward/mean")
    assert sorted((m.step, m.value) for m in hist) == [(1, 0.25), (2, 0.5)]
    assert tracking.client(uri).get_metric_history(rid, "val/x") == []
    assert tracking.client(uri).get_metric_history(rid, "acc_at_1")[0].value == 1.0
    tracking.finish(uri, rid)
    assert tracking.client(uri).get_run(rid).info.status == "FINISHED"
    assert not math.isnan(hist[0].value)


# -- campaigns: one MLflow run per cell, kept in step with the ledger (issue 16.8) --------------------------


def _tree(root: Path, name: str = "trk") -> Path:
    """A campaigns tree: the repo's policies, a stub model, a noop recipe with simulated scores."""
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir()
    (root / "model" / "m0.yaml").write_text(yaml.safe_dump({"name": "m0", "path": "hf/m0"}))
    (root / "recipe").mkdir()
    (root / "recipe" / "noop_sim.yaml").write_text(yaml.safe_dump(
        {"name": "noop_sim", "sleep_s": 1.2, "simulate": {"base": 50.0, "effects": {"gfpo": 5.0}}}))
    (root / f"{name}.yaml").write_text(yaml.safe_dump({
        "name": name, "backend": "noop", "models": ["m0"], "recipe": "noop_sim", "steps": 2,
        "policies": ["baseline", "gfpo", "topk"], "seeds": [1],
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01}}))
    return root / f"{name}.yaml"


def _cell_runs(uri: str, campaign: str) -> list:
    """The grid cells' runs (the campaign's parent run aside)."""
    c = tracking.client(uri)
    exp = c.get_experiment_by_name(campaign)
    runs = [] if exp is None else c.search_runs([exp.experiment_id])
    return [r for r in runs if r.data.tags.get(tracking.CAMPAIGN_RUN_TAG) != "true"]


def test_campaign_cells_are_tracked_live_once_each_with_final_status(uri, tmp_path: Path) -> None:
    from orchestrator.engine.grid import RunSpec
    from orchestrator.session import Session, plan
    from orchestrator.engine.stages import run_dir, stage_evaluate, stage_train

    spec, runs = plan(_tree(tmp_path / "campaigns"))
    wd = tmp_path / "wd"
    sess = Session(wd, mlflow_uri=uri)
    sess.submit(spec, runs)
    led = sess.ledger
    a, b, c = led.runs("trk")
    sa_, sb = (RunSpec.from_dict(json.loads(r.spec_json)) for r in (a, b))
    tracker = sess.tracker("trk")
    assert tracker.sync() == 0 and _cell_runs(uri, "trk") == []  # nothing started, nothing in MLflow

    for r in (a, b, c):  # the scheduler's first poll: every cell's first attempt starts
        led.transition("trk", r.run_key, "queued")
        led.start_attempt("trk", r.run_key, "queued", "training", "train", f"sid-{r.run_key}")
    assert tracker.sync() == 3
    started = {r.run_key: led.attempts("trk", r.run_key)[0].started_at for r in (a, b, c)}
    mr = {r.data.tags[tracking.RUN_KEY_TAG]: r for r in _cell_runs(uri, "trk")}
    assert {k: m.info.status for k, m in mr.items()} == {a.run_key: "RUNNING", b.run_key: "RUNNING",
                                                         c.run_key: "RUNNING"}
    assert all(abs(mr[k].info.start_time - started[k] * 1000) < 2 for k in mr)
    assert mr[a.run_key].data.params["recipe.sleep_s"] == "1.2" and led.get("trk", a.run_key).mlflow_run_id

    # metrics stream while b trains: complete lines only, each once
    mpath = run_dir(wd, sb) / "train" / "metrics.jsonl"
    mpath.parent.mkdir(parents=True)
    mpath.write_text('{"step": 1, "reward/mean": 0.1}\n{"step": 2, "reward/mean": 0.2}\n{"step": 3, "rew')
    tracker.sync()
    bid = mr[b.run_key].info.run_id
    hist = lambda rid, k: [(m.step, m.value) for m in tracking.client(uri).get_metric_history(rid, k)]  # noqa: E731
    assert hist(bid, "train/reward/mean") == [(1, 0.1), (2, 0.2)]
    with open(mpath, "a") as f:
        f.write('ard/mean": 0.3}\n')
    tracker.sync()
    tracker.sync()
    assert hist(bid, "train/reward/mean") == [(1, 0.1), (2, 0.2), (3, 0.3)]

    # a crash between create_run and the ledger update: a fresh orchestrator finds the run by its tag
    led.update("trk", b.run_key, mlflow_run_id="")
    sess.tracker("trk").sync()
    assert led.get("trk", b.run_key).mlflow_run_id == bid and len(_cell_runs(uri, "trk")) == 3

    # a runs its real noop stages (simulated scores) and is recorded
    stage_train(sa_, wd)
    led.transition("trk", a.run_key, "trained")
    led.start_attempt("trk", a.run_key, "trained", "evaluating", "evaluate", f"sid-{a.run_key}-e")
    ev = stage_evaluate(sa_, wd)
    led.transition("trk", a.run_key, "recorded", compute={"wall_s": 1.2}, outputs={"records": ev["records"]})
    led.transition("trk", b.run_key, "failed", stage="train", reason="retry cap 2 reached: boom")
    led.transition("trk", c.run_key, "cancelled", reason="cancelled by user")
    assert tracker.sync() == 3
    mr = {r.data.tags[tracking.RUN_KEY_TAG]: r for r in _cell_runs(uri, "trk")}
    assert {k: m.info.status for k, m in mr.items()} == {a.run_key: "FINISHED", b.run_key: "FAILED",
                                                         c.run_key: "KILLED"}
    assert mr[b.run_key].data.tags["windtunnel.reason"] == "retry cap 2 reached: boom"
    ra = mr[a.run_key]
    assert ra.info.end_time - ra.info.start_time >= 1200  # real duration: the 1.2 s noop training and more
    assert hist(ra.info.run_id, "train/noop") == [(1, 1.0), (2, 1.0)]
    recs = pd.read_parquet(ev["records"])
    by_domain = recs.groupby("domain")["accuracy"].mean()
    db12 = hist(ra.info.run_id, "agg/DB-12")
    assert len(db12) == 1 and db12[0][0] == 2 and db12[0][1] == pytest.approx(by_domain.mean())
    assert hist(ra.info.run_id, "eval/" + recs["benchmark"][0]) == [(2, pytest.approx(recs["accuracy"][0]))]
    assert "records.parquet" in {f.path for f in tracking.client(uri).list_artifacts(ra.info.run_id)}

    # idempotent: a resumed orchestrator changes nothing and creates nothing
    assert Session(wd, mlflow_uri=uri).ingest("trk") == 0 and len(_cell_runs(uri, "trk")) == 3
    sess.close()


def test_verl_launch_files_stream_and_the_merged_file_is_not_logged_twice(uri, tmp_path: Path) -> None:
    """verl writes one metrics file per launch (a resume is a new launch), merged into metrics.jsonl at the end."""
    from orchestrator.engine.grid import RunSpec
    from orchestrator.session import Session, plan
    from orchestrator.engine.stages import run_dir

    spec, runs = plan(_tree(tmp_path / "campaigns", "trkv"))
    sess = Session(tmp_path / "wd", mlflow_uri=uri)
    sess.submit(spec, runs[:1])
    (row,) = sess.ledger.runs("trkv")
    sess.ledger.transition("trkv", row.run_key, "queued")
    sess.ledger.start_attempt("trkv", row.run_key, "queued", "training", "train", "sid-1")
    train = run_dir(tmp_path / "wd", RunSpec.from_dict(json.loads(row.spec_json))) / "train"
    (train / "verl_metrics").mkdir(parents=True)
    (train / "verl_metrics" / "launch_000.jsonl").write_text('{"step": 1, "x": 1.0}\n{"step": 2, "x": 2.0}\n')
    tracker = sess.tracker("trkv")
    tracker.sync()
    rid = sess.ledger.get("trkv", row.run_key).mlflow_run_id
    steps = lambda: [m.step for m in tracking.client(uri).get_metric_history(rid, "train/x")]  # noqa: E731
    assert steps() == [1, 2]
    (train / "verl_metrics" / "launch_001.jsonl").write_text('{"step": 3, "x": 3.0}\n')  # resumed after a kill
    sess.tracker("trkv").sync()  # a restarted orchestrator: offsets come from the run's tag
    assert steps() == [1, 2, 3]
    (train / "metrics.jsonl").write_text("".join(f'{{"step": {i}, "x": {i}.0}}\n' for i in (1, 2, 3)))  # merged
    sess.ledger.transition("trkv", row.run_key, "failed", stage="evaluate", reason="boom")
    assert sess.tracker("trkv").sync() == 1
    assert steps() == [1, 2, 3] and tracking.client(uri).get_run(rid).info.status == "FAILED"
    sess.close()


def test_store_killed_while_being_created_leaves_nothing_half_built(tmp_path: Path, monkeypatch) -> None:
    """An orchestrator SIGKILLed during MLflow's migrations must not leave a mid-migration mlflow.db
    (every later open would fail "out-of-date database schema" and the campaign would go untracked)."""
    import mlflow.store.db.utils as db_utils

    uri = tracking.default_uri(tmp_path)
    store = tmp_path / "mlflow.db"

    def killed(engine):
        raise KeyboardInterrupt("killed mid-migration")

    monkeypatch.setattr(db_utils, "_upgrade_db", killed)
    with pytest.raises(KeyboardInterrupt):
        tracking.experiment_id(uri, "camp")
    assert not store.exists(), "a half-built store was left at the store's path"
    assert list(tmp_path.iterdir()) == [], "the temporary store was not removed"
    monkeypatch.undo()
    rid = tracking.ensure_run(uri, "camp", "k", "camp/m/p/s1")  # the next orchestrator builds it whole
    assert tracking.client(uri).get_run(rid).info.status == "RUNNING"
    assert store.stat().st_mode & 0o777 == 0o600


def test_recipe_keys_mlflow_rejects_are_logged_under_a_legal_name(uri) -> None:
    """verl recipes carry Hydra overrides such as `+actor_rollout_ref.model.override_config.x`; MLflow rejects
    `+` in a param name, which left every verl run's MLflow run without params (a tracking_error per run)."""
    params = {"recipe": {"overrides": {"+actor_rollout_ref.model.override_config.attn_implementation": "eager",
                                       "data.train_batch_size": 4}}, "eval@k": 1}
    rid = tracking.ensure_run(uri, "camp_keys", "k", "r", params=params)
    got = tracking.client(uri).get_run(rid).data.params
    assert got["recipe.overrides._plus_actor_rollout_ref.model.override_config.attn_implementation"] == "eager"
    assert got["recipe.overrides.data.train_batch_size"] == "4" and got["eval_at_k"] == "1"
    assert tracking.mlflow_key("a+b c/d:e-f.g@h!") == "a_plus_b c/d:e-f.g_at_h_"


# -- verl's own metrics file (issue 24, Build 3) ---------------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"  # real verl metrics files; provenance in fixtures/README.md


def _verl_rows(name: str) -> list[dict]:
    """The fixture's lines as verl wrote them (`{"step": N, "data": {...}}`), parsed here without the reader."""
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def test_a_real_verl_runs_metrics_reach_mlflow_per_step(uri, tmp_path: Path) -> None:
    """verl's file logger nests every metric under `data`; MLflow must get them per step under verl's own names
    (kept_frac and grad_norm of a gfpo run, the domain proportions of a reward_gap mixer)."""
    from orchestrator.engine.grid import RunSpec
    from orchestrator.session import Session, plan
    from orchestrator.engine.stages import run_dir

    spec, runs = plan(_tree(tmp_path / "campaigns", "trkr"))
    sess = Session(tmp_path / "wd", mlflow_uri=uri)
    sess.submit(spec, runs[:2])
    cells = sess.ledger.runs("trkr")
    for row, fixture in zip(cells, ("verl_gfpo_s1.jsonl", "verl_reward_gap_s3.jsonl"), strict=True):
        sess.ledger.transition("trkr", row.run_key, "queued")
        sess.ledger.start_attempt("trkr", row.run_key, "queued", "training", "train", f"sid-{row.run_key}")
        folder = run_dir(tmp_path / "wd", RunSpec.from_dict(json.loads(row.spec_json))) / "train" / "verl_metrics"
        folder.mkdir(parents=True)
        shutil.copy(FIXTURES / fixture, folder / "launch_000.jsonl")
    sess.tracker("trkr").sync()
    c = tracking.client(uri)
    hist = lambda row, k: [(m.step, m.value) for m in  # noqa: E731
                           c.get_metric_history(sess.ledger.get("trkr", row.run_key).mlflow_run_id, k)]

    gfpo, mixer = cells
    lines = _verl_rows("verl_gfpo_s1.jsonl")
    for key in ("windtunnel/kept_frac", "actor/grad_norm", "critic/score/mean"):
        assert sorted(hist(gfpo, f"train/{key}")) == [(r["step"], r["data"][key]) for r in lines], key
    assert all(v < 1 for _, v in hist(gfpo, "train/windtunnel/kept_frac"))  # gfpo kept 3 of 4 rollouts
    mix_lines = _verl_rows("verl_reward_gap_s3.jsonl")
    props = sorted(k for k in mix_lines[0]["data"] if k.startswith(("windtunnel/realised_prop_",
                                                                     "windtunnel/target_prop_")))
    assert len(props) == 6  # realised and target proportion of each of the three domains
    for key in props:
        assert sorted(hist(mixer, f"train/{key}")) == [(r["step"], r["data"][key]) for r in mix_lines], key
    sess.close()


def test_a_real_verl_runs_metrics_reach_the_intervention_check_and_the_training_curves(tmp_path: Path) -> None:
    """The report's intervention check reads verl's file: gfpo's kept_frac < 1 is the selector acting (no
    "no kept_frac logged" flag), the mixer's realised proportions are there, and the training curves have both."""
    from analysis.figure_data import training_frame
    from analysis.intervention import flag_policies, flags_banner_html, run_summary

    ident = {"campaign": "c", "model": "tiny_qwen2", "regime": ""}
    runs = [{**ident, "run_key": "k1", "run_id": "c/gfpo/s1", "policy": "gfpo", "mechanism": "select", "seed": 1,
             "metrics_path": FIXTURES / "verl_gfpo_s1.jsonl"},
            {**ident, "run_key": "k3", "run_id": "c/reward_gap/s3", "policy": "reward_gap", "mechanism": "mix",
             "seed": 3, "metrics_path": FIXTURES / "verl_reward_gap_s3.jsonl"}]
    summary = run_summary(runs)
    assert summary["has_diagnostics"].all()
    kept = [r["data"]["windtunnel/kept_frac"] for r in _verl_rows("verl_gfpo_s1.jsonl")]
    flags = flag_policies(summary).set_index("policy")
    assert flags.loc["gfpo", "kept_frac"] == pytest.approx(sum(kept) / len(kept)) and flags.loc["gfpo", "kept_frac"] < 1
    assert flags.loc["gfpo", "flag"] == ""
    assert not math.isnan(flags.loc["reward_gap", "realised_prop_move"])  # the mixer is judged on what it logged
    assert "no kept_frac logged" not in flags_banner_html(summary)
    tf = training_frame(runs).set_index("policy")
    assert list(tf.loc["gfpo", "kept_frac"]) == kept
    assert tf.loc["reward_gap"].filter(like="realised_prop_").notna().all().all()


def test_experiments_open_on_the_training_runs_view(uri) -> None:
    """MLflow 3 opens an experiment of unknown kind on its empty GenAI Traces page (issue 27)."""
    eid = tracking.experiment_id(uri, "kind")
    assert tracking.client(uri).get_experiment(eid).tags[tracking.EXPERIMENT_KIND_TAG] == "custom_model_development"


def test_a_campaign_has_a_parent_run_with_its_verdicts_and_report_and_its_cells_nest_under_it(
        uri, tmp_path: Path) -> None:
    """Issue 27 item 8: MLflow opens a campaign as one parent run (its verdicts, records and report) with the grid
    cells nested under it (`mlflow.parentRunId`); a campaign that grows again reopens it."""
    from analysis.comparisons import paired_comparisons
    from analysis.records import read_records
    from analysis.verdicts import verdict_counts, verdict_table
    from evaluation.suite import load_suite
    from orchestrator.engine.grid import RunSpec
    from orchestrator.session import Session, plan
    from orchestrator.engine.stages import stage_evaluate, stage_train

    root = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir()
    (root / "model" / "m0.yaml").write_text(yaml.safe_dump({"name": "m0", "path": "hf/m0"}))
    (root / "recipe").mkdir()
    (root / "recipe" / "sim.yaml").write_text(yaml.safe_dump(
        {"name": "sim", "simulate": {"base": 50.0, "effects": {"gfpo": 5.0, "topk": 0.0}}}))
    camp = root / "par.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "par", "backend": "noop", "models": ["m0"], "recipe": "sim", "steps": 2,
        "policies": ["baseline", "gfpo", "topk"], "seeds": [1, 2, 3],
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01}}))
    spec, runs = plan(camp)
    wd = tmp_path / "wd"
    sess = Session(wd, mlflow_uri=uri)
    sess.submit(spec, runs)
    led, tracker = sess.ledger, sess.tracker("par")
    rows = led.runs("par")
    for r in rows:
        led.transition("par", r.run_key, "queued")
        led.start_attempt("par", r.run_key, "queued", "training", "train", f"sid-{r.run_key}")
    tracker.sync()
    assert sess.conclude("par", None) is None  # runs pending: the parent stays open
    parent = tracker.parent()["id"]
    assert tracking.client(uri).get_run(parent).info.status == "RUNNING"
    for r in rows:
        rs = RunSpec.from_dict(json.loads(r.spec_json))
        stage_train(rs, wd)
        led.transition("par", r.run_key, "trained")
        led.start_attempt("par", r.run_key, "trained", "evaluating", "evaluate", f"sid-{r.run_key}-e")
        ev = stage_evaluate(rs, wd)
        led.transition("par", r.run_key, "recorded", outputs={"records": ev["records"]})
    tracker.sync()
    records = sess.collect_records("par")
    report = wd / "report.html"
    report.write_text("<html><body><h1>par</h1></body></html>")
    assert sess.conclude("par", records, report) == parent

    c = tracking.client(uri)
    pr = c.get_run(parent)
    assert pr.info.status == "FINISHED" and pr.data.tags[tracking.CAMPAIGN_RUN_TAG] == "true"
    cells = _cell_runs(uri, "par")
    assert len(cells) == 9 and {r.data.tags[tracking.PARENT_TAG] for r in cells} == {parent}
    # the verdicts, as `campaign verdicts` computes them from the same records
    s = load_suite("db12")
    expect = verdict_table(paired_comparisons(read_records(records, suite=s), s, n_resamples=200).table,
                           s.aggregate_names[0], 1.0)
    counts = verdict_counts(expect)
    assert counts.get("better", 0) >= 1  # gfpo's simulated +5 points over three seeds
    assert {k: pr.data.metrics[f"verdicts/{k}"] for k in counts} == {k: float(v) for k, v in counts.items()}
    assert pr.data.metrics["runs/recorded"] == 9 and pr.data.metrics["runs/failed"] == 0
    assert any(k.startswith("verdict/gfpo vs baseline") and v.startswith("better") for k, v in pr.data.tags.items())
    arts = {f.path for f in c.list_artifacts(parent)}
    assert {"verdicts.csv", "records.parquet", "report.html"} <= arts
    got = pd.read_csv(c.download_artifacts(parent, "verdicts.csv", str(tmp_path / "dl")))
    pairs = lambda d: sorted(zip(d["policy"], d["verdict"], strict=True))  # noqa: E731
    assert pairs(got) == pairs(expect)

    # the campaign grows (a new seed): its parent runs again while a cell does, the same run, never a second
    spec2, runs2 = plan(camp, ["seeds=[1,2,3,4]"])
    sess.submit(spec2, runs2)
    new = [r for r in led.runs("par") if r.state == "planned"]
    led.transition("par", new[0].run_key, "queued")
    led.start_attempt("par", new[0].run_key, "queued", "training", "train", f"sid-{new[0].run_key}")
    fresh = Session(wd, mlflow_uri=uri).tracker("par")
    fresh.sync()
    assert c.get_run(parent).info.status == "RUNNING" and fresh.parent()["id"] == parent
    assert c.get_run(led.get("par", new[0].run_key).mlflow_run_id).data.tags[tracking.PARENT_TAG] == parent
    sess.close()


def test_campaign_report_with_workdir_attaches_the_report_to_the_campaigns_parent_run(tmp_path: Path) -> None:
    """Issue 27 item 8: a campaign run by `submit` gets its report on its MLflow parent run through
    `campaign report RECORDS --out FILE --workdir W` (the CLI a researcher runs after the campaign); a work dir
    without a ledger is bad input (exit 2) and nothing is written. Cost: ~10 CPU-s (9 noop runs, one report)."""
    from typer.testing import CliRunner

    from cli import app
    from orchestrator.session import Session, plan
    from orchestrator.engine.stages import stage_evaluate, stage_train

    root = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns" / "policy", root / "policy")
    (root / "model").mkdir()
    (root / "model" / "m0.yaml").write_text(yaml.safe_dump({"name": "m0", "path": "hf/m0"}))
    (root / "recipe").mkdir()
    (root / "recipe" / "sim.yaml").write_text(yaml.safe_dump({"name": "sim", "simulate": {"base": 50.0}}))
    camp = root / "rep.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "rep", "backend": "noop", "models": ["m0"], "recipe": "sim", "steps": 2,
        "policies": ["baseline", "gfpo"], "seeds": [1, 2, 3],
        "compute": {"nodes": 1, "gpus_per_node": 0, "gpus_per_run": 0, "hours_per_run": 0.01}}))
    spec, runs = plan(camp)
    wd = tmp_path / "wd"
    sess = Session(wd)
    sess.submit(spec, runs)
    led = sess.ledger
    for r in led.runs("rep"):  # the states a driver walks a run through
        led.transition("rep", r.run_key, "queued")
        led.start_attempt("rep", r.run_key, "queued", "training", "train", f"sid-{r.run_key}")
        stage_train(r.spec, wd)
        led.transition("rep", r.run_key, "trained")
        led.start_attempt("rep", r.run_key, "trained", "evaluating", "evaluate", f"sid-{r.run_key}-e")
        led.transition("rep", r.run_key, "recorded", outputs={"records": stage_evaluate(r.spec, wd)["records"]})
    records = sess.collect_records("rep")

    bad = CliRunner().invoke(app, ["report", str(records), "--out", str(tmp_path / "x.html"),
                                   "--workdir", str(tmp_path / "nowhere"), "--resamples", "200"])
    assert bad.exit_code == 2 and "no ledger in this work directory" in bad.output
    assert not (tmp_path / "x.html").exists()

    out = tmp_path / "rep.html"
    res = CliRunner().invoke(app, ["report", str(records), "--out", str(out), "--workdir", str(wd),
                                   "--resamples", "200"])
    assert res.exit_code == 0, res.output
    parent = sess.tracker("rep").parent()["id"]
    assert f"attached rep.html to MLflow run {parent}" in res.output
    assert "rep.html" in {f.path for f in tracking.client(sess.tracker("rep").uri).list_artifacts(parent)}
