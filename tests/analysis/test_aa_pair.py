"""The A/A pair is a campaign setting (issue 23): `aa_pair:` in a campaign names the two policies whose
difference is the noise floor, `static` vs `baseline` unless it says otherwise, and the analysis forms the
A/A rows from the pair it is given."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from analysis.comparisons import paired_comparisons
from analysis.records import read_records
from evaluation.suite import load_suite
from orchestrator.engine.spec import SpecError, load_campaign
from tests.released import RELEASED, needs_released

REPO = Path(__file__).resolve().parents[2]


def _campaign(tmp_path: Path, **extra: object) -> Path:
    spec = yaml.safe_load((REPO / "campaigns" / "demo.yaml").read_text())
    spec.update(extra)
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_campaign_names_its_aa_pair_and_defaults_to_static_vs_baseline(tmp_path: Path) -> None:
    assert load_campaign(REPO / "campaigns" / "demo.yaml").aa_pair == ("static", "baseline")
    assert load_campaign(_campaign(tmp_path, aa_pair=["reward_gap", "static"])).aa_pair == ("reward_gap", "static")
    with pytest.raises(SpecError, match="aa_pair"):
        load_campaign(_campaign(tmp_path, aa_pair=["static"]))
    with pytest.raises(SpecError, match="aa_pair"):
        load_campaign(_campaign(tmp_path, aa_pair=["../static", "baseline"]))


@needs_released
def test_the_analysis_forms_aa_rows_from_the_pair_it_is_given() -> None:
    recs, suite = read_records(RELEASED), load_suite("db12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = paired_comparisons(recs, suite, n_resamples=100).table
        other = paired_comparisons(recs, suite, n_resamples=100, aa_pair=("reward_gap", "static")).table
    aa, aa_other = default[default["kind"] == "aa_noise_floor"], other[other["kind"] == "aa_noise_floor"]
    assert set(zip(aa["policy"], aa["reference"], strict=True)) == {("static", "baseline")}
    assert set(zip(aa_other["policy"], aa_other["reference"], strict=True)) == {("reward_gap", "static")}
    # the method effects do not depend on which pair is the A/A one
    eff = default[default["kind"] == "effect"].reset_index(drop=True)
    assert eff.equals(other[other["kind"] == "effect"].reset_index(drop=True))
