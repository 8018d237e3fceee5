"""Windtunnel's orchestrator: campaigns, scheduler, ledger, executors and the stage entrypoints."""

import time

# The first line of Windtunnel code a stage process (`python -m orchestrator.stages`) runs: the start of its
# imports in wtcommon.start_latency's breakdown. Set once per process; importing it costs nothing.
STARTED_AT = time.time()
