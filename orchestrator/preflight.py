"""Preflight: everything that can fail a campaign deterministically, checked before any compute.

Why: a campaign that trains for GPU-days and then fails at evaluation because a data file is missing,
or whose policy YAML has an unknown scorer, wastes the whole budget. `campaign plan` and `campaign
submit` call `preflight()` after expanding the grid and before writing anything: every policy is
loaded through the strict registry (plugins imported), every recipe, the suite and its evaluation
data (files, item counts, manifest) and the resources are checked, and all problems are reported at
once, one line each, naming the file and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.engine.grid import RunSpec
from orchestrator.engine.placement import Node
from orchestrator.engine.spec import CampaignSpec, SpecError

STUDY_DOMAINS = ("math", "logic", "science")


class PreflightError(SpecError):
    """One or more problems found before any compute; `problems` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(f"{len(self.problems)} problem(s) found before any compute:\n"
                         + "\n".join(f"  - {p}" for p in self.problems))


@dataclass
class Context:
    """Where the campaign will run: its evaluation data and the CPUs a run may ask for."""

    data_dir: Path | None = None  # evaluation data; None: not checked (plan without --workdir/--data-dir)
    local_cpus: int | None = field(default_factory=os.cpu_count)  # None for a remote cluster
    nodes: list[Node] | None = None  # the live cluster's nodes (with --ray-address); None: the declared cluster
    cluster_address: str = ""  # how messages name the live cluster ("the live cluster at URL", "the local head")


def check_policies(runs: list[RunSpec], root: Path) -> list[str]:
    """Load every distinct (policy, recipe) pair through the strict registry, plugins included."""
    from policies import load_policy
    from policies.errors import PolicyConfigError

    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for r in runs:
        if (r.policy.name, r.recipe_name) in seen:
            continue
        seen.add((r.policy.name, r.recipe_name))
        path = root / "policy" / f"{r.policy.name}.yaml"
        domains = (r.policy.cfg.get("domains") or (r.recipe_cfg.data or {}).get("domains")
                   or list(STUDY_DOMAINS))
        try:
            load_policy(r.policy.config, seed=r.seed, domains=domains,
                        rollout_n=r.recipe_cfg.rollout_n())
        except PolicyConfigError as exc:
            problems.append(f"{path}: {exc} (recipe {r.recipe_name})")
        except Exception as exc:
            problems.append(f"{path}: policy {r.policy.name!r} cannot be loaded: {type(exc).__name__}: {exc}")
    return problems


def _synthetic_pool(r: RunSpec) -> tuple[int, int] | None:
    """(prompts in the pool, prompts per domain) of a run that trains on its recipe's synthetic corpus (the local
    backend's `data:` block), else None: another corpus's size is known only once it is built."""
    if r.backend != "local" or r.data.get("corpus") != "synthetic":
        return None
    data = r.recipe_cfg.data or {}
    per = int(data.get("train_per_domain", 2000))
    return per * len(data.get("domains") or STUDY_DOMAINS), per


def _missing_prepass(r: RunSpec) -> str | None:
    """Why the trainer would find no cached pre-pass for this run (None: cached, or a corpus built only at train
    time, where the trainer itself refuses a missing one, naming the same command)."""
    if _synthetic_pool(r) is None:
        return None
    from training import difficulty
    from wtcommon.errors import UserError

    try:
        difficulty.pass_rates_for(difficulty.spec_for(r.model_cfg.path or f"builtin:{r.model}", r.recipe_cfg,
                                                      model_cfg=r.model_cfg))
    except UserError as exc:  # DifficultyMissing names the command that computes it
        return str(exc)
    return None


def check_curricula(runs: list[RunSpec], root: Path) -> list[str]:
    """What a curriculum needs beyond its own parameters: the difficulty pre-pass of a rule that reads one
    (refused here, naming the command that computes it, not after the model is built) and a pool of at least
    one batch (per domain under a mixer, which may give one domain the whole batch)."""
    from policies.curricula.registry import curriculum_class
    from policies.errors import PolicyConfigError

    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for r in runs:
        block = r.policy.cfg.get("curriculum")
        if not isinstance(block, dict) or (r.policy.name, r.recipe_name) in seen:
            continue
        seen.add((r.policy.name, r.recipe_name))
        path = root / "policy" / f"{r.policy.name}.yaml"
        try:
            cls = curriculum_class(block.get("name"))
        except PolicyConfigError:
            continue  # check_policies names the unknown curriculum
        if cls.needs_pass_rates and (missing := _missing_prepass(r)):
            problems.append(f"{path}: key 'curriculum.name': {cls.name!r} needs the difficulty pre-pass (the base "
                            f"model's pass rate per prompt): {missing}")
        batch, pool = r.recipe_cfg.actor.prompts_per_step, _synthetic_pool(r)
        if pool is not None:
            total, per = pool
            have, what = (per, "prompts per domain (a mixer may ask one domain for a whole batch)") if (
                r.policy.mechanism == "mix") else (total, "prompts in the pool")
            if have < batch:
                problems.append(f"{root / 'recipe' / f'{r.recipe_name}.yaml'}: key 'actor.prompts_per_step': "
                                f"{batch} is more than the {have} {what} of policy {r.policy.name!r}'s curriculum; "
                                "lower prompts_per_step or raise data.train_per_domain")
    return problems


def check_backend_curricula(spec: CampaignSpec, runs: list[RunSpec], root: Path) -> list[str]:
    """Curricula and a rollout-token budget only on a backend that honours them (`runs_curricula`: local and
    verl; `runs_rollout_budget`: local; noop trains nothing): a trainer that ignored them would train the
    baseline, or for its steps, under the policy's name."""
    from training.registry import get_backend

    backend = get_backend(spec.backend)
    problems = [f"{spec.source}: key 'budget.rollout_tokens': the {spec.backend} backend does not stop at a "
                "rollout-token budget yet; remove the budget or use backend: local"] if (
        spec.budget and not backend.runs_rollout_budget) else []
    ds = sorted({r.policy.name for r in runs if r.policy.cfg.get("dynamic_sampling") is not None})
    if not backend.runs_dynamic_sampling:
        problems += [f"{root / 'policy' / f'{name}.yaml'}: key 'dynamic_sampling': the {spec.backend} backend does "
                     "not draw dynamic-sampling rounds yet; run it with backend: local or remove the policy"
                     for name in ds]
    if backend.runs_curricula:
        return problems + _prepass_on(spec.backend, backend.runs_difficulty_prepass, runs, root)
    named = sorted({r.policy.name for r in runs if r.policy.cfg.get("curriculum") is not None})
    problems += [f"{root / 'policy' / f'{name}.yaml'}: key 'curriculum': the {spec.backend} backend does not roll "
                 "out a curriculum's prompts yet; run it with backend: local or remove the policy" for name in named]
    return problems


def _prepass_on(backend: str, reads: bool, runs: list[RunSpec], root: Path) -> list[str]:
    """A curriculum that needs the difficulty pre-pass (hardest_k) on a trainer that does not read it: the rule
    would refuse at the run's first step, after its launch."""
    if reads:
        return []
    from policies.curricula.registry import needs_pass_rates

    named = sorted({r.policy.name for r in runs if needs_pass_rates(r.policy.cfg.get("curriculum"))})
    return [f"{root / 'policy' / f'{name}.yaml'}: key 'curriculum.name': the {backend} backend does not read the "
            "difficulty pre-pass this curriculum needs yet; run it with backend: local or remove the policy"
            for name in named]


def check_references(spec: CampaignSpec, runs: list[RunSpec], root: Path) -> list[str]:
    """Every reference policy a run is compared with (`baselines:`) exists as a policy YAML."""
    from orchestrator.engine.spec import shipped_config_root

    problems = []
    for mech, ref in sorted({(r.policy.mechanism, r.reference) for r in runs if r.policy.mechanism != "none"}):
        if not any((d / "policy" / f"{ref}.yaml").exists() for d in (root, shipped_config_root())):
            problems.append(f"{spec.source}: key 'baselines.{mech}': reference policy {ref!r} has no YAML in "
                            f"{root / 'policy'} or the shipped campaigns/policy; name an existing policy")
    return problems


def check_recipes(runs: list[RunSpec], root: Path) -> list[str]:
    """Each recipe's backend matches the campaign's (unless that backend runs any recipe) and its numeric knobs
    are usable."""
    from training.registry import get_backend

    problems: list[str] = []
    seen: set[str] = set()
    for r in runs:
        if r.recipe_name in seen:
            continue
        seen.add(r.recipe_name)
        path = root / "recipe" / f"{r.recipe_name}.yaml"
        rb = r.recipe_cfg.backend
        if rb and rb != r.backend and not get_backend(r.backend).any_recipe:
            problems.append(f"{path}: key 'backend': recipe is for {rb!r} but the campaign's backend is "
                            f"{r.backend!r}; pick a {r.backend} recipe or change the campaign's backend")
        rollout = r.recipe_cfg.rollout  # typed: a non-integer `rollout.n` was refused when the recipe was read
        if rollout.n_given and rollout.n < 2:
            problems.append(f"{path}: key 'rollout.n': got {rollout.n!r}; GRPO needs at least 2 samples per prompt")
    return problems


def check_resources(spec: CampaignSpec, runs: list[RunSpec], ctx: Context) -> list[str]:
    """Every run must fit the cluster: `gpus_per_node` GPUs on each of `nnodes` distinct nodes of the declared
    cluster (`compute.nodes × compute.gpus_per_node`) or, when `ctx.nodes` holds the live cluster, of its alive
    nodes; a backend that cannot train across nodes refuses `nnodes > 1`; and CPUs per run fit a node."""
    from orchestrator.engine.placement import describe, fits, shape
    from training.registry import get_backend

    problems: list[str] = []
    c = spec.compute
    backend = get_backend(spec.backend)
    live = ctx.nodes is not None
    node_gpus = [n.gpus for n in ctx.nodes if n.alive] if ctx.nodes is not None else [c.gpus_per_node] * c.nodes
    where = (f"{ctx.cluster_address or 'the live cluster'} ({describe(ctx.nodes)})" if ctx.nodes is not None
             else f"the declared cluster ({c.nodes} node(s) × {c.gpus_per_node} GPUs, compute.nodes/gpus_per_node)")
    for (model, per_node, nnodes) in sorted({(r.model, r.gpus_per_node, r.nnodes) for r in runs}):
        if nnodes > 1 and not backend.multi_node:
            problems.append(f"{spec.source}: model {model!r}: nnodes: {nnodes}, but the {spec.backend!r} backend "
                            "trains on one node only; use the verl backend (or noop for a dry run), or a one-node "
                            "model")
            continue
        if per_node and not fits(node_gpus, per_node, nnodes):
            fix = ("start nodes with enough GPUs, or use a smaller model" if live else
                   "raise compute.nodes/gpus_per_node to match your cluster, or use a smaller model")
            problems.append(f"{spec.source}: model {model!r}: a run needs {shape(per_node, nnodes)} but {where} has "
                            f"no room for it; {fix}")
    cpus = c.cpus_per_node or ctx.local_cpus
    if cpus is not None and c.cpus_per_run > cpus:
        where = "compute.cpus_per_node" if c.cpus_per_node else f"this machine ({cpus} CPUs, local Ray head)"
        problems.append(f"{spec.source}: key 'compute.cpus_per_run': {c.cpus_per_run} CPUs per run can never be "
                        f"scheduled on {where}; lower it" + ("" if c.cpus_per_node else
                                                            " or declare compute.cpus_per_node for your cluster"))
    return problems


def check_eval_data(spec: CampaignSpec, data_dir: Path) -> list[str]:
    """The suite exists and its evaluation data is complete (files, schema, checksums, item counts)."""
    from evaluation.evaluator import check_benchmark_data
    from evaluation.suite import SuiteError, load_suite

    try:
        suite = load_suite(spec.suite)
    except (SuiteError, FileNotFoundError) as exc:
        return [f"{spec.source}: key 'suite': {exc}"]
    opts = spec.evaluation_options
    limit = opts.limit
    gates = opts.gates.apply(suite.gates) if opts.gates is not None else suite.gates
    return check_benchmark_data(suite, data_dir, limit=limit, require_item_count=gates.require_item_count)


def preflight(spec: CampaignSpec, runs: list[RunSpec], ctx: Context | None = None) -> None:
    """Raise `PreflightError` listing every problem; return None when the campaign can start."""
    from orchestrator.engine.plugins import add_project_path
    from training.registry import get_backend

    ctx = ctx or Context()
    root = Path(spec.config_root)
    add_project_path(root)  # the researcher's plugin modules live in the campaign's project directory
    problems = (check_policies(runs, root) + check_references(spec, runs, root) + check_recipes(runs, root)
                + check_curricula(runs, root) + check_backend_curricula(spec, runs, root)
                + check_resources(spec, runs, ctx))
    needs_eval_data = get_backend(spec.backend).needs_eval_data
    if needs_eval_data and ctx.data_dir is not None:
        problems += check_eval_data(spec, ctx.data_dir)
    else:  # every backend's evaluate stage loads the suite (noop too), even when it reads no benchmark data
        from evaluation.suite import SuiteError, load_suite

        try:
            load_suite(spec.suite)
        except (SuiteError, FileNotFoundError) as exc:
            problems.append(f"{spec.source}: key 'suite': {exc}")
    if problems:
        raise PreflightError(problems)


def eval_data_dir(spec: CampaignSpec, workdir: Path) -> Path:
    """Where the evaluate stage will read the suite's data (same rule as `orchestrator.engine.stages`)."""
    raw = spec.evaluation_options.data_dir
    if not raw:
        return Path(workdir) / "data" / "eval"
    p = Path(str(raw).replace("${workdir}", str(workdir)))
    return p if p.is_absolute() else Path(workdir) / p
