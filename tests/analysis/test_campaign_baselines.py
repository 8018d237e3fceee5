"""A campaign's `baselines:` reach its analysis (issue 48's demo: `baselines: {mix: baseline}` compared nothing,
because the analysis paired every mixer with the default `static`). The records a campaign collects carry its
baselines in their Parquet metadata when they differ from the defaults; `read_records` puts them in the frame's
attrs, and every pairing (compare, verdicts, tables, report, tokens-to-target) reads them there. A report of
records with no comparison is written and says so."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from analysis.comparisons import paired_comparisons
from analysis.records import BASELINES_KEY, read_records, records_baselines, write_records
from analysis.report import build_report
from analysis.schema import BASELINES_ATTR, DEFAULT_REFERENCE, references
from evaluation.suite import load_suite
from tests.released import RELEASED, needs_released


def _mixers(tmp_path: Path, baselines: dict[str, str] | None) -> Path:
    """The released records of the campaigns holding a mixer, their `static` runs relabelled `baseline` (plain
    GRPO: a campaign that ships baseline and mixers, no `static`), as a Parquet file a campaign collected with
    these `baselines:`."""
    recs = read_records(RELEASED)
    keep = recs[recs["campaign"].isin(set(recs.loc[recs["mechanism"] == "mix", "campaign"]))].copy()
    static = keep["policy"] == "static"
    keep.loc[static, "policy"], keep.loc[static, "mechanism"] = "baseline", "none"
    path = write_records(keep.reset_index(drop=True), tmp_path / "records.parquet")
    if baselines is not None:
        t = pq.read_table(path)
        meta = {**(t.schema.metadata or {}), BASELINES_KEY: json.dumps(baselines).encode()}
        pq.write_table(t.replace_schema_metadata(meta), path)
    return path


def _pairs(path: Path) -> set[tuple[str, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = paired_comparisons(read_records(path), load_suite("db12"), n_resamples=50).table
    eff = t[t["kind"] == "effect"]
    return set(zip(eff["policy"], eff["reference"], strict=True))


def test_references_are_the_defaults_overridden_by_the_records_attrs() -> None:
    df = pd.DataFrame({"policy": ["a"]})
    assert references(df) == DEFAULT_REFERENCE
    df.attrs[BASELINES_ATTR] = {"mix": "baseline"}
    assert references(df) == {**DEFAULT_REFERENCE, "mix": "baseline"}
    assert references(df[df["policy"] == "a"])["mix"] == "baseline"  # a filtered view keeps them


@needs_released
def test_a_campaigns_baselines_in_its_records_pair_its_mixers_with_baseline(tmp_path: Path) -> None:
    for sub in ("d", "b"):
        (tmp_path / sub).mkdir()
    default = _mixers(tmp_path / "d", None)
    assert records_baselines(default) is None
    mixers = {p for p, _ in _pairs(default)}
    assert not {p for p in mixers if p in ("reward_gap", "dump_ucb", "tscl")}  # static is gone: nothing to pair
    told = _mixers(tmp_path / "b", {**DEFAULT_REFERENCE, "mix": "baseline"})
    assert records_baselines(told) == {**DEFAULT_REFERENCE, "mix": "baseline"}
    pairs = _pairs(told)
    assert {("reward_gap", "baseline"), ("dump_ucb", "baseline"), ("tscl", "baseline")} <= pairs
    assert {r for p, r in pairs} == {"baseline"}


def test_a_records_file_without_the_key_or_not_parquet_has_no_baselines(tmp_path: Path) -> None:
    csv = tmp_path / "r.csv"
    csv.write_text("run_id\n")
    assert records_baselines(csv) is None and records_baselines(tmp_path / "absent.parquet") is None


@needs_released
def test_a_report_of_records_with_no_comparison_is_written_and_says_so(tmp_path: Path) -> None:
    recs = read_records(RELEASED)
    out = build_report(recs[recs["policy"] == "baseline"], tmp_path / "report.html", n_resamples=50)
    text = re.sub(r"<[^>]+>", " ", out.read_text())
    assert "No paired comparison" in text
