"""Pure pieces of the verl checks (no Ray, no verl run): prompts per domain counted from a rolled-out batch,
and the reward audit that counts `evaluation.reward.compute_score` calls."""

from __future__ import annotations

import pytest

from policies.verl.bridge import rolled_out_prompts
from policies.verl.reward_audit import AUDIT_ENV, audited, install, read_calls


def test_rolled_out_prompts_counts_groups_not_rows_and_skips_padding():
    uids = ["a", "a", "b", "b", "c", "c", "a"]  # 3 prompt groups; the last row is `_balance_batch` padding
    doms = ["math", "math", "logic", "logic", "math", "math", "math"]
    pad = [False] * 6 + [True]
    out = rolled_out_prompts(uids, doms, pad, ["math", "logic", "science"], prefix="w/")
    assert out == {"w/rolled_out_prompts_math": 2.0, "w/rolled_out_prompts_logic": 1.0,
                   "w/rolled_out_prompts_science": 0.0}
    # a padding row of a group that has no real row adds nothing
    assert rolled_out_prompts(["x"], ["logic"], [True], ["logic"]) == {"rolled_out_prompts_logic": 0.0}


def test_audit_records_one_line_per_call_and_returns_the_graders_result(tmp_path):
    from evaluation.reward import compute_score

    fn = audited(compute_score, tmp_path / "calls")
    right = fn("synthetic_science", "The answer is B", "B", {"n_options": 4})
    wrong = fn(data_source="synthetic_science", solution_str="The answer is C", ground_truth="B", extra_info=None)
    assert right == compute_score("synthetic_science", "The answer is B", "B", {"n_options": 4})
    calls = read_calls(tmp_path / "calls")
    assert [c["score"] for c in calls] == [right["score"], wrong["score"]] and right["score"] != wrong["score"]
    assert {c["data_source"] for c in calls} == {"synthetic_science"}
    with pytest.raises(ValueError, match="unknown data_source"):  # errors pass through, nothing recorded
        fn("nope", "x", "y")
    assert len(read_calls(tmp_path / "calls")) == 2


def test_install_wraps_only_when_the_variable_is_set(tmp_path, monkeypatch):
    from evaluation import reward

    monkeypatch.setattr(reward, "compute_score", reward.compute_score)  # restored after the test
    assert install({}) is False and not hasattr(reward.compute_score, "__wrapped_for_audit__")
    assert install({AUDIT_ENV: str(tmp_path)}) is True
    wrapped = reward.compute_score
    assert install({AUDIT_ENV: str(tmp_path)}) is True and reward.compute_score is wrapped  # never twice
    reward.compute_score("synthetic_math", "#### 3", "3")
    assert len(read_calls(tmp_path)) == 1


def test_windtunnel_trainer_runs_in_verls_sync_mode():
    """verl picks the replay buffer, the dataloader fetch size and TransferQueue checkpointing by
    `trainer_mode == "sync"`; the config names our trainer `windtunnel_sync`, which must not make it async."""
    from policies.verl.trainer import WindtunnelTrainer

    t = object.__new__(WindtunnelTrainer)
    t.trainer_mode = "windtunnel_sync"  # what verl's __init__ assigns from trainer.v1.trainer_mode
    assert t.trainer_mode == "sync"
