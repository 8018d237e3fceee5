"""A campaign's memorization probe of its base models (`evaluation: {memorization: true}`, issue 35;
`{memorization: {protocol: paper}}` for arXiv 2507.10532's protocol, issue 51).

Once a campaign's records are collected, each base model it trains from is probed on the campaign's suite and
data (evaluation/memorization.py, cached by model content, suite version, data checksums and prefix), and the
probe's files go beside the records: `results/<campaign>/memorization/<model>/memorization.json` (+ the two
CSVs). `campaign report` reads them to show each benchmark's recall rate beside each policy's Δ, and
`campaign verdicts --max-memorization` to restrict an aggregate to the benchmarks under a rate.

The probe runs where the orchestrator runs (one model load on the driver, HF backend): it is a property of the
base model, not of a run, so no cluster job is spent on it. A builtin model is resolved from the shared cache
(`training.warmup.base_model`, built there if missing); a model path must be a local HF directory. A probe that
cannot run is reported and leaves nothing written: a report then says the rates are missing, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluation.memorization_report import MEMORIZATION_DIR
from orchestrator.engine.grid import RunSpec
from orchestrator.engine.ledger.base import Ledger
from orchestrator.engine.ledger.states import RunState
from orchestrator.engine.paths import results_file


@dataclass(frozen=True)
class ProbeOutcome:
    """One base model's probe: the files written, or why there are none."""

    model: str
    files: tuple[Path, ...] = ()
    cached: bool = False
    error: str = ""


def probe_dir(workdir: Path, campaign: str, model: str) -> Path:
    """`results/<campaign>/memorization/<model>/`: where the probe of a campaign's base model goes."""
    return results_file(workdir, campaign, MEMORIZATION_DIR) / model


def requested(specs: list[RunSpec]) -> dict[str, RunSpec]:
    """Model name -> one run spec of it, for the models whose runs ask for the probe: `evaluation: {memorization:
    true}`, or a suite with `memorization_probe: true` (db12_post_cutoff) unless the block says `false`."""
    out: dict[str, RunSpec] = {}
    for spec in specs:
        if probe_on(spec):
            out.setdefault(spec.model, spec)
    return dict(sorted(out.items()))


def probe_on(spec: RunSpec) -> bool:
    """Whether a run asks for the probe: its `evaluation.memorization` when written, else its suite's default."""
    if "memorization" in spec.evaluation.raw:
        return bool(spec.evaluation.memorization)
    from evaluation.suite import load_suite
    from wtcommon.errors import WindtunnelError

    try:
        return load_suite(spec.suite).memorization_probe
    except WindtunnelError:  # a suite that no longer loads: the evaluation said so already; no probe asked
        return False


def base_model_path(spec: RunSpec) -> Path:
    """The HF directory the run trains from: a builtin model from the shared cache (built when missing), else
    the model config's path."""
    path = spec.model_cfg.path or f"builtin:{spec.model}"
    if path.startswith("builtin:"):
        from training import warmup

        return warmup.base_model(spec.model_cfg, spec.recipe_cfg)
    return Path(path)


def probe_model(spec: RunSpec, workdir: Path) -> ProbeOutcome:
    """Probe one base model on its run's suite and data; the files in `probe_dir`."""
    from evaluation.memorization import ProbeSettings, run_probe, summarise
    from evaluation.memorization_report import write_paper_report, write_report
    from evaluation.suite import load_suite
    from orchestrator.engine.stages import eval_data_dir
    from wtcommon.errors import WindtunnelError

    settings = ProbeSettings(protocol=spec.evaluation.memorization_protocol)
    target = probe_dir(workdir, spec.campaign, spec.model)
    try:
        result = run_probe(base_model_path(spec), load_suite(spec.suite), eval_data_dir(spec, workdir), settings)
        if settings.protocol == "paper":
            files = write_paper_report(target, result)
        else:
            files = write_report(target, result, summarise(result.rows, settings.near), settings)
    except (WindtunnelError, OSError, ValueError) as exc:
        return ProbeOutcome(spec.model, error=f"{type(exc).__name__}: {exc}")
    return ProbeOutcome(spec.model, tuple(files), cached=result.cached)


def probe_campaign(specs: list[RunSpec], workdir: Path) -> list[ProbeOutcome]:
    """The probe of every base model whose runs ask for it (none asked: an empty list)."""
    return [probe_model(spec, workdir) for spec in requested(specs).values()]


def campaign_specs(ledger: Ledger, campaign: str) -> list[RunSpec]:
    """The campaign's run specs (cancelled runs aside)."""
    return [r.spec for r in ledger.runs(campaign) if r.state != RunState.cancelled]


__all__ = ["MEMORIZATION_DIR", "ProbeOutcome", "base_model_path", "campaign_specs", "probe_campaign", "probe_dir",
           "probe_model", "probe_on", "requested"]
