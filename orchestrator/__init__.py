"""Windtunnel's orchestrator: the engine that runs a campaign, the cluster it runs on, and the features around them.

- `engine/`: spec → grid → ledger → scheduler → executor → stages, the data flow of DESIGN.md; it imports
  nothing else of the orchestrator (a code rule).
- `cluster/`: the Ray clusters the executor submits to (the work dir's local head, a local multi-node cluster,
  the head guard, the cluster record, the Ray address rule, the doctor).
- beside them, the campaign path and its features: `session` and `campaign` (submit, drive), `preflight`,
  cost `accounting` and `plan_report`, MLflow `tracking`, the `demo`, `adaptive` seeds, the base-model
  memorization probe, progress and summaries.
"""

import time

# The first line of Windtunnel code a stage process (`python -m orchestrator.engine.stages`) runs: the start of its
# imports in orchestrator.engine.start_latency's breakdown. Set once per process; importing it costs nothing.
STARTED_AT = time.time()
