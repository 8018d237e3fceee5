"""Mixing actuators: per-domain sampling proportions for the *next* batch, applied before rollout by
`policies.sampler.DomainSampler`. Mixers declare their own statistics (no stub scorer, P14) and are fed
by `DomainStats`, which the policy updates from each step's batch (`DataPolicy.observe`)."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor

from policies import signals
from policies.actuators.base import Actuator
from policies.batch import StepBatch
from policies.registry import Param, register_actuator

FLOOR_MODES = ("max_renormalise", "projection")


class DomainStats:
    """Per-domain statistics over a window.

    `unit: sequences` (the study: the last `window` sequences of each domain, i.e. under half a step at
    window 50, P9) or `unit: steps` (the last `window` steps, each step's per-domain mean). Also keeps
    cumulative visit counts (sequences seen per domain) for UCB. Domains never seen read 0.0 (the study's
    default), and their count stays 0 so a UCB bonus favours them."""

    def __init__(self, n_domains: int, window: int, unit: str, needs_abs_adv: bool = True) -> None:
        self.d, self.window, self.unit = n_domains, window, unit
        self.needs_abs_adv = needs_abs_adv  # mean |advantage| costs (B, L) passes; skip it when unused
        self.counts = torch.zeros(n_domains, dtype=torch.float64)
        self.steps_seen = 0
        # sequences unit: per-domain tail of the last `window` values; steps unit: (<= window, D) rows
        self._seq: dict[str, list[Tensor]] = {k: [torch.zeros(0)] * n_domains for k in ("reward", "abs_adv")}
        self._steps: dict[str, Tensor] = {k: torch.zeros(0, n_domains) for k in ("reward", "abs_adv")}

    def update(self, batch: StepBatch) -> None:
        valid = batch.valid
        dom = batch.domains[valid].cpu()  # per-domain statistics are tiny: keep them on the CPU
        values = {"reward": batch.rewards[valid].float().cpu()}
        if self.needs_abs_adv:
            values["abs_adv"] = signals.mean_abs_advantage(batch)[valid].float().cpu()
        n = torch.bincount(dom, minlength=self.d)[: self.d].double()
        self.counts += n
        self.steps_seen += 1
        if self.unit == "steps":
            for k, v in values.items():
                sums = torch.zeros(self.d, dtype=torch.float64).index_add_(0, dom, v.double())
                row = torch.where(n > 0, sums / n.clamp_min(1), torch.full_like(sums, float("nan"))).float()
                self._steps[k] = torch.cat([self._steps[k], row[None]])[-self.window :]
        else:
            order = torch.sort(dom, stable=True).indices
            split = torch.bincount(dom, minlength=self.d)[: self.d].tolist()
            for k, v in values.items():
                parts = torch.split(v[order], split)
                self._seq[k] = [torch.cat([old, new])[-self.window :]
                                for old, new in zip(self._seq[k], parts, strict=True)]

    def series(self, key: str) -> list[Tensor]:
        """Per domain, its windowed values of `key` in time order (steps where a domain was not sampled are
        absent, not zero): what a mixer with its own recursion (SEC's TD(0)) folds."""
        return self._series(key)

    def _series(self, key: str) -> list[Tensor]:
        if self.unit == "steps":
            h = self._steps[key]
            return [h[:, d][~torch.isnan(h[:, d])] for d in range(self.d)]
        return self._seq[key]

    def mean(self, key: str) -> Tensor:
        """(D,) window mean of `reward` or `abs_adv`; 0.0 where a domain has no data yet."""
        return torch.stack([s.mean() if s.numel() else torch.tensor(0.0) for s in self._series(key)])

    def slope(self, key: str = "reward") -> Tensor:
        """(D,) least-squares slope of the windowed series against its index (per step or per sequence)."""
        out = []
        for s in self._series(key):
            if s.numel() < 2:
                out.append(torch.tensor(0.0))
                continue
            x = torch.arange(s.numel(), dtype=torch.float64)
            xc = x - x.mean()
            out.append(((xc * (s.double() - s.double().mean())).sum() / (xc * xc).sum()).float())
        return torch.stack(out)

    def state_dict(self) -> dict:
        """Plain lists (JSON-serialisable): mixing state is checkpointed beside verl's, without pickle."""
        return {"counts": self.counts.tolist(), "steps_seen": self.steps_seen,
                "seq": {k: [t.tolist() for t in v] for k, v in self._seq.items()},
                "steps": {k: v.tolist() for k, v in self._steps.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.counts = torch.as_tensor(state["counts"], dtype=torch.float64)
        self.steps_seen = int(state["steps_seen"])
        self._seq = {k: [torch.as_tensor(t, dtype=torch.float32) for t in v] for k, v in state["seq"].items()}
        self._steps = {k: torch.as_tensor(v, dtype=torch.float32).reshape(-1, self.d)
                       for k, v in state["steps"].items()}


def apply_floor(p: Tensor, floor: float, mode: str) -> Tensor:
    """Enforce a minimum share per domain.

    `max_renormalise` (the study): max(p, floor) then renormalise; not a guarantee ([0.96, 0.02, 0.02] ->
    [0.906, 0.047, 0.047] at floor 0.05, P13). `projection`: floor + (1 - K * floor) * p, which holds for
    any p when K * floor <= 1 ([0.866, 0.067, 0.067] from the same softmax)."""
    if floor <= 0:
        return p
    if mode == "projection":
        return floor + (1.0 - p.numel() * floor) * p
    q = torch.clamp_min(p, floor)
    return q / q.sum()


def _common(signal_choices: tuple[str, ...]) -> dict[str, Param]:
    return {
        "temperature": Param(float, 1.0, low=0.0, low_open=True),
        "floor": Param(float, 0.05, low=0.0, high=1.0),
        "floor_mode": Param(str, "max_renormalise", choices=FLOOR_MODES),
        "signal": Param(str, signal_choices[0], choices=signal_choices),
        "window": Param(int, 50, low=1, doc="window length in `window_unit`"),
        "window_unit": Param(str, "sequences", choices=("sequences", "steps"), doc="study: sequences (P9)"),
        "update_step": Param(int, 1, low=1, doc="recompute proportions every this many steps"),
    }


class Mixer(Actuator):
    """Base: `mix(stats) -> proportions (D,)` summing to 1."""

    mechanism = "mix"
    granularity = "domain"
    accepts_granularity = ("domain",)
    reads: ClassVar[tuple[str, ...]] = ("domain", "rewards")  # + advantages for signal mean_abs_advantage

    def mix(self, stats: DomainStats) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _finish(self, z: Tensor) -> Tensor:
        p = torch.softmax(z.double() / self.params["temperature"], 0)
        return apply_floor(p, self.params["floor"], self.params["floor_mode"]).float()


@register_actuator("static")
class Static(Mixer):
    """Uniform 1/D proportions every step: the reference the adaptive mixers are compared with."""

    PARAMS = {
        "window": Param(int, 50, low=1),
        "window_unit": Param(str, "sequences", choices=("sequences", "steps")),
        "update_step": Param(int, 1, low=1),
    }

    def mix(self, stats: DomainStats) -> Tensor:
        return torch.full((stats.d,), 1.0 / stats.d)


@register_actuator("reward_gap")
class RewardGap(Mixer):
    """p = floor(softmax((max_d m_d - m_d) / T)), m_d = window mean reward: favours the lagging domain."""

    PARAMS = _common(("window_mean_reward",))

    def mix(self, stats: DomainStats) -> Tensor:
        m = stats.mean("reward")
        return self._finish(m.max() - m)


@register_actuator("dump_ucb")
class DumpUCB(Mixer):
    """p = floor(softmax((v_d + c * sqrt(2 ln(N + 1) / (n_d + 1))) / T)).

    Study as run: `signal: window_mean_reward`, `visit_counts: false`, so v_d = mean reward and the bonus
    is 0: softmax(m_d / T) (favours the easiest domain; P10). The paper's definition is
    `signal: mean_abs_advantage` with `visit_counts: true` (n_d = sequences seen from domain d, N = total)."""

    PARAMS = {
        **_common(("window_mean_reward", "mean_abs_advantage")),
        "c": Param(float, 1.0, low=0.0),
        "visit_counts": Param(bool, False, doc="feed cumulative visit counts (fixes P10)"),
    }

    def mix(self, stats: DomainStats) -> Tensor:
        v = stats.mean("reward" if self.params["signal"] == "window_mean_reward" else "abs_adv").double()
        if self.params["visit_counts"]:
            n_total = float(stats.counts.sum())
            v = v + self.params["c"] * torch.sqrt(2.0 * math.log(n_total + 1.0) / (stats.counts + 1.0))
        return self._finish(v)


@register_actuator("tscl")
class TSCL(Mixer):
    """p = floor(softmax(f(x_d) / T)), f = identity if `signed` else abs.

    Study as run: `signal: window_mean_reward`, so x_d = m_d and tscl == dump_ucb (P11). The paper's
    definition is `signal: reward_slope` (least-squares slope of the windowed reward; use
    `window_unit: steps` so the slope is per training step)."""

    PARAMS = {**_common(("window_mean_reward", "reward_slope")), "signed": Param(bool, False)}

    def mix(self, stats: DomainStats) -> Tensor:
        x = stats.mean("reward") if self.params["signal"] == "window_mean_reward" else stats.slope("reward")
        return self._finish(x if self.params["signed"] else x.abs())


@register_actuator("sec")
class SEC(Mixer):
    """SEC (Self-Evolving Curriculum, arXiv 2505.14970): a bandit over the domains. The reward of an arm at a
    step is the mean absolute advantage of its samples; its value follows TD(0), Q_d <- alpha r_d +
    (1 - alpha) Q_d from Q_d = 0, updated only at steps that sampled d; p = softmax(Q / T) (Boltzmann).

    Q is folded from the windowed per-step series (`window_unit: steps`), so it needs no state of its own and
    resumes from the checkpointed `DomainStats`; a window of W steps drops terms of weight (1 - alpha) ** W
    (1e-30 at the defaults)."""

    PARAMS = {
        **_common(("mean_abs_advantage",)),
        "alpha": Param(float, 0.5, low=0.0, high=1.0, low_open=True, doc="TD(0) step size"),
        "window": Param(int, 100, low=1, doc="steps of history folded into Q"),
        "window_unit": Param(str, "steps", choices=("steps",), doc="TD(0) is per step"),
        "floor": Param(float, 0.0, low=0.0, high=1.0),
    }

    def mix(self, stats: DomainStats) -> Tensor:
        a = self.params["alpha"]
        q = []
        for s in stats.series("abs_adv"):  # one short series per domain
            w = a * (1.0 - a) ** torch.arange(s.numel() - 1, -1, -1, dtype=torch.float64)
            q.append((w * s.double()).sum())
        return self._finish(torch.stack(q) if q else torch.zeros(0, dtype=torch.float64))
