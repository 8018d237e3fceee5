"""The `reward-suspect` verdict (analysis/reward_watch.py) from per-step metrics frames, and where it shows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.intervention import flag_policies, read_metrics, run_summary
from analysis.reward_watch import REWARD_SUSPECT, WatchThresholds, watch_column, watch_summary, watch_verdict


def _steps(reward: list[float], heldout: dict[int, float], multi: list[float] | None = None,
           bare: list[float] | None = None) -> pd.DataFrame:
    rows = [{"step": 0.0, **({"val/reward_mean": heldout[0]} if 0 in heldout else {})}]
    for i, r in enumerate(reward, 1):
        row = {"step": float(i), "reward/mean": r}
        if multi is not None:
            row["watch/multi_answer_frac"] = multi[i - 1]
        if bare is not None:
            row["watch/no_reasoning_frac"] = bare[i - 1]
        if i in heldout:
            row["val/reward_mean"] = heldout[i]
        rows.append(row)
    return pd.DataFrame(rows)


def _verdict(df: pd.DataFrame) -> tuple[str, str]:
    return watch_verdict(pd.DataFrame([{"run_id": "c/m/p/s1", **watch_summary(df)}]))


def test_reward_rising_without_the_heldout_reward_is_suspect() -> None:
    rising = [0.1, 0.1, 0.2, 0.3, 0.5, 0.6]
    flag, why = _verdict(_steps(rising, {0: 0.2, 6: 0.2}))
    assert flag == REWARD_SUSPECT and "c/m/p/s1" in why and "held-out reward moved +0.00" in why
    assert _verdict(_steps(rising, {0: 0.2, 6: 0.4})) == ("", "")  # skill: held-out rose with it
    assert _verdict(_steps([0.3] * 6, {0: 0.2, 6: 0.2})) == ("", "")  # nothing rose
    flag, why = _verdict(_steps(rising, {}))  # no held-out reward: not passed silently
    assert flag == "" and "without a held-out reward" in why


def test_a_policy_choosing_its_prompts_is_not_flagged_for_the_rise_its_choice_makes() -> None:
    """issue 58: a curriculum (or mixer) picks what it trains on, so its training reward rises by design; the
    held-out comparison is not made for it and the reason says so, while the exploit fractions still flag."""
    rising, flat = [0.1, 0.1, 0.2, 0.3, 0.5, 0.6], [0.3] * 6
    for mech in ("curriculum", "mix"):
        row = {"run_id": "c/m/midband/s1", "mechanism": mech, **watch_summary(_steps(rising, {0: 0.2, 6: 0.11}))}
        flag, why = watch_verdict(pd.DataFrame([row]))
        assert flag == "" and "chooses its training prompts" in why, (mech, why)
        hedging = {**row, **watch_summary(_steps(flat, {0: 0.3, 6: 0.3}, multi=[0.9] * 6))}
        assert watch_verdict(pd.DataFrame([hedging]))[0] == REWARD_SUSPECT
    row = {"run_id": "c/m/topk/s1", "mechanism": "select", **watch_summary(_steps(rising, {0: 0.2, 6: 0.11}))}
    assert watch_verdict(pd.DataFrame([row]))[0] == REWARD_SUSPECT  # a selector trains on the same prompts


def test_hedges_among_rewarded_responses_or_a_rising_bare_answer_share_are_suspect() -> None:
    flat = [0.3] * 6
    flag, why = _verdict(_steps(flat, {0: 0.3, 6: 0.3}, multi=[0.0, 0.1, 0.2, 0.4, 0.5, 0.6]))
    assert flag == REWARD_SUSPECT and "several final answers" in why
    assert _verdict(_steps(flat, {0: 0.3, 6: 0.3}, multi=[0.0, 0.1, 0.0, 0.1, 0.1, 0.1]))[0] == ""
    # a recipe whose answers are short from the start is not a shortcut; a rise to them is
    assert _verdict(_steps(flat, {0: 0.3, 6: 0.3}, bare=[1.0] * 6))[0] == ""
    assert _verdict(_steps(flat, {0: 0.3, 6: 0.3}, bare=[0.1, 0.1, 0.2, 0.6, 0.7, 0.9]))[0] == REWARD_SUSPECT
    # missing fractions (steps without a rewarded response) are skipped, never read as 0
    assert _verdict(_steps(flat, {0: 0.3, 6: 0.3}, multi=[np.nan, 0.9, np.nan, 0.9, 0.9, np.nan]))[0] == REWARD_SUSPECT
    strict = WatchThresholds(exploit_frac=0.95)
    summary = pd.DataFrame([{"run_id": "r", **watch_summary(_steps(flat, {0: 0.3, 6: 0.3}, multi=[0.9] * 6))}])
    assert watch_verdict(summary, strict)[0] == ""


def test_flag_policies_carries_the_watch_beside_its_flag_for_references_too(tmp_path: Path) -> None:
    def run(policy: str, seed: int, df: pd.DataFrame) -> dict:
        p = tmp_path / f"{policy}{seed}.jsonl"
        p.write_text("".join(json.dumps({k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))})
                             + "\n" for r in df.to_dict("records")))
        return {"run_key": f"{policy}{seed}", "run_id": f"c/m/{policy}/s{seed}", "campaign": "c", "model": "m",
                "regime": "", "policy": policy, "mechanism": "none" if policy == "baseline" else "select",
                "seed": seed, "metrics_path": p}

    hacked = _steps([0.1, 0.1, 0.2, 0.4, 0.5, 0.7], {0: 0.2, 6: 0.2})
    honest = _steps([0.1, 0.1, 0.2, 0.4, 0.5, 0.7], {0: 0.2, 6: 0.5})
    assert "reward_rise" in read_metrics(run("x", 9, hacked)["metrics_path"]).pipe(watch_summary)
    flags = flag_policies(run_summary([run("baseline", 1, hacked), run("baseline", 2, honest),
                                       run("topk", 1, honest), run("topk", 2, honest)]))
    by = flags.set_index("policy")
    assert by.loc["baseline", "watch"] == REWARD_SUSPECT and "c/m/baseline/s1" in by.loc["baseline", "watch_reason"]
    assert by.loc["topk", "watch"] == "" and by.loc["topk", "flag"] == "unverified"  # the flag stays beside it
    table = pd.DataFrame({"campaign": ["c", "c"], "model": ["m", "m"], "regime": ["", ""],
                          "policy": ["topk", "baseline"]})
    assert watch_column(table, flags).tolist() == ["", REWARD_SUSPECT]
    assert watch_column(table.iloc[:0], flags).tolist() == []
