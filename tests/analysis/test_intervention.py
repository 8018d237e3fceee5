"""Intervention evidence (analysis/intervention.py): flags, compute normalisation, report section."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.intervention import (
    InterventionError,
    attach_to_records,
    compare_to_reference,
    flag_policies,
    intervention_section_html,
    read_metrics,
    run_summary,
)
from policies import DomainSampler

DOMS = ["math", "logic", "science"]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _mixer_metrics(tmp: Path, name: str, targets: np.ndarray, seed: int) -> Path:
    """Per-step diagnostics from a real DomainSampler fed the given target proportions (T, D)."""
    sampler = DomainSampler(np.repeat(np.arange(3), 200), batch_size=48, seed=seed, names=DOMS)
    rows = []
    for t, p in enumerate(targets, start=1):
        sampler.sample(p)
        rows.append({"step": t, "kept_frac": 1.0, "update_tokens": 1000.0, "valid_tokens": 1000.0,
                     "weight_mean": 1.0, "weight_std": 0.0, "weight_max": 1.0, **sampler.last_diagnostics})
    return _write(tmp / f"{name}_s{seed}.jsonl", rows)


def _run(policy: str, mechanism: str, seed: int, path: Path | None, gpu_s: float = 0.0, upd: float = 8000.0) -> dict:
    return {"run_key": f"k{policy}{seed}", "run_id": f"demo/tiny/{policy}/s{seed}", "campaign": "demo", "model": "tiny",
            "regime": "", "policy": policy, "mechanism": mechanism, "seed": seed, "metrics_path": path,
            "compute": {"wall_s": 10.0, "gpu_s": gpu_s, "rollout_tokens": 2 * upd, "update_tokens": upd}}


@pytest.fixture()
def demo_runs(tmp_path: Path) -> list[dict]:
    t = 8
    uniform = np.full((t, 3), 1 / 3)
    moving = np.stack([np.linspace(1 / 3, 0.6, t), np.linspace(1 / 3, 0.2, t), np.linspace(1 / 3, 0.2, t)], axis=1)
    runs = []
    for s in (1, 2):
        runs.append(_run("static", "mix", s, _mixer_metrics(tmp_path, "static", uniform, s)))
        runs.append(_run("reward_gap", "mix", s, _mixer_metrics(tmp_path, "reward_gap", moving, s)))
        # inert: the mixer's target moves, but (as in the published post-rollout buffer) the data does not
        inert_rows = []
        for step, p in enumerate(moving, start=1):
            inert_rows.append({"step": step, **{f"dataflex/prop_{d}": float(v) for d, v in zip(DOMS, p, strict=True)},
                               **{f"realised_prop_{d}": 1 / 3 for d in DOMS}})
        runs.append(_run("dump_ucb_paper", "mix", s, _write(tmp_path / f"inert{s}.jsonl", inert_rows)))
        sel = [{"step": i, "active": 1.0, "kept_frac": 0.4, "update_tokens": 400.0, "valid_tokens": 1000.0,
                "weight_std": 0.49} for i in range(1, 5)]
        runs.append(_run("maxvar", "select", s, _write(tmp_path / f"maxvar{s}.jsonl", sel), upd=1600.0))
        keep_all = [{**r, "kept_frac": 1.0, "update_tokens": 1000.0} for r in sel]
        runs.append(_run("gfpo_k8", "select", s, _write(tmp_path / f"gfpo{s}.jsonl", keep_all)))
        flat = [{"step": i, "active": 1.0, "kept_frac": 1.0, "weight_std": 0.0, "update_tokens": 1000.0}
                for i in range(1, 5)]
        runs.append(_run("flatw", "reweight", s, _write(tmp_path / f"flat{s}.jsonl", flat)))
        runs.append(_run("baseline", "none", s, None))
        runs.append(_run("nodiag", "reweight", s, None))
    return runs


def test_flags_inert_mixer_but_not_working_one(demo_runs):
    flags = flag_policies(run_summary(demo_runs)).set_index("policy")
    assert flags.loc["dump_ucb_paper", "flag"] == "inert_mixer"
    assert flags.loc["dump_ucb_paper", "target_prop_move"] == pytest.approx(0.6 - 1 / 3)
    assert flags.loc["reward_gap", "flag"] == ""
    assert flags.loc["reward_gap", "realised_prop_move"] > 0.2
    assert flags.loc["static", "flag"] == ""  # the reference is uniform by design, never flagged
    assert flags.loc["baseline", "flag"] == ""
    assert flags.loc["gfpo_k8", "flag"] == "keeps_everything"
    assert flags.loc["maxvar", "flag"] == "" and flags.loc["maxvar", "kept_frac"] == pytest.approx(0.4)
    assert flags.loc["flatw", "flag"] == "flat_weights"
    assert flags.loc["nodiag", "flag"] == "unverified"


def test_compute_normalised_comparison(demo_runs):
    for r in demo_runs:
        r["compute"]["gpu_s"] = 1800.0 if r["policy"] != "maxvar" else 3600.0
    summary = run_summary(demo_runs)
    scores = pd.DataFrame({"run_id": [r["run_id"] for r in demo_runs],
                           "DB-12": [40.0 if r["policy"] == "maxvar" else 30.0 for r in demo_runs]})
    comp = compare_to_reference(summary, scores).set_index("policy")
    mv = comp.loc["maxvar"]
    assert mv["reference"] == "baseline"
    assert mv["score_delta"] == pytest.approx(10.0)
    assert mv["score_per_gpu_hour"] == pytest.approx(40.0 / 1.0)
    assert mv["score_per_Mtoken"] == pytest.approx(40.0 / (1600.0 / 1e6))
    assert mv["update_tokens_ratio"] == pytest.approx(1600.0 / 8000.0)
    assert mv["score_per_gpu_hour_ratio"] == pytest.approx((40.0 / 1.0) / (30.0 / 0.5))
    assert comp.loc["reward_gap", "reference"] == "static"


def test_cpu_runs_have_nan_not_infinite_score_per_gpu_hour(demo_runs):
    summary = run_summary(demo_runs)
    scores = pd.DataFrame({"run_id": [r["run_id"] for r in demo_runs], "DB-12": 30.0})
    comp = compare_to_reference(summary, scores)
    assert comp["score_per_gpu_hour"].isna().all()
    assert np.isfinite(comp["score_per_Mtoken"]).all()


def test_section_html_names_flagged_policies_only(demo_runs):
    title, body = intervention_section_html(run_summary(demo_runs))
    assert "Intervention" in title
    assert "dump_ucb_paper</b>" in body and "inert_mixer" in body
    assert "reward_gap</b>" not in body  # listed in the table, not among the warnings
    assert body.count("<tr class=\"flagged\">") == 4  # inert mixer, keeps-everything, flat weights, unverified


def test_bad_metrics_file_is_named(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "kept_frac": 0.5}\nnot json\n')
    with pytest.raises(InterventionError, match=r"metrics.jsonl: line 2"):
        read_metrics(p)
    with pytest.raises(InterventionError, match="not found"):
        read_metrics(tmp_path / "missing.jsonl")


def test_attach_to_records_keeps_records_and_adds_diag_columns(demo_runs):
    summary = run_summary(demo_runs)
    recs = pd.DataFrame({"run_id": [demo_runs[3]["run_id"]] * 2, "benchmark": ["a", "b"], "accuracy": [1.0, 0.0]})
    out = attach_to_records(recs, summary)
    assert len(out) == 2 and out["diag_kept_frac_mean"].tolist() == [0.4, 0.4]
    assert math.isnan(attach_to_records(recs.assign(run_id="nope"), summary)["diag_kept_frac_mean"].iloc[0])


def test_report_carries_the_section_and_the_inert_flag(demo_runs, tmp_path):
    """The real report builder with the released mixer campaign and our section appended."""
    from analysis.records import read_records
    from analysis.report import build_report

    released = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "released_runs_171.csv"
    recs = read_records(released)
    recs = recs[recs["campaign"] == "mixer"]
    out = build_report(recs, tmp_path / "report.html", n_resamples=200,
                       extra_sections=[intervention_section_html(run_summary(demo_runs))])
    text = out.read_text()
    assert "Intervention evidence and compute" in text
    assert "dump_ucb_paper</b>" in text and "inert_mixer" in text


def test_reads_the_local_backend_key_layout(tmp_path):
    """Keys as training/local.py writes them (policy/, mix/, data/ prefixes)."""
    rows = [{"step": s, "policy/kept_frac": 0.6, "policy/weight_std": 0.49, "policy/update_tokens": 600.0,
             "policy/valid_tokens": 1000.0, "policy/active": 1.0, "mix/target_prop_math": 0.5 + 0.01 * s,
             "mix/realised_prop_math": 0.5, "data/realised_prop_math": 0.5, "actor/pg_loss": 0.1} for s in (1, 2, 3)]
    df = read_metrics(_write(tmp_path / "m.jsonl", rows))
    assert {"kept_frac", "weight_std", "update_tokens", "target_prop_math", "realised_prop_math"} <= set(df.columns)
    summ = run_summary([_run("gfpo", "select", 1, tmp_path / "m.jsonl")]).iloc[0]
    assert summ["kept_frac_mean"] == pytest.approx(0.6) and summ["update_token_frac"] == pytest.approx(0.6)
    assert summ["target_prop_move"] == pytest.approx(0.02) and summ["realised_prop_move"] == 0.0


def test_a_budgeted_campaign_is_normalised_by_rollout_tokens_and_dynamic_sampling_shows_what_it_dropped(tmp_path):
    """issue 58: the report normalised a campaign compared at equal rollout tokens by update tokens (dynamic
    sampling "3.119x") and showed dynamic sampling's zero-variance share as 0 (its kept batch has none by
    construction) while it generated 36 groups a step and kept 12."""
    def metrics(name: str, ds: bool) -> Path:
        rows = [{"step": t, "update_tokens": 400.0, "valid_tokens": 400.0, "zero_variance_frac": 0.0 if ds else 0.5,
                 **({"ds/generated_prompts": 36.0, "ds/informative_groups": 12.0, "ds/kept_groups": 12.0}
                    if ds else {})} for t in (1, 2)]
        return _write(tmp_path / f"{name}.jsonl", rows)

    runs = []
    for s in (1, 2):
        for pol, ds, roll in (("baseline", False, 6000.0), ("dynamic_sampling", True, 6100.0)):
            r = _run(pol, "none" if pol == "baseline" else "curriculum", s, metrics(f"{pol}{s}", ds), upd=800.0)
            r["compute"].update(rollout_tokens=roll, rollout_token_budget=6000.0,
                                update_tokens=800.0 if pol == "baseline" else 800.0 / 3)
            runs.append(r)
    summary = run_summary(runs)
    scores = pd.DataFrame({"run_id": [r["run_id"] for r in runs], "DB-12": 30.0})
    comp = compare_to_reference(summary, scores).set_index("policy")
    ds = comp.loc["dynamic_sampling"]
    assert ds["score_per_Mrollout_token_ratio"] == pytest.approx(6000.0 / 6100.0)  # not 3x: the compute compared
    assert ds["ds_generated_groups_mean"] == 36.0 and ds["ds_kept_groups_mean"] == 12.0
    assert ds["ds_generated_zero_variance_frac"] == pytest.approx(2 / 3)
    _, body = intervention_section_html(summary, scores)
    assert "equal rollout tokens" in body and "score_per_Mrollout_token" in body and "score_per_Mtoken" not in body
    assert "ds_generated_zero_variance_frac" in body
