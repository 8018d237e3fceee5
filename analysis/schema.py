"""The Record schema: one row per run x checkpoint step x benchmark (DESIGN.md, Key types).

Kept as plain data so readers, writers and docs (`results/README.md`) share one definition.
Missing values are NaN, never 0: a 0.0 accuracy is a real score.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import MECHANISMS as POLICY_MECHANISMS
from wtcommon.errors import UserError

# name -> logical dtype ("str" | "int" | "float"), in canonical column order.
RECORD_COLUMNS: dict[str, str] = {
    "run_key": "str",
    "run_id": "str",
    "campaign": "str",
    "model": "str",
    "policy": "str",
    "mechanism": "str",
    "seed": "int",
    "step": "int",
    "regime": "str",
    "benchmark": "str",
    "domain": "str",
    "n_items": "int",
    "n_correct": "float",
    "accuracy": "float",
    "parse_rate": "float",
    "truncation_rate": "float",
    "suite_version": "str",
    "harness_version": "str",
    "config_hash": "str",
    "eval_hash": "str",
    # which metric `accuracy` holds: "accuracy" (greedy single pass; "" in older files means the same) or a
    # sampled-decoding metric `<benchmark>@avg<k>` / `@pass<j>` / `@maj<k>` (evaluation/sampling.py)
    "metric": "str",
    # every sampled-decoding metric of the benchmark as JSON {"aime24@avg16": 31.2, "aime24@pass1": ...}; "" if none
    "metrics": "str",
}

# Columns a writer may leave out (filled with "" = unknown): the evaluation generation came later than the
# released records and older run records (evaluation/settings.py); producers that never decode by sampling
# (noop, simulations) leave out the metric columns ("" = accuracy).
OPTIONAL_WRITE = ("eval_hash", "metric", "metrics")

# Columns a long file must carry; the others are filled (derived from the suite, or NaN / "").
REQUIRED_LONG = ("run_id", "campaign", "model", "policy", "seed", "step", "benchmark", "accuracy")

# Columns of the released wide CSV before the benchmark columns, in file order.
WIDE_ID_COLUMNS = ("run_id", "campaign", "model", "method", "seed", "steps", "regime")
# Optional extra identity columns a wide file may carry (our own wide export can add them).
WIDE_OPTIONAL = ("mechanism", "run_key", "config_hash", "suite_version", "harness_version", "eval_hash")

# The policies' mechanisms plus "unknown", records only: a policy outside the study's table, imported without a
# mechanism column (`study_mechanism`).
MECHANISMS = (*POLICY_MECHANISMS, "unknown")

# The study's policy table (STUDY.md §1.1). Used only when importing records that carry no mechanism
# column (the released CSV's study policies); a campaign's records take the mechanism from each policy's YAML.
POLICY_MECHANISM: dict[str, str] = {
    "baseline": "none",
    "difffilter": "select", "gfpo": "select", "maxvar": "select", "topk": "select",
    "ar": "reweight", "per": "reweight", "softmax": "reweight", "diffband": "reweight",
    "static": "mix", "reward_gap": "mix", "dump_ucb": "mix", "tscl": "mix",
}

# The default reference of each mechanism in paired comparisons (STUDY.md §6.2): the one mapping, also a
# campaign's default `baselines:` (orchestrator.engine.spec).
DEFAULT_REFERENCE: dict[str, str] = {"select": "baseline", "reweight": "baseline", "mix": "static",
                                     "curriculum": "baseline"}
# The A/A pair (method, reference): two policies that train the same way, whose difference is the noise floor;
# a campaign's default `aa_pair:` (orchestrator.engine.spec).
DEFAULT_AA_PAIR: tuple[str, str] = ("static", "baseline")

# A configuration for comparison; runs of one configuration differ only in seed.
CONFIG_KEYS = ("campaign", "model", "regime", "step", "policy")
GROUP_KEYS = ("campaign", "model", "regime", "step")
RUN_KEYS = ("run_key", "run_id", "campaign", "model", "policy", "mechanism", "seed", "step", "regime")

# Method orders of the study's tables (STUDY.md §6.3).
ORDER_MAIN = ("baseline", "ar", "per", "softmax", "difffilter", "diffband", "maxvar", "gfpo", "topk")
ORDER_MIXER = ("static", "reward_gap", "dump_ucb", "tscl")
ORDER_OTHER = ("baseline", "difffilter", "maxvar", "topk")


@dataclass(frozen=True)
class Problem:
    """One validation problem, located as precisely as the input allows."""

    file: str
    row: int | None  # 1-based data row (header excluded); None = whole file / column
    column: str | None
    message: str

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        return f"{', '.join(where)}: {self.message}"


class RecordsError(UserError):
    """Records failed validation; `.problems` lists every problem found, not just the first."""

    def __init__(self, problems: list[Problem], limit: int = 25):
        self.problems = list(problems)
        shown = "\n".join(f"  {p}" for p in self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(f"{len(self.problems)} problem(s) in records:\n{shown}{tail}")


def study_mechanism(policy: str) -> str:
    """Mechanism of a study policy name; "unknown" for names outside the study's table. (A policy's own
    mechanism comes from its YAML: `policies.mechanism_of`.)"""
    return POLICY_MECHANISM.get(policy, "unknown")
