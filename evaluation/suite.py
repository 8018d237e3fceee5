"""The benchmark suite as data: load and validate `campaigns/suite/<name>.yaml`.

Benchmarks and aggregates are declared in YAML so a researcher adds an aggregate (or a
benchmark) without touching code. Everything downstream (evaluator, analysis) reads a
`Suite`, never a hard-coded list.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from campaigns import config_root
from evaluation.gates import Gates
from evaluation.graders import GRADERS, ThinkTags
from wtcommon.files import load_yaml_mapping
from wtcommon.errors import UserError

SUITE_DIR = config_root() / "suite"

AggregateKind = Literal["domain_mean", "mean", "item_weighted"]
_AGG_KINDS = ("domain_mean", "mean", "item_weighted")


def _check_think_tags(path: Any, where: str, spec: Any) -> None:
    """`options.think_tags` of a benchmark (issue 49): the model's reasoning-block tags, read by the graders'
    conclusion reader ("OPEN,CLOSE", "CLOSE" or "none"); SuiteError naming the field otherwise."""
    if spec is None:
        return
    if not isinstance(spec, str):  # 5, true or a list read as text would name tags no model writes
        raise _err(path, f"{where}.options.think_tags", f"got {spec!r}; a string: 'OPEN,CLOSE', 'CLOSE' or 'none'")
    try:
        ThinkTags.parse(spec)
    except ValueError as e:
        raise _err(path, f"{where}.options.think_tags", str(e)) from None


class SuiteError(UserError):
    """A suite file is malformed, or a name it does not hold was asked of it; the message names the file, the
    field and the fix."""


@dataclass(frozen=True)
class Decoding:
    """How a benchmark is decoded: `samples` generations per item at `temperature` / `top_p`, seeded by `seed`.

    The default (1 sample, temperature 0) is the study's greedy single pass. These are evaluation settings:
    `as_dict()` is what belongs in an evaluation-settings hash (a change re-evaluates, not retrains)."""

    samples: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.samples == 1 and self.temperature == 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}


DECODING_KEYS = ("samples", "temperature", "top_p", "seed", "metric")


@dataclass(frozen=True)
class Benchmark:
    id: str
    domain: str
    n_items: int
    grader: str
    max_gen_toks: int
    temperature: float = 0.0
    top_p: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)
    samples: int = 1
    seed: int = 0
    # the per-benchmark metric the records' `accuracy` (and so every aggregate) uses: "avg" (avg@k, plain
    # accuracy when k = 1), "pass<j>" (unbiased pass@j, j <= k) or "maj" (maj@k)
    metric: str = "avg"

    @property
    def decoding(self) -> Decoding:
        return Decoding(samples=self.samples, temperature=self.temperature, top_p=self.top_p, seed=self.seed)

    @property
    def metric_name(self) -> str:
        """The records' name of the metric in `accuracy`: `accuracy` for a greedy single pass with metric avg,
        else `<id>@avg<k>` / `<id>@pass<j>` / `<id>@maj<k>`."""
        if self.samples == 1 and self.metric == "avg":
            return "accuracy"
        return f"{self.id}@{self.metric}{self.samples}" if self.metric in ("avg", "maj") else f"{self.id}@{self.metric}"


@dataclass(frozen=True)
class Aggregate:
    name: str
    kind: AggregateKind
    benchmarks: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Suite:
    name: str
    version: str
    domains: tuple[str, ...]
    benchmarks: tuple[Benchmark, ...]
    aggregates: tuple[Aggregate, ...]
    gates: Gates
    path: Path | None = None
    # campaigns on this suite run the base-model memorization probe unless their `evaluation:` block says
    # `memorization: false` (orchestrator/base_probe.py): a post-cutoff suite exists to tell recall from skill
    memorization_probe: bool = False

    @property
    def benchmark_ids(self) -> list[str]:
        return [b.id for b in self.benchmarks]

    def benchmark(self, bid: str) -> Benchmark:
        for b in self.benchmarks:
            if b.id == bid:
                return b
        raise SuiteError(f"unknown benchmark {bid!r} in suite {self.name!r}; known: {', '.join(self.benchmark_ids)}")

    def domain_of(self) -> dict[str, str]:
        return {b.id: b.domain for b in self.benchmarks}

    def item_counts(self) -> dict[str, int]:
        return {b.id: b.n_items for b in self.benchmarks}

    def by_domain(self) -> dict[str, list[str]]:
        return {d: [b.id for b in self.benchmarks if b.domain == d] for d in self.domains}

    def aggregate(self, name: str) -> Aggregate:
        for a in self.aggregates:
            if a.name == name:
                return a
        known = ", ".join(a.name for a in self.aggregates)
        raise SuiteError(f"unknown aggregate {name!r}; the suite {self.name!r} declares: {known}")

    @property
    def aggregate_names(self) -> list[str]:
        return [a.name for a in self.aggregates]

    def decodings(self) -> dict[str, dict[str, Any]]:
        """Benchmark id -> its decoding settings and metric (evaluation settings, for a settings hash)."""
        return {b.id: {**b.decoding.as_dict(), "metric": b.metric} for b in self.benchmarks}

    def sample_token_factor(self) -> float:
        """Generated tokens of the suite's decoding relative to one greedy pass: sum(n_items x max_gen_toks x
        samples) / sum(n_items x max_gen_toks) (evaluation cost scales with tokens; 1.0 for a greedy suite)."""
        base = sum(b.n_items * b.max_gen_toks for b in self.benchmarks)
        return sum(b.n_items * b.max_gen_toks * b.samples for b in self.benchmarks) / base

    def aggregate_metrics(self, name: str) -> dict[str, str]:
        """Benchmark id -> the metric an aggregate combines for it (`accuracy`, `aime24@avg16`, ...)."""
        return {bid: self.benchmark(bid).metric_name for bid in self.aggregate(name).benchmarks}


def with_max_gen_toks(suite: Suite, max_gen_toks: int | None) -> Suite:
    """The suite with every benchmark's generation limit replaced (small models, smoke tests)."""
    if max_gen_toks is None:
        return suite
    if max_gen_toks <= 0:
        raise SuiteError(f"max_gen_toks must be positive, got {max_gen_toks}")
    return dataclasses.replace(
        suite, benchmarks=tuple(dataclasses.replace(b, max_gen_toks=int(max_gen_toks)) for b in suite.benchmarks))


def _err(path: Path | str, where: str, msg: str) -> SuiteError:
    return SuiteError(f"{path}: {where}: {msg}")


def _decoding(path: Path | str, where: str, g: dict[str, Any]) -> Decoding:
    """The decoding settings of one benchmark (its own keys over its domain's `generation:` entry), validated."""
    k = g.get("samples", 1)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 1024:
        raise _err(path, f"{where}.samples", f"must be an integer in 1..1024 (generations per item), got {k!r}")
    t, p, seed = g.get("temperature", 0.0), g.get("top_p", 1.0), g.get("seed", 0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 10.0:
        raise _err(path, f"{where}.temperature", f"must be a number in [0, 10], got {t!r}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p <= 1.0:
        raise _err(path, f"{where}.top_p", f"must be a number in (0, 1], got {p!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _err(path, f"{where}.seed", f"must be a non-negative integer, got {seed!r}")
    if k > 1 and t == 0.0:
        raise _err(path, f"{where}.samples", f"{k} greedy samples (temperature 0) would all be the same "
                   "generation; set temperature > 0 (e.g. 0.6) or samples: 1")
    return Decoding(samples=int(k), temperature=float(t), top_p=float(p), seed=int(seed))


def _metric(path: Path | str, where: str, m: Any, k: int) -> str:
    """`avg`, `maj` or `pass<j>` with 1 <= j <= samples."""
    m = str(m)
    if m in ("avg", "maj"):
        return m
    if m.startswith("pass") and m[4:].isdigit() and 1 <= int(m[4:]) <= k:
        return f"pass{int(m[4:])}"
    raise _err(path, f"{where}.metric", f"{m!r} is not a metric; use avg (avg@k), maj (maj@k) or pass<j> with "
               f"1 <= j <= samples ({k})")


def load_suite(name_or_path: str | Path = "db12") -> Suite:
    """Load a suite by name (`campaigns/suite/<name>.yaml`) or by path, validating every field."""
    p = Path(name_or_path)
    if not p.suffix:
        p = SUITE_DIR / f"{name_or_path}.yaml"
    if not p.is_file():
        raise SuiteError(f"{p}: suite file not found; pass a name from {SUITE_DIR} or a path to a YAML file")
    return parse_suite(load_yaml_mapping(p, what="suite file", error=SuiteError), p)


def parse_suite(raw: Any, path: Path | str = "<suite>") -> Suite:
    if not isinstance(raw, dict):
        raise _err(path, "top level", "expected a mapping with keys name, domains, benchmarks, aggregates")
    for key in ("name", "domains", "benchmarks", "aggregates"):
        if key not in raw:
            raise _err(path, key, "required key is missing")
    domains = tuple(str(d) for d in raw["domains"])
    gen = raw.get("generation") or {}
    benches: list[Benchmark] = []
    seen: set[str] = set()
    for i, b in enumerate(raw["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(b, dict):
            raise _err(path, where, "expected a mapping with id, domain, n_items, grader")
        for key in ("id", "domain", "n_items", "grader"):
            if key not in b:
                raise _err(path, f"{where}.{key}", "required key is missing")
        bid = str(b["id"])
        if bid in seen:
            raise _err(path, f"{where}.id", f"duplicate benchmark id {bid!r}")
        seen.add(bid)
        if b["domain"] not in domains:
            raise _err(path, f"{where}.domain", f"{b['domain']!r} is not one of the declared domains {list(domains)}")
        if not isinstance(b["n_items"], int) or isinstance(b["n_items"], bool) or b["n_items"] <= 0:
            raise _err(path, f"{where}.n_items", f"must be a positive integer, got {b['n_items']!r}")
        if b["grader"] not in GRADERS:
            raise _err(path, f"{where}.grader", f"{b['grader']!r} is not a known grader; use one of {list(GRADERS)}")
        g = {**(gen.get(b["domain"]) or {}),
             **{k: b[k] for k in ("max_gen_toks", "temperature", "top_p", *DECODING_KEYS) if k in b}}
        max_gen = g.get("max_gen_toks", 8192)
        if not isinstance(max_gen, int) or max_gen <= 0:
            raise _err(path, f"{where}.max_gen_toks", f"must be a positive integer, got {max_gen!r}")
        dec = _decoding(path, where, g)
        _check_think_tags(path, where, (b.get("options") or {}).get("think_tags"))
        benches.append(
            Benchmark(
                id=bid,
                domain=str(b["domain"]),
                n_items=int(b["n_items"]),
                grader=str(b["grader"]),
                max_gen_toks=int(max_gen),
                temperature=dec.temperature,
                top_p=dec.top_p,
                options=dict(b.get("options") or {}),
                samples=dec.samples,
                seed=dec.seed,
                metric=_metric(path, where, g.get("metric", "avg"), dec.samples),
            )
        )
    ids = [b.id for b in benches]
    aggs: list[Aggregate] = []
    for i, a in enumerate(raw["aggregates"]):
        where = f"aggregates[{i}]"
        if not isinstance(a, dict) or "name" not in a or "kind" not in a:
            raise _err(path, where, "expected a mapping with name, kind and benchmarks")
        if a["kind"] not in _AGG_KINDS:
            raise _err(path, f"{where}.kind", f"{a['kind']!r} is not one of {list(_AGG_KINDS)}")
        members = a.get("benchmarks", "all")
        if members == "all":
            members = ids
        if not isinstance(members, list) or not members:
            raise _err(path, f"{where}.benchmarks", "must be 'all' or a non-empty list of benchmark ids")
        unknown = [m for m in members if m not in ids]
        if unknown:
            raise _err(path, f"{where}.benchmarks", f"unknown benchmark(s) {unknown}; declared: {ids}")
        aggs.append(Aggregate(name=str(a["name"]), kind=a["kind"], benchmarks=tuple(members),
                              description=str(a.get("description", ""))))
    names = [a.name for a in aggs]
    if len(set(names)) != len(names):
        raise _err(path, "aggregates", f"duplicate aggregate names in {names}")
    gates_raw = raw.get("gates") or {}
    gates = Gates(
        min_parse_rate=float(gates_raw.get("min_parse_rate", 0.5)),
        max_truncation_rate=float(gates_raw.get("max_truncation_rate", 0.2)),
        require_item_count=bool(gates_raw.get("require_item_count", True)),
    )
    return Suite(name=str(raw["name"]), version=str(raw.get("version", "0")), domains=domains,
                 benchmarks=tuple(benches), aggregates=tuple(aggs), gates=gates,
                 path=Path(path) if not isinstance(path, Path) else path, memorization_probe=_probe(path, raw))


def _probe(path: Path | str, raw: dict[str, Any]) -> bool:
    """`memorization_probe:` (default false): campaigns on the suite probe their base models unless they say no."""
    probe = raw.get("memorization_probe", False)
    if not isinstance(probe, bool):
        raise _err(path, "memorization_probe", f"must be true or false, got {probe!r}")
    return probe
