"""Family-wise error control for sequential seeds: a Holm step-down over group-sequential boundaries.

A campaign tests many comparisons (113 in the paper program) at once. Bonferroni gives each comparison
alpha/m for its whole sequence of looks. The graphical approach of Maurer & Bretz (2013, "Multiple testing
in group sequential trials using graphical approaches", Stat. Biopharm. Res. 5:311-320) keeps the
family-wise error rate (FWER) <= alpha and rejects more: every comparison starts with weight 1/m and its
own group-sequential boundaries at level alpha*w (the design's spending function); when one is rejected
(at any look) its weight goes, Holm-fashion, in equal parts to those not rejected, whose boundaries are
recomputed at their higher level and re-applied at the current look, until no more is rejected. It is a
shortcut of a closed test whose intersection tests are weighted-Bonferroni group-sequential tests, so it
holds the FWER under any dependence between comparisons (they share a reference arm); it requires
boundaries that fall as the level rises, which `holm_table` enforces (conservatively) against MC noise.

Comparisons stopped for equivalence or futility are not rejected and keep their weight (familywise "holm").
Passing that weight on too ("holm-recycle", benchmark only) is not covered by the closed-testing argument:
the stopped comparisons are the ones whose statistic is near zero, so the ones still open are selected to be
extreme; benchmarks/adaptive_seeds_sim.py measures what that does to the FWER.

With one comparison every variant is the design's own boundaries at alpha; with one look the step-down is
Holm's (1979) procedure on the look's p-values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import special, stats

from analysis.sequential import SequentialError
from analysis.sequential.boundaries import spend
from analysis.sequential.decisions import Decision, interim_decision
from analysis.sequential.design import SequentialDesign

FAMILYWISE = ("none", "bonferroni", "holm")


@lru_cache(maxsize=8)
def _null_t(looks: tuple[int, ...], n_paths: int, seed: int) -> np.ndarray:
    """|paired t| of pure-noise paths at each look, (n_paths, K): the draws `t_bounds_mc` uses."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_paths, looks[-1]))
    csum, csq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    out = np.empty((n_paths, len(looks)))
    for k, n in enumerate(looks):
        mean = csum[:, n - 1] / n
        sd = np.sqrt(np.maximum(csq[:, n - 1] - n * mean * mean, 0.0) / (n - 1))
        out[:, k] = np.abs(mean) / (sd / math.sqrt(n))
    return out


def level_bounds(looks: tuple[int, ...], max_seeds: int, alphas: Sequence[float], spending: str,
                 n_paths: int = 300_000, seed: int = 20_261_129) -> np.ndarray:
    """`analysis.sequential.boundaries.t_bounds_mc` at many levels at once, (len(alphas), K): the same null paths and
    order-statistic rule, vectorised over levels (each look sorts the paths once for every level)."""
    tt = _null_t(tuple(looks), n_paths, seed)
    a = np.asarray(alphas, dtype=float)
    cum = np.stack([spend(spending, np.asarray(looks, dtype=float) / max_seeds, float(x)) for x in a])
    inc = np.diff(np.concatenate([np.zeros((a.size, 1)), cum], axis=1), axis=1)
    alive = np.ones((a.size, n_paths), dtype=bool)
    out = np.full((a.size, len(looks)), math.inf)
    for k in range(len(looks)):
        order = np.argsort(-tt[:, k], kind="stable")
        srt = tt[order, k]
        m = np.rint(inc[:, k] * n_paths).astype(int)
        # the (m+1)-th live path lies among the m + 1 + (already stopped) <= 2*alpha*n_paths + 2 largest
        top = min(n_paths, int(2 * a.max() * n_paths) + 2)
        cs = np.cumsum(alive[:, order[:top]], axis=1)  # live paths among the largest, per level
        live = alive.sum(axis=1)
        for i in np.nonzero((m > 0) & (live > 0))[0]:  # levels: a handful of scalar lookups each
            if m[i] >= live[i]:
                out[i, k] = float(srt[np.searchsorted(cs[i], live[i])])
            else:
                j1, j2 = np.searchsorted(cs[i], [m[i], m[i] + 1])
                out[i, k] = float(0.5 * (srt[j1] + srt[j2]))
        alive &= tt[None, :, k] < out[:, k:k + 1]
    return out


def design_bounds(design: SequentialDesign, alphas: Sequence[float]) -> np.ndarray:
    """Boundaries on the design's statistic scale at each level in `alphas`, (len(alphas), K)."""
    if design.small_sample == "mc":
        return level_bounds(design.looks, design.max_seeds, tuple(alphas), design.spending)
    return np.stack([replace(design, alpha=float(a), familywise="none").stat_bounds() for a in alphas])


@lru_cache(maxsize=32)
def _holm_table(design: SequentialDesign, m: int) -> np.ndarray:
    rows = design_bounds(design, [design.alpha / r for r in range(1, m + 1)])
    rows = np.maximum.accumulate(rows, axis=0)  # never lower at a lower level (conservative against MC noise)
    return np.vstack([np.full((1, rows.shape[1]), math.inf), rows])


def holm_table(design: SequentialDesign, m: int) -> np.ndarray:
    """(m+1, K): row r holds the boundaries at level alpha/r (r comparisons not yet rejected); row 0 = inf."""
    if m < 1:
        raise SequentialError(f"family size: need >= 1 comparison, got {m}")
    return _holm_table(replace(design, familywise="none", family_size=None), int(m))


# ---------------------------------------------------------------- one look over a campaign (CLI)


def familywise_look(diffs_by_comparison: Mapping[str, Sequence[float] | np.ndarray], look: int,
                    design: SequentialDesign, family_size: int, rejected_before: int = 0
                    ) -> tuple[dict[str, Decision], dict[str, float]]:
    """Every comparison at look `look` under the design's family-wise procedure.

    family_size: the campaign's comparisons (its look-0 family); rejected_before: how many of them were
    rejected (superior/inferior) at earlier looks. "holm" steps down: test all at alpha/r with r = family_size -
    rejected so far, reject, lower r, re-test the rest, until nothing more crosses. Returns the decisions and
    the level each comparison was last tested at."""
    if design.familywise not in FAMILYWISE:
        raise SequentialError(f"familywise: {design.familywise!r}; use one of {list(FAMILYWISE)}")
    m = design.family_size or family_size
    if design.familywise == "none":
        return (interim_decision(diffs_by_comparison, look, design),
                dict.fromkeys(diffs_by_comparison, design.alpha))
    if design.familywise == "bonferroni":
        d = design.per_comparison(m)
        return interim_decision(diffs_by_comparison, look, d), dict.fromkeys(diffs_by_comparison, d.alpha)
    r = max(1, m - rejected_before)
    out: dict[str, Decision] = {}
    level: dict[str, float] = {}
    todo = dict(diffs_by_comparison)
    while todo:
        d = replace(design, alpha=design.alpha / r, familywise="none", family_size=None)
        dec = interim_decision(todo, look, d)
        new = [k for k, v in dec.items() if v.decision in ("superior", "inferior")]
        if not new or r == 1:
            out.update(dec)
            level.update(dict.fromkeys(dec, d.alpha))
            break
        for k in new:
            out[k], level[k] = dec[k], d.alpha
            del todo[k]
        r = max(1, r - len(new))
    return {k: out[k] for k in diffs_by_comparison}, level  # in the caller's order


# ---------------------------------------------------------------- simulated campaigns (vectorised)


@dataclass(frozen=True)
class FamilyResult:
    """Per simulated campaign and comparison, shapes (n_camp, m): decision code (1 superior, -1 inferior,
    2 equivalent, 3 futile, 0 inconclusive) and the seeds it used."""

    decision: np.ndarray
    seeds_used: np.ndarray


def _cp(stat: np.ndarray, n: int, c_last: np.ndarray, design: SequentialDesign) -> np.ndarray:
    """`SequentialDesign.conditional_power` with a per-campaign final boundary c_last (n_camp, 1)."""
    t_k = n / design.max_seeds
    if design.small_sample != "z":
        c_z = stats.norm.isf(stats.t.sf(c_last, design.max_seeds - 1))
        z = stats.norm.isf(np.clip(stats.t.sf(np.abs(stat), n - 1), 1e-300, 1.0))
    else:
        c_z, z = c_last, np.abs(stat)
    return special.ndtr(-(c_z - z / math.sqrt(t_k)) / math.sqrt(1.0 - t_k))


def simulate_family(diffs: np.ndarray, design: SequentialDesign, method: str = "holm",
                    recycle: bool = False) -> FamilyResult:
    """Apply a sequential design with family-wise control to simulated campaigns.

    diffs: (n_camp, m, >= max_seeds) paired differences; every campaign is one family of m comparisons.
    method: "none" (alpha each), "bonferroni" (alpha/m each), "holm" (step-down above). recycle: also free the
    weight of comparisons stopped for equivalence/futility at earlier looks (not closed-testing valid).
    Loops over looks and step-down rounds only; everything else is vectorised over campaigns x comparisons.
    """
    diffs = np.asarray(diffs, dtype=float)
    if diffs.ndim != 3 or diffs.shape[2] < design.max_seeds:
        raise SequentialError(f"diffs: need shape (n_camp, m, >= {design.max_seeds}), got {diffs.shape}")
    if method not in FAMILYWISE:
        raise SequentialError(f"method: {method!r}; use one of {list(FAMILYWISE)}")
    n_camp, m, _ = diffs.shape
    base = replace(design, familywise="none", family_size=None)
    if method == "holm":
        table = holm_table(base, m)
    else:
        row = (base if method == "none" else replace(base, alpha=design.alpha / m)).stat_bounds()
        table = np.vstack([row] * (m + 1))
    eb = base.stat_bounds(which="equivalence") if design.equivalence_margin is not None else None
    K = len(design.looks)
    decision = np.zeros((n_camp, m), dtype=int)
    used = np.full((n_camp, m), design.max_seeds)
    open_ = np.ones((n_camp, m), dtype=bool)
    r = np.full(n_camp, m)  # weight denominators: comparisons not rejected (holm)
    csum, csq = np.cumsum(diffs, axis=2), np.cumsum(diffs * diffs, axis=2)
    for k, n in enumerate(design.looks):
        mean = csum[:, :, n - 1] / n
        se = np.sqrt(np.maximum((csq[:, :, n - 1] - n * mean * mean) / (n - 1), 0.0) / n)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = np.where(se > 0, mean / se, 0.0)
        newly = np.zeros_like(open_)
        while True:  # step-down rounds: at most as many as rejections in the worst campaign
            crit = table[np.maximum(r, 1), k][:, None]
            eff = open_ & ~newly & (np.abs(stat) >= crit)
            if not eff.any():
                break
            decision[eff] = np.where(stat[eff] > 0, 1, -1)
            newly |= eff
            if method != "holm":
                break
            r = r - eff.sum(axis=1)
        cand = open_ & ~newly
        if eb is not None and design.equivalence_margin is not None and np.isfinite(eb[k]):
            mg = design.equivalence_margin
            eq = cand & (mean - eb[k] * se > -mg) & (mean + eb[k] * se < mg)
            decision[eq] = 2
            cand &= ~eq
            newly |= eq
        if design.futility_cp is not None and k < K - 1 and n >= design.futility_min_seeds:
            fut = cand & (_cp(stat, n, table[np.maximum(r, 1), K - 1][:, None], design) < design.futility_cp)
            decision[fut] = 3
            newly |= fut
        used[newly] = n
        if recycle and method == "holm":
            r = r - (newly & (decision >= 2)).sum(axis=1)
        open_ &= ~newly
    return FamilyResult(decision=decision, seeds_used=used)


def fixed_holm(diffs: np.ndarray, n: int | np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Fixed-n paired t tests on the first n seeds (n: one count, or one per comparison) with Holm's step-down
    over each campaign's m comparisons. diffs (n_camp, m, >= max n) -> (n_camp, m): 1 / -1 rejected with that
    sign, 0 not."""
    d = np.asarray(diffs, dtype=float)
    ns = np.broadcast_to(np.asarray(n, dtype=int), (d.shape[1],))
    n_camp, m = d.shape[0], d.shape[1]
    stat, p = np.zeros((n_camp, m)), np.ones((n_camp, m))
    for k in np.unique(ns):  # a few distinct seed counts
        sel = ns == k
        x = d[:, sel, :k]
        mean, sd = x.mean(axis=2), x.std(axis=2, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat[:, sel] = np.where(sd > 0, mean / (sd / math.sqrt(k)), 0.0)
        p[:, sel] = 2 * stats.t.sf(np.abs(stat[:, sel]), k - 1)
    order = np.argsort(p, axis=1)
    ps = np.take_along_axis(p, order, axis=1)
    ok = np.cumprod(ps <= alpha / (m - np.arange(m))[None, :], axis=1).astype(bool)
    rej = np.zeros_like(ok)
    np.put_along_axis(rej, order, ok, axis=1)
    return np.where(rej, np.sign(stat), 0).astype(int)
