"""`reward-suspect`: a run whose training reward may measure a grader's hole rather than skill (issue 39).

Read from the run's own per-step training metrics (`metrics.jsonl`: the trainer's reward, its held-out reward
and the exploit watch of evaluation/exploit_watch.py), two tests, each with its threshold stated here:

* **reward without skill**: the training reward rose by at least `reward_rise` (mean of the last third of the
  steps minus the first third) while the held-out reward (`val/reward_mean`, the same graders on prompts the run
  never trains on; first logged value to last) rose by less than `heldout_share` of that rise. Needs two
  held-out values; without them this test is "unknown", never passed silently (the reason says so). Not applied
  to a policy that chooses its training prompts or domains (`CHOOSES_PROMPTS`): its training reward rises by the
  choice itself; the reason says the test was not made.
* **exploit fraction**: over the last half of the steps, the mean share of rewarded responses that offer
  several candidate final answers (`watch/multi_answer_frac`) is above `exploit_frac`; or the share of rewarded
  responses that answer without reasoning (`watch/no_reasoning_frac`) rose by more than `exploit_frac` (last half
  minus first half: a learned shortcut; a recipe whose answers are short from the start is not one).

A configuration (campaign, model, regime, policy; references included: a baseline can learn a hole too) is
`reward-suspect` when any of its runs is; the flag is shown *beside* its comparisons and verdicts (report and
`campaign compare --runs-dir`), which are kept, since the scores may still be right: the flag says to read
them with the item logs at hand (`campaign audit graders`, `campaign eval --regrade`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

REWARD_SUSPECT = "reward-suspect"
# the trainer's mean training reward per step: the local backend's, then verl's
REWARD_KEYS = ("reward/mean", "critic/score/mean")
HELDOUT_KEYS = ("val/reward_mean",)


@dataclass(frozen=True)
class WatchThresholds:
    """reward_rise: training-reward rise (reward units, 0-1) that needs a held-out rise to go with it;
    heldout_share: the share of that rise the held-out reward must reach; exploit_frac: the share of rewarded
    responses offering several answers (or the rise of the share answering without reasoning) above which a run
    is suspect."""

    reward_rise: float = 0.10
    heldout_share: float = 0.25
    exploit_frac: float = 0.20


DEFAULT_WATCH = WatchThresholds()
# mechanisms that choose what the run trains on (a curriculum's prompts, dynamic sampling's kept groups, a mixer's
# domains): a rise of their training reward is expected from the choice alone, so "reward without skill" is not
# tested on them (issue 58: a user's curriculum was flagged for what its prompt choice did)
CHOOSES_PROMPTS = ("curriculum", "mix")


def _series(df: pd.DataFrame, keys: tuple[str, ...]) -> pd.Series:
    for k in keys:
        if k in df.columns and df[k].notna().any():
            return df.sort_values("step")[k].dropna()
    return pd.Series(dtype=float)


def _late_mean(df: pd.DataFrame, key: str) -> float:
    s = _series(df, (key,))
    return float(s.iloc[len(s) // 2:].mean()) if len(s) else math.nan


def _rise(df: pd.DataFrame, key: str) -> float:
    s = _series(df, (key,))
    return float(s.iloc[len(s) // 2:].mean() - s.iloc[:len(s) // 2].mean()) if len(s) >= 2 else math.nan


def watch_summary(df: pd.DataFrame) -> dict[str, float]:
    """Per-run watch figures from one run's per-step metrics (`analysis.intervention.read_metrics`): the
    training-reward and held-out rises and the late means of the watch fractions (NaN where not logged)."""
    r = _series(df, REWARD_KEYS).to_numpy(dtype=float)
    k = max(1, len(r) // 3)
    h = _series(df, HELDOUT_KEYS).to_numpy(dtype=float)
    return {
        "reward_rise": float(r[-k:].mean() - r[:k].mean()) if len(r) >= 2 else math.nan,
        "heldout_rise": float(h[-1] - h[0]) if len(h) >= 2 else math.nan,
        "multi_answer_frac_late": _late_mean(df, "watch/multi_answer_frac"),
        "no_reasoning_frac_late": _late_mean(df, "watch/no_reasoning_frac"),
        "no_reasoning_rise": _rise(df, "watch/no_reasoning_frac"),
        "at_limit_frac_late": _late_mean(df, "watch/at_limit_frac"),
    }


def run_watch_reason(row: dict[str, float], th: WatchThresholds = DEFAULT_WATCH) -> str:
    """Why one run (a `watch_summary`) is reward-suspect; "" when it is not."""
    why = []

    def known(key: str) -> float:
        v = row.get(key, math.nan)
        return math.nan if v is None else float(v)

    multi, bare = known("multi_answer_frac_late"), known("no_reasoning_rise")
    if multi > th.exploit_frac:  # NaN compares False
        why.append(f"{multi:.0%} of rewarded responses offer several final answers over the last half of training "
                   f"(threshold {th.exploit_frac:.0%})")
    if bare > th.exploit_frac:
        why.append(f"the share of rewarded responses answering without reasoning rose {bare:+.0%} (threshold "
                   f"{th.exploit_frac:.0%})")
    rise, held = known("reward_rise"), known("heldout_rise")
    if str(row.get("mechanism", "")) in CHOOSES_PROMPTS:  # its training reward rises by its prompt choice
        return "; ".join(why)
    if rise >= th.reward_rise and not math.isnan(held):  # held-out unknown: stated by `watch_verdict`
        if held < th.heldout_share * rise:
            why.append(f"training reward rose {rise:+.2f} while held-out reward moved {held:+.2f} (under "
                       f"{th.heldout_share:.0%} of the rise)")
    return "; ".join(why)


def watch_verdict(runs: pd.DataFrame, th: WatchThresholds = DEFAULT_WATCH) -> tuple[str, str]:
    """(flag, reason) for one configuration's runs (rows with `run_id`, `seed` and the `watch_summary`
    columns): `reward-suspect` naming the runs and numbers, or "" with the reason empty or saying what could
    not be checked."""
    reasons = [(str(r.get("run_id", "")), why) for r in runs.to_dict("records")
               if (why := run_watch_reason(r, th))]
    if reasons:
        shown = "; ".join(f"{rid}: {why}" for rid, why in reasons[:2])
        more = f" (and {len(reasons) - 2} more run(s))" if len(reasons) > 2 else ""
        return REWARD_SUSPECT, shown + more
    rise = runs["reward_rise"].to_numpy(dtype=float) if "reward_rise" in runs else np.array([])
    held = runs["heldout_rise"].to_numpy(dtype=float) if "heldout_rise" in runs else np.array([])
    chooses = runs["mechanism"].astype(str).isin(CHOOSES_PROMPTS).to_numpy() if "mechanism" in runs else \
        np.zeros(len(rise), dtype=bool)
    if len(rise) and np.any(chooses & (rise >= th.reward_rise)):
        return "", ("training reward not weighed against held-out reward: the policy chooses its training prompts, "
                    "which raises the training reward by design (the exploit-fraction tests still apply)")
    if len(rise) and np.any((rise >= th.reward_rise) & np.isnan(held)):
        return "", "training reward rose without a held-out reward to check it against (val/reward_mean)"
    return "", ""


def watch_column(data: pd.DataFrame, flags: pd.DataFrame) -> np.ndarray:
    """(rows of `data`,) the `watch` flag of each row's method configuration: `data` (a comparisons or verdicts
    frame with campaign, model, regime, policy) against `flag_policies` output; "" where it has none."""
    keys = ["campaign", "model", "regime", "policy"]
    if data.empty or flags.empty or "watch" not in flags.columns:
        return np.full(len(data), "", dtype=object)
    left = data[keys].astype(str)
    right = flags[[*keys, "watch"]].astype(str).drop_duplicates(keys)
    return left.merge(right, on=keys, how="left")["watch"].fillna("").to_numpy(dtype=object)


__all__ = ["CHOOSES_PROMPTS", "DEFAULT_WATCH", "HELDOUT_KEYS", "REWARD_KEYS", "REWARD_SUSPECT", "WatchThresholds",
           "run_watch_reason",
           "watch_column", "watch_summary", "watch_verdict"]
