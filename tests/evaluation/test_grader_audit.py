"""Issue 39: `campaign audit graders` — the generated suite at a small N, the CLI on a stored-generations fixture
written the way the evaluator writes it, and the bad-input refusals (exit 2, nothing written)."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from cli import app
from evaluation.item_log import write_item_log
from evaluation.grader_audit.strategies import CLASSES, FAMILIES
from evaluation.grader_audit.suite import family_rates, run_suite

runner = CliRunner()


def test_every_family_has_zero_exploit_false_positives_on_the_generated_suite():
    results = run_suite(n=4)
    assert {r.family for r in results} == set(FAMILIES)
    assert all(r.n > 0 for r in results)
    exploits = [(r.family, r.cls, r.example) for r in results if r.expect == "deny" and r.wrong]
    assert exploits == []
    assert all(row["false_positives"] == 0 for row in family_rates(results))


def test_the_suite_is_seeded_the_same_examples_every_run_and_the_cli_default_is_the_suites():
    import inspect

    from cli.audit_commands import graders_audit_cmd
    from evaluation.grader_audit.suite import DEFAULT_N, run_class

    a, b = run_class("knights_knaves", "reordered", "credit", 3), run_class("knights_knaves", "reordered", "credit", 3)
    assert (a.n, a.wrong, a.statuses, a.digest) == (b.n, b.wrong, b.statuses, b.digest) and a.n == 3
    assert inspect.signature(graders_audit_cmd).parameters["n"].default.default == DEFAULT_N


def test_every_issue_class_is_a_strategy_in_every_family():
    deny = {"several_finals", "candidate_list", "answer_then_contradiction", "format_only", "past_generation_limit",
            "lookalike_unicode"}
    for fam in FAMILIES:
        assert deny <= set(CLASSES[fam]["deny"]), fam
    assert {"supposition_only", "quoted_claim", "every_option"} <= set(CLASSES["multiple_choice"]["deny"])


def _fixture(wd):
    rows = [
        {"benchmark": "gsm8k", "item_id": "g1", "response": "so 5 + 7 = 12\n#### 12", "gold": "12", "score": 1.0,
         "status": "ok"},
        {"benchmark": "gsm8k", "item_id": "g2", "response": "The answer is \\boxed{12}.", "gold": "12", "score": 1.0,
         "status": "ok"},
        {"benchmark": "mmlu_pro_physics", "item_id": "p1", "response": "Answer: C", "gold": "C", "score": 1.0,
         "status": "ok"},
        {"benchmark": "kk_hard", "item_id": "k1", "response": "Zoey is a knave.", "gold": "Zoey is a knave.",
         "score": 1.0, "status": "ok"},
    ]
    log = wd / "runs" / "c1" / "rk1" / "eval" / "step_8.items.jsonl.gz"
    log.parent.mkdir(parents=True)
    write_item_log(log, rows, [])  # exactly how the evaluator writes its item log
    return log


def test_cli_regrades_stored_generations_and_writes_the_disagreements(tmp_path):
    _fixture(tmp_path)
    out = tmp_path / "d.jsonl"
    r = runner.invoke(app, ["audit", "graders", "--n", "2", "--campaign", "c1", "--workdir", str(tmp_path),
                            "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    agree = {(a["benchmark"], a["verifier"]): a for a in body["agreement"]}
    # verl's gsm8k check reads only "#### N": the boxed answer g2 is a disagreement; lm-eval's MMLU-Pro regex
    # wants "answer is (X)": "Answer: C" is one
    assert agree[("gsm8k", "verl.gsm8k")]["disagree"] == 1 and agree[("gsm8k", "verl.gsm8k")]["n"] == 2
    assert agree[("mmlu_pro_physics", "lm_eval.mmlu_pro")]["disagree"] == 1
    assert agree[("kk_hard", "none")]["n"] == 0
    g = agree[("gsm8k", "verl.gsm8k")]
    assert g["items"] == 2 and g["items_disagree"] == 1  # the interval is over items, the independent draws
    assert 0 < g["ci_low"] < 0.5 < g["ci_high"] < 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {(x["benchmark"], x["item_id"], x["our_grade"], x["their_grade"]) for x in lines} == {
        ("gsm8k", "g2", 1.0, 0.0), ("mmlu_pro_physics", "p1", 1.0, 0.0)}
    assert all(x["response"] and x["verifier"] and x["item_log"].endswith("step_8.items.jsonl.gz") for x in lines)
    r = runner.invoke(app, ["audit", "graders", "--n", "2", "--family", "math", "--campaign", "c1",
                            "--workdir", str(tmp_path)])
    assert r.exit_code == 0 and "Clopper-Pearson exact 95%" in " ".join(r.stdout.split()) and "math" in r.stdout
    assert (tmp_path / "results" / "c1" / "grader_disagreements.jsonl").is_file()


@pytest.mark.parametrize("args,needle", [
    (["--family", "poetry"], "unknown grader family"),
    (["--campaign", "c1", "--benchmark", "nosuch"], "unknown benchmark"),
    (["--campaign", "nocamp"], "no stored evaluation generations"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, needle):
    _fixture(tmp_path)
    r = runner.invoke(app, ["audit", "graders", "--n", "1", "--workdir", str(tmp_path), *args])
    assert r.exit_code == 2 and needle in r.stderr, r.output
    assert not (tmp_path / "results").exists()


def test_a_corrupt_generations_file_exits_2_naming_it(tmp_path):
    log = _fixture(tmp_path)
    with gzip.open(log, "wt") as fh:
        fh.write('{"benchmark": "gsm8k", "item_id": "x"}\nnot json\n')
    r = runner.invoke(app, ["audit", "graders", "--n", "1", "--campaign", "c1", "--workdir", str(tmp_path)])
    assert r.exit_code == 2 and str(log) in r.stderr.replace("\n", "")
    log.write_bytes(b"not gzip")
    r = runner.invoke(app, ["audit", "graders", "--n", "1", "--campaign", "c1", "--workdir", str(tmp_path)])
    assert r.exit_code == 2 and "gzip" in r.stderr
    assert not (tmp_path / "results").exists()


def test_the_suite_table_prints_the_reflection_refusal_rate_beside_the_exploit_rate():
    """Issue 49: per family, exploits, false negatives and refused reflections, each as count/n and rate."""
    r = runner.invoke(app, ["audit", "graders", "--n", "2", "--family", "math"])
    assert r.exit_code == 0, r.output
    assert "reflections refused" in r.output
    row = next(line for line in r.output.splitlines() if line.strip().startswith("math"))
    cells = row.split()
    assert cells[1].startswith("0/") and cells[5].startswith("0/") and cells[6] == "0.000", row
