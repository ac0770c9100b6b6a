"""The budget simulator on a full pairwise grid: sparse plans over (wording, order) cells, and adaptive stopping.

Makes no model call. A full pairwise grid judges every pair under every wording in both orders; for
each budget and design (:data:`promptlottery.analysis.budget.simulation.DESIGNS`, planned by
:func:`promptlottery.metrics.sparse_pairwise.pairwise_plan`: the anchor in both orders on every pair)
:func:`simulate_pairwise_budgets` masks it ``n_sim`` times and re-estimates the pairwise section's
headlines with their sparse estimators (inverse-probability weighted, docs/sparse.md):

* ``position_consistency``: the share of (pair, wording) with the same verdict in both orders;
* ``first_position_rate``: the share of single-order verdicts (ties left out) for the answer shown first;
* ``pairwise_kappa``: Fleiss' kappa across wordings of the two-order verdict (inconsistent = tie);
* ``human_agreement`` (pooled over wordings) and ``human_agreement/<wording>``: the two-order
  verdict equals the human preference, human ties left out (the section's ``human_agreement``);
* ``win_rate/<wording>/<system>``: the system's win rate under the wording, ties half;
* ``bradley_terry/<wording>/<system>``: the system's Bradley-Terry strength under the wording, and
  ``bt_kendall_tau``, ``bt_flip_share``, ``bt_rank_change_share``: the rank changes between the
  wordings' Bradley-Terry rankings (:mod:`promptlottery.metrics.sparse_bt`: the fit maximises the
  Horvitz-Thompson estimate of the full grid's log-likelihood; every resample refitted).

Each row compares the estimates with the full grid's value and its 95% interval as
:func:`promptlottery.analysis.budget.simulation.simulate_budgets` does, in the same loop
(:func:`promptlottery.analysis.budget.simulation.simulate_designs`): ``within_full_ci``, ``coverage`` of the
sparse intervals (pairs resampled with their cells, narrowed by ``sqrt(1 - calls share)``), ``rmse``.
Both intervals resample as :func:`pair_weights` decides (the ``resampled`` column): where the pairs'
``cluster_id`` puts two or more pairs in one cluster (the pairs of one instruction or question), the
clusters are drawn with replacement and keep their pairs together, as the lottery report's pairwise
section does; otherwise the pairs one by one.
:func:`simulate_pairwise_adaptive` replays adaptive stopping over each pair's ``2 K`` (wording,
order) cells, each a vote for ``"1"``, ``"2"`` or ``"tie"``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.simulation import (
    DESIGNS,
    bootstrap_weights,
    percentile_bounds,
    simulate_adaptive,
    simulate_designs,
)
from promptlottery.analysis.common.pairwise.ranks import RANK_MEASURES as BT_RANK_MEASURES
from promptlottery.analysis.common.pairwise.ranks import fixed_baseline
from promptlottery.metrics import sparse as sp
from promptlottery.metrics import sparse_pairwise as spp
from promptlottery.metrics.cluster_bootstrap import cluster_codes, cluster_weights
from promptlottery.metrics.sparse_bt import bt_batch, bt_parts, bt_rank_changes
from promptlottery.metrics.sparse_shares import share_batch, win_rate_batch, win_rate_parts

__all__ = ["PAIRWISE_STATISTICS", "bt_estimates", "pair_weights", "pairwise_cells", "pairwise_estimates",
           "simulate_pairwise_adaptive", "simulate_pairwise_budgets"]  # fmt: skip

#: the headline families (a family's members carry ``/<wording>`` and ``/<system>``)
PAIRWISE_STATISTICS = (
    "position_consistency", "first_position_rate", "pairwise_kappa", "human_agreement", "win_rate",
    "bradley_terry", "bt_kendall_tau", "bt_flip_share", "bt_rank_change_share",
)  # fmt: skip
_CODES = {"1": 0.0, "2": 1.0, "tie": 2.0}


def pair_weights(clusters, n: int, n_resamples: int, seed: int) -> tuple[np.ndarray, str]:
    """``1 + n_resamples`` rows of weights for ``n`` pairs (row 0: the sample itself) and what they
    resample. ``clusters`` (one ``cluster_id`` per pair; None: none, a missing id: its own cluster)
    with a cluster of two pairs or more: the cluster bootstrap
    (:func:`~promptlottery.metrics.cluster_bootstrap.cluster_weights`),
    ``"clusters (cluster_id, K clusters)"``; otherwise the pairs one by one, unchanged
    (:func:`~promptlottery.analysis.budget.simulation.bootstrap_weights`), ``"pairs"``."""
    if clusters is not None:
        clusters = list(clusters)
        if len(clusters) != n:
            raise ValueError(f"clusters: {len(clusters)} cluster ids for {n} pairs")
        k = int(cluster_codes(clusters).max(initial=-1)) + 1
        if k < n:
            weights = cluster_weights(clusters, n_resamples, seed=seed)
            return np.vstack([np.ones(n), weights]), f"clusters (cluster_id, {k} clusters)"
    return bootstrap_weights(n, n_resamples, seed), "pairs"


def _orders(plan, wordings: list[str]) -> tuple[list[int], list[int]]:
    col = {c: j for j, c in enumerate(plan.variants)}
    first, second = spp.plan_orders(plan)
    return [col[spp.cell(w, first)] for w in wordings], [col[spp.cell(w, second)] for w in wordings]


def pairwise_estimates(first, second, human, system_1, system_2, plan, wordings, r) -> dict[str, np.ndarray]:
    """Every headline under each row of pair weights ``r`` (row 0: the estimate), from the judged cells
    of ``first`` / ``second`` (pairs x wordings, orders 12 / 21 in the pair's terms; None: not judged)."""
    both, four = spp.pair_probabilities(plan, wordings)
    c12, c21 = _orders(plan, wordings)
    out: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out["position_consistency"] = spp.consistency_batch(spp.consistency_parts(first, second, both), r)
        fp = spp.first_position_parts(first, second, plan.prob[:, c12], plan.prob[:, c21])
        out["first_position_rate"] = share_batch(fp, r, pooled=True)
        out["pairwise_kappa"] = sp.fleiss_batch(spp.kappa_parts(first, second, both, four), r)
        if any(h is not None for h in human):
            ha = spp.human_agreement_parts(first, second, human, both)
            out["human_agreement"] = share_batch(ha, r, pooled=True)
            per = share_batch(ha, r)
            out |= {f"human_agreement/{w}": per[:, j] for j, w in enumerate(wordings)}
        points = spp.game_points(first, second)
        parts = win_rate_parts(points, both, system_1, system_2)
        if parts[2]:
            wr = win_rate_batch(parts, r)
            out |= {
                f"win_rate/{w}/{s}": wr[:, si, j]
                for j, w in enumerate(wordings)
                for si, s in enumerate(parts[2])
            }
            out |= bt_estimates(points, both, system_1, system_2, wordings, r)
    return out


def bt_estimates(points, both, system_1, system_2, wordings, r) -> dict[str, np.ndarray]:
    """``bradley_terry/<wording>/<system>`` (each wording's strengths, refitted under every row of pair
    weights ``r``: :mod:`promptlottery.metrics.sparse_bt`) and the rank changes between the wordings'
    strengths, ``bt_kendall_tau``, ``bt_flip_share``, ``bt_rank_change_share``, over the ranked systems
    (a fixed baseline in every game plays but is not ranked, as the pairwise section's rank flips)."""
    parts = bt_parts(points, both, system_1, system_2)
    names = parts[1]
    if len(names) < 2:
        return {}
    games = [(a, b) for a, b in zip(system_1, system_2) if a is not None and b is not None]
    baseline = fixed_baseline(*zip(*games))
    ranked = [k for k, name in enumerate(names) if name != baseline]
    x = bt_batch(parts, r)
    out = {f"bradley_terry/{w}/{names[k]}": x[:, k, j] for j, w in enumerate(wordings) for k in ranked}
    if len(ranked) >= 2 and len(wordings) >= 2:
        changes = bt_rank_changes(x, ranked)
        out |= {f"bt_{m}": changes[:, c] for c, m in enumerate(BT_RANK_MEASURES)}
    return out


def _pairwise_plan(design, pairs, wordings, budget: float, seed: int, reference: str, orders):
    return spp.pairwise_plan(
        pairs, wordings, orders=orders, budget=budget, anchor=reference if design.anchor else None,
        full_share=design.full_of_budget * budget, seed=seed,
    )  # fmt: skip


def _masked(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, x, None).astype(object)


def simulate_pairwise_budgets(
    first, second, human, system_1, system_2, *, pairs: Iterable[str], wordings: Iterable[str],
    reference: str, budgets: Iterable[float] = (0.1, 0.2, 0.3, 0.5, 0.8),
    designs: Iterable[str] = tuple(DESIGNS), n_sim: int = 200, n_resamples: int = 200, level: float = 0.95,
    seed: int = 0, clusters: Iterable | None = None, orders: tuple[str, ...],
) -> pd.DataFrame:  # fmt: skip
    """One row per (design, budget, statistic): the full value and CI, the sparse estimates' summary,
    and ``resampled`` (what the intervals resample: :func:`pair_weights` of ``clusters``); ``orders``:
    the judge mode's two orders (``JudgeMode.orders``), the first the one ``first`` holds.

    ``first`` / ``second``: pairs x wordings, complete (every pair judged in both orders under every
    wording); ``human``: per pair (None: none); ``system_1`` / ``system_2``: per pair (None: none);
    ``clusters``: per pair, its ``cluster_id`` (None: every pair its own cluster)."""
    first, second = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    pairs, wordings = [str(p) for p in pairs], [str(w) for w in wordings]
    human = list(human)
    n = len(pairs)
    clusters = None if clusters is None else list(clusters)
    full_weights, resampled = pair_weights(clusters, n, n_resamples, seed)
    full_plan = spp.pairwise_plan(pairs, wordings, orders=orders, budget=1.0)
    full_est = pairwise_estimates(first, second, human, system_1, system_2, full_plan, wordings, full_weights)
    full = {s: float(v[0]) for s, v in full_est.items() if np.isfinite(v[0])}
    full_ci = {s: percentile_bounds(full_est[s][1:], level) for s in full}

    def plan_of(design, budget: float, plan_seed: int):
        return _pairwise_plan(design, pairs, wordings, budget, plan_seed, reference, orders)

    def estimates_of(plan, weights: np.ndarray) -> dict[str, np.ndarray]:
        c12, c21 = _orders(plan, wordings)
        return pairwise_estimates(
            _masked(first, plan.mask[:, c12]), _masked(second, plan.mask[:, c21]), human, system_1, system_2,
            plan, wordings, weights,
        )  # fmt: skip

    rows = simulate_designs(
        plan_of, estimates_of, full, full_ci, n=n, budgets=budgets, designs=designs, n_sim=n_sim,
        n_resamples=n_resamples, level=level, seed=seed,
        weights_of=lambda s: pair_weights(clusters, n, n_resamples, s)[0],
    )  # fmt: skip
    return pd.DataFrame(rows).assign(resampled=resampled)


def pairwise_cells(first, second) -> np.ndarray:
    """Pairs x ``2 K`` cells (``<wording>:12``, ``<wording>:21`` per wording, the plan's order): each
    single-order verdict as a code (``"1"`` 0, ``"2"`` 1, ``"tie"`` 2; NaN: none)."""
    first, second = np.asarray(first, dtype=object), np.asarray(second, dtype=object)
    n, k = first.shape
    out = np.full((n, 2 * k), np.nan)
    for j in range(k):
        for col, m in ((2 * j, first), (2 * j + 1, second)):
            out[:, col] = [_CODES.get(str(v), np.nan) if v is not None else np.nan for v in m[:, j]]
    return out


def simulate_pairwise_adaptive(
    first, second, *, rule: str = "beta", confidence: float = 0.95, n_sim: int = 200, seed: int = 0,
    orders: np.ndarray | None = None,
) -> dict[str, float]:  # fmt: skip
    """Adaptive stopping per pair over its (wording, order) cells, each a vote, against all ``2 K``.

    The full decision is the plurality cluster of the ``2 K`` single-order verdicts (a preference given
    by at least ``ceil((2 K + 1) / 2)`` of them: the section's "plurality cluster of the wordings x
    orders"); ``paper_3of5`` stops once a preference has that many votes. Pairs with a cell without a
    verdict are left out (``n_items`` counts the rest). ``orders``: pairs x cells, cell indices."""
    cells = pairwise_cells(first, second)
    keep = np.isfinite(cells).all(axis=1)
    extra = {"n_cells": cells.shape[1], "n_wordings": cells.shape[1] // 2, "n_left_out": int((~keep).sum())}
    if not keep.any():
        raise ValueError(f"no pair has a verdict in every one of its {cells.shape[1]} cells")
    if orders is not None:
        orders = np.asarray(orders)[keep]
    rec = simulate_adaptive(
        cells[keep], rule=rule, confidence=confidence, n_sim=n_sim, seed=seed, orders=orders
    )
    return {**rec, **extra}
