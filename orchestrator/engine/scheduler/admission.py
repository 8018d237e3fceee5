"""The scheduler's admission and placement decisions: which waiting runs start this poll.

Waiting runs are admitted in seed-major order (ledger order = plan order) while they fit: `max_parallel`,
the `capacity_gpus` cap, and the GPUs free per node (first fit, so a partial campaign already pairs up by
seed). A run no node set can ever hold waits with its reason; a bigger run that is blocked is passed by at
most `max_backfill` smaller ones before it reserves the cluster.
"""

from __future__ import annotations

from orchestrator.engine.ledger import RunState
from orchestrator.engine.ledger.base import RunRow
from orchestrator.engine.ledger.states import ACTIVE_STAGE, WAITING_STAGE
from orchestrator.engine.placement import fits, shape, take
from orchestrator.engine.scheduler.jobs import Jobs

S = RunState


class Admission(Jobs):
    """Admits waiting runs to the executor within the GPU budget and the cluster's shape."""

    def _admit(self, holding: list[RunRow], used: int, now: float) -> None:
        """Start the waiting runs that fit beside `holding` (the runs that hold resources, `used` GPUs)."""
        n_active = len(holding)
        free, totals = self._free_gpus(holding, now)
        waiting = [r for r in self.ledger.runs(self.campaign, list(WAITING_STAGE)) if r.next_try_at <= now]
        blocked: RunRow | None = None
        for row in waiting:  # already in seed-major order (ledger order = plan order)
            if n_active >= self.cfg.max_parallel:
                break
            stage = WAITING_STAGE[S(row.state)]
            need = self._need(row, stage)
            per_node, nnodes = self._shape(row, stage)
            if per_node and totals and not fits(totals, per_node, nnodes):
                self._unplaceable(row, per_node, nnodes)  # stays queued, the reason in `status`
                continue
            if blocked is not None and self._passed.get(blocked.run_key, 0) >= self.cfg.max_backfill:
                break  # reservation: the blocked run has been passed often enough; nothing else starts first
            if self.cfg.capacity_gpus and used + need > self.cfg.capacity_gpus:
                continue  # first fit: a smaller run may still fit
            trial = list(free)
            if per_node and totals and not take(trial, per_node, nnodes):
                blocked = blocked or row
                continue
            if not self._claim(row):
                continue
            if not self._submit(row, stage):
                continue
            free = trial
            self._submitted_at[row.run_key] = now
            used += need
            n_active += 1
            if blocked is not None:
                self._passed[blocked.run_key] = self._passed.get(blocked.run_key, 0) + 1
        if blocked is None:
            self._passed.clear()
        else:
            self._passed = {blocked.run_key: self._passed.get(blocked.run_key, 0)}

    # -- placement -------------------------------------------------------------------------
    def _shape(self, row: RunRow, stage: str) -> tuple[int, int]:
        """(GPUs per node, nodes) a stage of this run holds: training its model's shape, evaluation one GPU."""
        if stage != "train":
            return self._need(row, stage), 1
        if row.run_key not in self._nnodes:
            self._nnodes[row.run_key] = self._spec(row).nnodes
        nnodes = self._nnodes[row.run_key]
        return row.gpus // nnodes, nnodes

    def _free_gpus(self, holding: list[RunRow], now: float) -> tuple[list[float], list[float]]:
        """(free, total) GPUs per node as Ray will grant them now.

        Live (the executor reports its nodes): Ray's per-node free GPUs of the alive nodes, less the runs we
        submitted that Ray may not count yet (its job still PENDING, or newer than the report). Declared
        (no report): the campaign's `nodes × gpus_per_node` less every run we hold."""
        nodes = self.executor.nodes() if self.cfg.live_nodes else None
        if nodes is not None:
            alive = [n for n in nodes if n.alive]
            free = [n.free_gpus for n in alive]
            totals = [n.gpus for n in alive]
            unseen = [r for r in holding if self._job_state.get(r.run_key) == "PENDING"
                      or now - self._submitted_at.get(r.run_key, 0.0) < self.cfg.report_lag_s]
        else:
            if not (self.cfg.nodes and self.cfg.gpus_per_node):  # no node shape declared: only capacity_gpus counts
                return [], []
            free = [float(self.cfg.gpus_per_node)] * self.cfg.nodes
            totals = list(free)
            unseen = holding
        for r in sorted(unseen, key=lambda r: -r.gpus):
            per_node, nnodes = self._shape(r, ACTIVE_STAGE[S(r.state)])
            if per_node:
                take(free, per_node, nnodes)  # a run that no longer fits (a node died) holds nothing here
        return free, totals

    def _unplaceable(self, row: RunRow, per_node: int, nnodes: int) -> None:
        """Say once, in the run's reason, why it waits: no node set of the cluster can ever hold it."""
        why = f"waiting: needs {shape(per_node, nnodes)} and no {nnodes} node(s) of the cluster have that many GPUs"
        if row.reason != why:
            self.ledger.update(self.campaign, row.run_key, reason=why)
            self.ledger.event(self.campaign, "unplaceable", why, row.run_key)
