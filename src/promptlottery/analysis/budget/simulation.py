"""The lottery at a fraction of the calls, simulated on a full grid: sparse designs and adaptive stopping.

Makes no model call. For each configuration of a full grid (its items judged under every wording),
:func:`simulate_budgets` masks the grid to a sparse plan (:func:`promptlottery.metrics.sparse_plans.sparse_plan`)
``n_sim`` times per budget and design, re-estimates every statistic with its sparse estimator, and
compares with the full grid:

* ``within_full_ci``: the share of subsamples whose estimate falls inside the full grid's 95%
  percentile bootstrap interval (items resampled);
* ``coverage``: the share of subsamples whose own interval covers the full grid's value. A sparse
  interval resamples items with the cells each item drew (items + design); for the full grid's value
  on these items (a finite population) it is narrowed by the finite-population factor
  ``sqrt(1 - f)``, ``f`` the plan's share of the calls (ours: exact for an item subsample, a heuristic
  for the other designs; the coverage column is what measures it).

The statistics (each the full grid's definition, estimated by the sparse one of the same name):
``fleiss`` (Fleiss' kappa across wordings, no collapse filter; sparse: inverse-probability weighted),
``alpha`` (Krippendorff's alpha, nominal; sparse: over the judged cells), ``changed`` (share of items
with a different verdict from at least one wording; sparse: model-assisted, calibrated on the fully
judged items) and ``tau`` (mean over wording pairs of Kendall's tau-b between the systems' mean verdict
scores; sparse: Hajek means), on the verdict (argmax label) matrix.

:func:`simulate_adaptive` replays a seeded random order of the wordings per item and stops once a
Beta posterior makes the running plurality label certain (Adaptive-Consistency's Beta criterion,
Aggarwal et al. 2023: stop when ``P(p_top > 0.5)`` under ``Beta(v_top + 1, v_second + 1)`` reaches
the confidence), beside the paper's 3-of-5 rule (stop once a label has ``ceil((J + 1) / 2)`` votes: the
plurality cluster is then decided, so it recovers every cluster decision by construction).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.metrics import sparse as sp
from promptlottery.metrics.adaptive import beta_confidence, stop_reason
from promptlottery.metrics.aggregate import plurality_cluster
from promptlottery.metrics.bootstrap import resample_indices
from promptlottery.metrics.sparse_plans import SparsePlan, sparse_plan
from promptlottery.metrics.sparse_shares import share_batch, share_parts
from promptlottery.registry import Registry

__all__ = [
    "DESIGNS",
    "STATISTICS",
    "Design",
    "beta_confidence",
    "estimate_sparse",
    "full_statistics",
    "simulate_adaptive",
    "simulate_budgets",
    "simulate_designs",
    "bootstrap_weights",
    "design_summary",
    "percentile_bounds",
]


@dataclass(frozen=True)
class Design:
    """A family of sparse plans: ``anchor`` judged on every item, ``full_share`` of the items (a
    share of the budget's calls: ``full_share * budget`` of the items) judged under every wording."""

    name: str
    anchor: bool
    full_of_budget: float  # share of the budget spent on fully judged items

    def plan(self, items, variants, budget: float, seed: int, reference: str) -> SparsePlan:
        return sparse_plan(
            items,
            variants,
            budget=budget,
            anchor=reference if self.anchor else None,
            full_share=self.full_of_budget * budget,
            seed=seed,
        )


#: the designs the simulator compares
DESIGNS: Registry[Design] = Registry("analysis.designs design")
DESIGNS.register("items", Design("items", anchor=False, full_of_budget=1.0))
DESIGNS.register("spread", Design("spread", anchor=False, full_of_budget=0.3))
DESIGNS.register("anchor", Design("anchor", anchor=True, full_of_budget=0.3))
STATISTICS = ("fleiss", "alpha", "changed", "tau")


def _parts(
    labels: np.ndarray,
    scores: np.ndarray,
    systems: np.ndarray,
    plan: SparsePlan,
    hits: np.ndarray | None = None,
) -> dict:
    out = {
        "fleiss": (sp.fleiss_batch, sp.fleiss_parts(labels, plan)),
        "alpha": (sp.alpha_batch, sp.alpha_parts(labels)),
        "changed": (sp.changed_batch, sp.changed_parts(labels)),
        "tau": (sp.tau_batch, sp.tau_parts(scores, systems, plan)),
    }
    if hits is not None:  # agreement with the humans: pooled, and per wording (ratios of HT totals)
        seen = np.isfinite(hits)
        parts = share_parts(seen & (np.nan_to_num(hits) == 1), seen, np.where(seen, plan.prob, 1.0))
        out["human_agreement"] = (partial(share_batch, pooled=True), parts)
        out |= {
            f"human_agreement/{w}": (lambda p, r, j=j: share_batch(p, r)[:, j], parts)
            for j, w in enumerate(plan.variants)
        }
    return out


def _full_plan(shape: tuple[int, int], variants=None) -> SparsePlan:
    n, k = shape
    return SparsePlan(
        tuple(map(str, range(n))), tuple(variants or map(str, range(k))), np.ones(shape, bool),
        np.ones(shape), np.ones((n, k, k)), None, 0,
    )  # fmt: skip


def bootstrap_weights(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """1 + R rows of item weights: the sample itself, then the bootstrap resamples' counts."""
    idx = resample_indices(n, n_resamples, seed=seed)
    counts = np.zeros((len(idx), n))
    np.add.at(counts, (np.repeat(np.arange(len(idx)), n), idx.ravel()), 1.0)
    return np.vstack([np.ones(n), counts])


def _estimates(parts: dict, r: np.ndarray) -> dict[str, np.ndarray]:
    """Each statistic under each row of item weights ``r`` (row 0: the estimate)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {s: batch(p, r) for s, (batch, p) in parts.items()}


def full_statistics(labels: np.ndarray, scores: np.ndarray, systems: np.ndarray) -> dict[str, float]:
    """The full grid's statistics (``labels`` / ``scores``: items x wordings, complete); on a full grid
    the sparse estimators are the plain definitions (Fleiss' kappa, alpha, the changed share, tau-b)."""
    est = _estimates(
        _parts(labels, scores, np.asarray(systems, object), _full_plan(labels.shape)),
        np.ones((1, len(labels))),
    )
    return {s: float(v[0]) for s, v in est.items()}


def percentile_bounds(dist: np.ndarray, level: float) -> tuple[float, float]:
    ok = dist[np.isfinite(dist)]
    if not ok.size:
        return math.nan, math.nan
    q = (1 - level) / 2
    return float(np.percentile(ok, 100 * q)), float(np.percentile(ok, 100 * (1 - q)))


def simulate_budgets(
    labels: np.ndarray,
    scores: np.ndarray,
    systems: Iterable,
    *,
    items: Iterable[str],
    variants: Iterable[str],
    reference: str,
    budgets: Iterable[float] = (0.1, 0.2, 0.3, 0.5, 0.8),
    designs: Iterable[str] = tuple(DESIGNS),
    n_sim: int = 200,
    n_resamples: int = 200,
    level: float = 0.95,
    seed: int = 0,
    hits: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per (design, budget, statistic): the full value and CI, the sparse estimates' summary.

    ``hits`` (items x wordings, 1 where the verdict agrees with the item's human label, 0 where not):
    also ``human_agreement``, pooled and per wording (``human_agreement/<wording>``)."""
    labels, scores = np.asarray(labels, float), np.asarray(scores, float)
    systems = np.asarray(list(systems), dtype=object)
    items, variants = [str(i) for i in items], [str(v) for v in variants]
    hits = None if hits is None else np.asarray(hits, float)
    n = labels.shape[0]
    r = bootstrap_weights(n, n_resamples, seed)
    full_est = _estimates(_parts(labels, scores, systems, _full_plan(labels.shape, variants), hits), r)
    full = {s: float(v[0]) for s, v in full_est.items()}
    full_ci = {s: percentile_bounds(v[1:], level) for s, v in full_est.items()}

    def plan_of(design: Design, budget: float, plan_seed: int) -> SparsePlan:
        return design.plan(items, variants, budget, plan_seed, reference)

    def estimates_of(plan: SparsePlan, weights: np.ndarray) -> dict[str, np.ndarray]:
        lm = np.where(plan.mask, labels, np.nan)
        sm = np.where(plan.mask, scores, np.nan)
        hm = None if hits is None else np.where(plan.mask, hits, np.nan)
        return _estimates(_parts(lm, sm, systems, plan, hm), weights)

    rows = simulate_designs(
        plan_of, estimates_of, full, full_ci, n=n, budgets=budgets, designs=designs, n_sim=n_sim,
        n_resamples=n_resamples, level=level, seed=seed,
    )  # fmt: skip
    return pd.DataFrame(rows)


def simulate_designs(
    plan_fn: Callable[[Design, float, int], Any],
    stats_fn: Callable[[Any, np.ndarray], dict[str, np.ndarray]],
    full: dict[str, float],
    full_ci: dict[str, tuple[float, float]],
    *, n: int, budgets: Iterable[float], designs: Iterable[str], n_sim: int, n_resamples: int, level: float,
    seed: int, weights_of: Callable[[int], np.ndarray] | None = None,
) -> list[dict]:  # fmt: skip
    """The simulation loop of a full grid of ``n`` units (items, or pairs), one :func:`design_summary`
    row per (design, budget, statistic of ``full``), the rows :func:`simulate_budgets` returns.

    ``plan_fn(design, budget, seed)``: a sparse plan (with a ``share`` of the calls; ValueError: the
    budget cannot be planned, its rows carry the message as ``note``); ``stats_fn(plan, r)``: every
    statistic under each row of unit weights ``r`` (row 0: the estimate) on the grid masked to the
    plan. Plan ``sim`` of ``n_sim`` is drawn with ``seed + 1 + sim``, its bootstrap with
    ``seed + 100_000 + sim`` (``weights_of(seed)``: the unit weights of a seed, default
    :func:`bootstrap_weights`); its interval is narrowed by ``sqrt(1 - calls share)``."""
    if weights_of is None:
        weights_of = partial(bootstrap_weights, n, n_resamples)
    rows = []
    for design_name in designs:
        design = DESIGNS[design_name]
        for budget in budgets:
            try:
                plan_fn(design, budget, seed)
            except ValueError as exc:  # e.g. a budget below the anchor's own cost
                rows += [
                    design_summary(design_name, budget, s, full[s], full_ci[s], [], [], note=str(exc))
                    for s in full
                ]
                continue
            runs: dict[str, list] = {s: [] for s in full}
            shares = []
            for sim in range(n_sim):
                plan = plan_fn(design, budget, seed + 1 + sim)
                est = stats_fn(plan, weights_of(seed + 100_000 + sim))
                fpc = math.sqrt(max(0.0, 1.0 - plan.share))
                shares.append(plan.share)
                for s in full:
                    e = float(est[s][0])
                    lo, hi = percentile_bounds(est[s][1:], level)
                    runs[s].append((e, e - fpc * (e - lo), e + fpc * (hi - e)))
            rows += [
                design_summary(design_name, budget, s, full[s], full_ci[s], runs[s], shares) for s in full
            ]
    return rows


def design_summary(design, budget, stat, full, full_ci, runs, shares, note: str = "") -> dict:
    est = np.array([r[0] for r in runs], dtype=float)
    lo = np.array([r[1] for r in runs], dtype=float)
    hi = np.array([r[2] for r in runs], dtype=float)
    ok = np.isfinite(est) & np.isfinite(lo) & np.isfinite(hi)
    defined = int(ok.sum())
    flo, fhi = full_ci
    within = np.mean((est[ok] >= flo) & (est[ok] <= fhi)) if defined and np.isfinite(flo) else math.nan
    covered = np.mean((lo[ok] <= full) & (full <= hi[ok])) if defined and np.isfinite(full) else math.nan
    err = est[ok] - full
    return {
        "design": design,
        "budget": budget,
        "calls_share": float(np.mean(shares)) if shares else math.nan,
        "statistic": stat,
        "full": full,
        "full_lo": flo,
        "full_hi": fhi,
        "mean_estimate": float(est[ok].mean()) if defined else math.nan,
        "rmse": float(np.sqrt(np.mean(err**2))) if defined else math.nan,
        "within_full_ci": float(within),
        "coverage": float(covered),
        "n_sim": len(runs),
        "n_undefined": len(runs) - defined,
        "note": note,
    }


def estimate_sparse(
    labels: np.ndarray,
    scores: np.ndarray,
    systems: Iterable,
    plan: SparsePlan,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    hits: np.ndarray | None = None,
) -> pd.DataFrame:
    """The estimates of a sparse grid (NaN = not judged) with their intervals, one row per statistic
    (with ``hits``, as :func:`simulate_budgets`: the human agreement, pooled and per wording).

    ``lo`` / ``hi``: items resampled with the cells each drew (items + design: the interval for
    new items judged under new plans); ``full_lo`` / ``full_hi``: the same narrowed by
    ``sqrt(1 - calls share)``, for the full grid's value on these items (ours; its coverage is
    measured by :func:`simulate_budgets`).
    """
    labels, scores = np.asarray(labels, float), np.asarray(scores, float)
    systems = np.asarray(list(systems), dtype=object)
    hits = None if hits is None else np.asarray(hits, float)
    est = _estimates(
        _parts(labels, scores, systems, plan, hits), bootstrap_weights(len(labels), n_resamples, seed)
    )
    fpc = math.sqrt(max(0.0, 1.0 - plan.share))
    rows = []
    for s in est:
        e = float(est[s][0])
        lo, hi = percentile_bounds(est[s][1:], level)
        rows.append(
            {"statistic": s, "estimate": e, "lo": lo, "hi": hi, "full_lo": e - fpc * (e - lo),
             "full_hi": e + fpc * (hi - e), "n_undefined": int(np.isnan(est[s][1:]).sum())}
        )  # fmt: skip
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- adaptive stopping


#: the simulator's rule names: those of ``judge.stop_rule``, and the 3-of-5 rule's earlier name
RULES = {"beta": "beta", "dirichlet": "dirichlet", "paper_3of5": "paper_3of5", "cluster_3_of_5": "paper_3of5"}


def simulate_adaptive(
    labels: np.ndarray,
    *,
    rule: str = "beta",
    confidence: float = 0.95,
    n_sim: int = 200,
    seed: int = 0,
    orders: np.ndarray | None = None,
) -> dict[str, float]:
    """Replay a seeded random order of the wordings per item, stop by ``rule``; compare with all of them.

    Returns the mean calls per item (``calls``: their total), the saving against every wording, and the
    share of the full grid's plurality cluster decisions (items with a cluster) that the stopped run
    gives (the running plurality when it stops: its most voted label, ties to the first given), with
    its 2.5 / 97.5% range over the ``n_sim`` orders. ``orders`` (items x wordings, wording indices):
    replay these orders once instead (a sweep's own, :func:`promptlottery.metrics.adaptive.item_order`),
    so the calls are those that sweep made on this grid. The rules are the judge stage's
    (:func:`promptlottery.metrics.adaptive.stop_reason`).
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {sorted(RULES)}, got {rule!r}")
    labels = np.asarray(labels, float)
    n, k = labels.shape
    cluster = plurality_cluster(labels)
    decided = np.isfinite(cluster)
    rng = np.random.default_rng(seed)
    runs = [np.asarray(orders)] if orders is not None else (
        np.array([rng.permutation(k) for _ in range(n)]) for _ in range(n_sim)
    )  # fmt: skip
    calls, recovered = [], []
    for order in runs:
        used = np.zeros(n)
        hit = np.zeros(n, bool)
        for i in range(n):
            counts: dict[float, int] = {}
            first: dict[float, int] = {}
            for t, w in enumerate(order[i], start=1):
                lab = labels[i, w]
                counts[lab] = counts.get(lab, 0) + 1
                first.setdefault(lab, t)
                if t == k or stop_reason(counts, k, RULES[rule], confidence) is not None:
                    break
            used[i] = t
            top = max(counts, key=lambda c: (counts[c], -first[c]))
            hit[i] = decided[i] and top == cluster[i]
        calls.append(used.mean())
        recovered.append(hit[decided].mean() if decided.any() else math.nan)
    calls_a, rec_a = np.array(calls), np.array(recovered)
    return {
        "rule": rule,
        "confidence": confidence if RULES[rule] != "paper_3of5" else math.nan,
        "n_items": n,
        "n_wordings": k,
        "items_with_cluster": int(decided.sum()),
        "mean_calls": float(calls_a.mean()),
        "calls": float(calls_a.mean() * n),
        "saving": float(1 - calls_a.mean() / k),
        "recovered": float(np.nanmean(rec_a)) if decided.any() else math.nan,
        "recovered_lo": float(np.nanpercentile(rec_a, 2.5)) if decided.any() else math.nan,
        "recovered_hi": float(np.nanpercentile(rec_a, 97.5)) if decided.any() else math.nan,
        "n_sim": len(calls),
    }
