"""The verl reward entry: routing, uniform result shape, loud unknown sources."""

from __future__ import annotations

import pytest

from evaluation.reward import ROUTES, compute_score, route

EXPECTED_KEYS = {"score": float, "acc": bool, "pred": str, "status": str}


@pytest.mark.parametrize(
    "source,solution,gt,extra,score",
    [
        ("HuggingFaceH4/MATH-500", "so \\boxed{12}", "12", None, 1.0),
        ("synthetic_math", "\\boxed{5}", "6", None, 0.0),
        ("kk_logic", "Alice is a knight and Bob is a knave.", "Alice is a knight, and Bob is a knave.", None, 1.0),
        ("synthetic_logic", "**Alice**: knave, **Bob**: knave", "Alice is a knight, and Bob is a knave.", None, 0.0),
        ("sciq", "The answer is: (C)", "C", None, 1.0),
        ("synthetic_science", "The answer is (F)", "F", {"n_options": 6}, 1.0),
        ("mmlu_pro_physics", "The answer is (J)", "J", None, 1.0),
        ("gpqa_diamond", "The answer is (E)", "A", None, 0.0),
    ],
)
def test_routes_and_uniform_shape(source, solution, gt, extra, score):
    out = compute_score(source, solution, gt, extra_info=extra)
    assert set(out) == set(EXPECTED_KEYS)
    for k, t in EXPECTED_KEYS.items():
        assert type(out[k]) is t, (k, out)
    assert out["score"] == score
    assert out["acc"] is (score == 1.0)


def test_synthetic_science_defaults_to_four_options():
    # "E" is outside A-D, so it must not score even when it equals the gold letter... the gold itself is invalid
    out = compute_score("synthetic_science", "The answer is (E)", "E")
    assert out["status"] == "error" and out["score"] == 0.0


def test_unknown_source_raises():
    with pytest.raises(ValueError, match="unknown data_source 'mystery'"):
        compute_score("mystery", "x", "y")


def test_every_route_uses_a_known_grader():
    for src in ROUTES:
        assert route(src)[0] in ("math", "multiple_choice", "knights_knaves")
    assert route("mmlu_pro_chemistry") == ("multiple_choice", 10)


def test_a_grader_over_its_budget_is_a_timeout_status_not_a_wrong_answer(monkeypatch):
    """verl and the local backend both call `compute_score`: the budget and the `timeout` status reach both."""
    from evaluation import graders

    monkeypatch.setitem(graders.BUDGET_S, "math", 1.0)
    tower = "\\boxed{" + "9^{" * 12 + "9" + "}" * 12 + "}"  # math-verify does not finish this within 20 s
    assert compute_score("math", tower, "3") == {"score": 0.0, "acc": False, "pred": "", "status": "timeout"}
    assert compute_score("math", "\\boxed{3}", "3")["status"] == "ok"  # the pool restarted
