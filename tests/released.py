"""The released run records (../shared/data, read-only in CI; never copied into the repo) and the marker that
skips a test when they are absent, named once for every test that reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

RELEASED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "released_runs_171.csv"
needs_released = pytest.mark.skipif(not RELEASED.is_file(), reason="../shared/data/released_runs_171.csv not present")
DOMAINS = {"math": ["math500", "aime24", "olympiadbench", "minerva_math", "gsm8k"],
           "logic": ["kk_hard", "bbh_logical_deduction", "bbh_tracking", "zebra_logic_mc"],
           "science": ["gpqa_diamond", "mmlu_pro_chemistry", "mmlu_pro_physics"]}
