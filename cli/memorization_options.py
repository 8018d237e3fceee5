"""The memorization options of `campaign report` and `campaign verdicts` (issue 35): where the base model's probe
rates are, and an aggregate restricted to the benchmarks the base model does not recall."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from wtcommon.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

    from analysis.memorization_section import ProbeRates
    from evaluation.suite import Suite

MemorizationOpt = Annotated[Path | None, typer.Option(
    "--memorization", metavar="PATH",
    help="the base model's memorization probe: a memorization.json (records of one model) or a folder of "
         "<model>/memorization.json; default: the memorization/ folder beside RECORDS (a campaign with "
         "`evaluation: {memorization: true}` writes it)")]
MaxMemorizationOpt = Annotated[float | None, typer.Option(
    "--max-memorization", metavar="RATE", min=0.0, max=1.0,
    help="restrict the aggregate to the benchmarks whose base-model recall rate (near-verbatim) is below RATE "
         "for every model of the records; needs the probe (--memorization)")]


def _models(df: pd.DataFrame) -> list[str]:
    return sorted(df["model"].astype(str).unique())


def load_probes(path: Path | None, records: Path, df: pd.DataFrame, *,
                required: bool = False) -> dict[str, ProbeRates] | None:
    """model -> probe rates from --memorization PATH (a file for records of one model, or a folder), else from
    beside the records; None when there is none and none is required (UserError, exit 2, when one is)."""
    from analysis.memorization_section import probes_beside, read_probe, read_probes
    from evaluation.memorization_report import JSON_NAME

    if path is None:
        found = probes_beside(records)
        if not found:
            if required:
                raise UserError(f"--max-memorization: no memorization probe beside {records} (looked in "
                                f"{Path(records).parent / 'memorization'}); give one with --memorization PATH "
                                "(`campaign audit memorization --model DIR --out DIR` writes it)")
            return None
        return read_probes(found)
    if path.is_file():
        models = _models(df)
        if len(models) != 1:
            raise UserError(f"--memorization {path}: one probe file, but the records hold {len(models)} models "
                            f"({', '.join(models)}); give a folder holding <model>/{JSON_NAME} for each")
        return {models[0]: read_probe(path)}
    if path.is_dir():
        found = {p.parent.name: p for p in sorted(path.glob(f"*/{JSON_NAME}"))}
        if not found and (path / JSON_NAME).is_file():
            return load_probes(path / JSON_NAME, records, df)
        if not found:
            raise UserError(f"--memorization {path}: no {JSON_NAME} in it or in its <model>/ folders")
        return read_probes(found)
    raise UserError(f"--memorization {path}: no such file or folder")


@dataclasses.dataclass(frozen=True)
class Restriction:
    """An aggregate restricted to the benchmarks under a recall rate: its name, what it kept and dropped (and why)."""

    aggregate: str
    source: str
    max_rate: float
    kept: tuple[str, ...]
    dropped: dict[str, str]

    def statement(self) -> str:
        dropped = "; ".join(f"{b} ({why})" for b, why in self.dropped.items()) or "none"
        return (f"{self.aggregate}: {self.source} restricted to the benchmarks whose base-model recall rate (near-"
                f"verbatim, memorization probe) is < {self.max_rate:g} for every model: kept {len(self.kept)} "
                f"({', '.join(self.kept)}); dropped {dropped}")

    def as_dict(self) -> dict[str, Any]:
        return {"aggregate": self.aggregate, "source": self.source, "max_memorization": self.max_rate,
                "kept": list(self.kept), "dropped": self.dropped}


def restrict(suite: Suite, source: str, probes: dict[str, ProbeRates], max_rate: float,
             models: list[str]) -> tuple[Suite, Restriction]:
    """The suite with one more aggregate: `source`'s benchmarks whose rate is < `max_rate` for each of `models`
    (a benchmark not probed for a model is dropped: unknown is not under the rate)."""
    from evaluation.suite import Aggregate

    agg = suite.aggregate(source)
    missing = [m for m in models if m not in probes]
    if missing:
        raise UserError(f"--max-memorization: no probe for model(s) {', '.join(missing)} (probes: "
                        f"{', '.join(sorted(probes)) or 'none'})")
    kept, dropped = [], {}
    for b in agg.benchmarks:
        rates = [probes[m].rates.get(b) for m in models]
        if any(r is None for r in rates):
            dropped[b] = "not probed"
        elif max(r.rate for r in rates if r is not None) >= max_rate:
            dropped[b] = f"recall {max(r.rate for r in rates if r is not None):.2f}"
        else:
            kept.append(b)
    if not kept:
        raise UserError(f"--max-memorization {max_rate:g}: no benchmark of {source} is under the rate "
                        f"({', '.join(f'{b}: {w}' for b, w in dropped.items())}); raise RATE")
    name = f"{source}[mem<{max_rate:g}]"
    new = Aggregate(name, agg.kind, tuple(kept), f"{source} restricted to recall < {max_rate:g}")
    return (dataclasses.replace(suite, aggregates=(*suite.aggregates, new)),
            Restriction(name, source, max_rate, tuple(kept), dropped))


__all__ = ["MaxMemorizationOpt", "MemorizationOpt", "Restriction", "load_probes", "restrict"]
