"""The wording model's penalties, tuned on validation items, and its simulation on a full grid.

The model of :mod:`promptlottery.analysis.budget.wording_model` has two penalties: ``lam`` (item and
wording effects, covariates) and ``lam_rank`` (the interaction). They are **tuned on validation
items only**: :func:`split_items` sets a seeded share of the items aside; :func:`tune_penalties` holds
out a seeded half of each validation item's judged cells (keeping at least one to fit its item
effect), fits every candidate pair on the rest and keeps the pair with the smallest held-out log
loss. Every figure reported is then computed on the **other** items (the reported split), fitted with
the chosen penalties: the items a penalty was chosen on are never the items it is judged on.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np

from promptlottery.analysis.budget.wording_model import QUANTILES, agreement_quantiles, fit_wording_model

__all__ = ["LAM_RANKS", "LAMS", "simulate_wording_model", "split_items", "tune_penalties"]

#: the candidate penalties (``lam``; ``lam_rank`` only at rank >= 1)
LAMS = (0.01, 0.1, 1.0, 10.0)
LAM_RANKS = (0.1, 1.0, 10.0)


def split_items(n: int, validation_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded ``(validation, reported)`` item indices: ``round(share * n)`` items (at least 2) set
    aside for tuning, the rest (at least 2) reported; both sorted."""
    if not 0 < validation_share < 1:
        raise ValueError(f"validation_share must be in (0, 1), got {validation_share!r}")
    n_val = max(2, round(validation_share * n))
    if n - n_val < 2:
        raise ValueError(f"{n} items cannot be split into >= 2 validation and >= 2 reported items")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_val]), np.sort(perm[n_val:])


def _log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def tune_penalties(
    y: Any, covariates: np.ndarray | None = None, *, rank: int = 0, lams=LAMS, lam_ranks=LAM_RANKS, seed: int = 0
) -> dict[str, Any]:  # fmt: skip
    """The penalties with the smallest held-out log loss on these (validation) items' cells.

    ``y``: validation items x wordings (NaN unseen). Per item a seeded half (rounded down) of its
    judged cells is held out, at least one kept. Returns ``lam``, ``lam_rank``, ``losses`` ({(lam,
    lam_rank): loss}) and ``n_heldout``; with no cell to hold out, the defaults (0.1, 1.0) and
    ``tuned=False``."""
    y = np.asarray(y, dtype=float)
    rng = np.random.default_rng(seed)
    fit_y, held = y.copy(), np.zeros(y.shape, dtype=bool)
    for i in range(len(y)):
        seen = np.flatnonzero(np.isfinite(y[i]))
        out = rng.permutation(seen)[: len(seen) // 2]
        held[i, out] = True
        fit_y[i, out] = np.nan
    grid = list(itertools.product(lams, lam_ranks if rank >= 1 else (1.0,)))
    if not held.any() or not np.isfinite(fit_y).any():
        return {"lam": 0.1, "lam_rank": 1.0, "losses": {}, "n_heldout": 0, "tuned": False}
    losses = {}
    for lam, lam_rank in grid:
        fit = fit_wording_model(fit_y, covariates, rank=rank, lam=lam, lam_rank=lam_rank, seed=seed)
        losses[(lam, lam_rank)] = _log_loss(y[held], fit.prob[held])
    # ties, and losses within 1e-9 of each other (the fit's float noise: threaded BLAS sums may differ
    # in the last bits between runs, which flipped lam between 1 and 10 on one grid), go to more penalty
    lam, lam_rank = min(losses, key=lambda key: (round(losses[key], 9), -key[0], -key[1]))
    return {"lam": lam, "lam_rank": lam_rank, "losses": losses, "n_heldout": int(held.sum()), "tuned": True}


def simulate_wording_model(
    agree: np.ndarray,
    covariates: np.ndarray | None,
    *,
    items,
    variants,
    budgets: list[float],
    ranks: tuple[int, ...] = (0, 1),
    n_sim: int = 20,
    n_resamples: int = 20,
    level: float = 0.95,
    seed: int = 0,
    validation_share: float = 0.3,
    mask_of=None,
):
    """On a full 0/1 grid: mask it to ``n_sim`` random-cell plans per budget, tune the penalties on the
    validation items' judged cells, estimate on the reported items the quantiles over wordings of
    per-wording agreement (the model at each rank, and the observed cells' column means without a
    model), and compare with the reported items' full-grid empirical quantiles.

    One row per method, budget and quantile (and ``per_wording_mae``: the mean over wordings of the
    absolute error of a wording's estimated agreement): ``full``, ``mean_estimate``, ``rmse``,
    ``coverage`` (the share of plans whose bootstrap interval, items resampled and refitted, holds
    the full value; the no-model rows have none), ``items`` (the split: ``reported``), ``n_reported``,
    ``n_validation`` and the penalties chosen (``lam``, ``lam_rank``: the most frequent over plans).
    ``mask_of(budget, seed)``: a plan's observed cells (items x wordings) and its share of the calls;
    default: :func:`~promptlottery.metrics.sparse_plans.sparse_plan`'s random cells of this grid (a
    pairwise grid passes its plans over (wording, order) cells, a cell observed when both orders are).
    """
    import pandas as pd

    from promptlottery.metrics.sparse_plans import sparse_plan

    agree = np.asarray(agree, dtype=float)
    if not np.isfinite(agree).all():
        raise ValueError("simulate_wording_model needs a full grid (every item under every wording)")
    val, rep = split_items(len(agree), validation_share, seed)
    full_per = agree[rep].mean(axis=0)
    full_q = np.quantile(full_per, QUANTILES)
    names = [f"q{round(100 * q):02d}" for q in QUANTILES]
    rows = []
    for budget in budgets:
        est = {m: [] for m in [*(f"rank {r}" for r in ranks), "observed"]}
        chosen = {m: [] for m in est}
        for s in range(n_sim):
            if mask_of is None:
                plan = sparse_plan(items, variants, budget=float(budget), seed=seed + 1000 * s + 1)
                mask, share = plan.mask, plan.share
            else:
                mask, share = mask_of(float(budget), seed + 1000 * s + 1)
            y = np.where(mask, agree, np.nan)
            if not np.isfinite(y[rep]).any():  # no reported cell judged (a pairwise plan at a low budget
                # rarely judges both orders of a (pair, wording)): the plan gives no estimate, counted
                empty = (np.full(len(QUANTILES), np.nan),) * 3 + (np.full(agree.shape[1], np.nan), share)
                for m in est:
                    est[m].append(empty)  # no penalty chosen: the plan is not in ``chosen``
                continue
            for r in ranks:
                pen = tune_penalties(y[val], covariates, rank=r, seed=s)
                chosen[f"rank {r}"].append((pen["lam"], pen["lam_rank"] if r else np.nan))
                out = agreement_quantiles(
                    y[rep], covariates, rank=r, n_resamples=n_resamples, level=level, seed=s,
                    lam=pen["lam"], lam_rank=pen["lam_rank"],
                )  # fmt: skip
                est[f"rank {r}"].append((out["quantiles"], out["lo"], out["hi"], out["per_wording"], share))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a wording with no judged cell
                per = np.nanmean(y[rep], axis=0)
            per = np.where(np.isfinite(per), per, np.nanmean(y[rep]))
            nan = np.full(len(QUANTILES), np.nan)
            est["observed"].append((np.quantile(per, QUANTILES), nan, nan, per, share))
            chosen["observed"].append((np.nan, np.nan))
        for method, recs in est.items():
            rows += _method_rows(method, recs, budget, full_q, full_per, names, chosen[method])
    table = pd.DataFrame(rows)
    return table.assign(items="reported", n_reported=len(rep), n_validation=len(val))


def _method_rows(method, recs, budget, full_q, full_per, names, chosen) -> list[dict]:
    share = float(np.mean([r[4] for r in recs]))
    n_empty = sum(not np.isfinite(r[3]).any() for r in recs)
    recs = [r for r in recs if np.isfinite(r[3]).any()]  # plans that judged no reported cell left out
    if not recs:
        nan = np.full((1, len(names)), np.nan)
        recs = [(nan[0], nan[0], nan[0], np.full(len(full_per), np.nan), share)]
    q = np.array([r[0] for r in recs])
    lo, hi = np.array([r[1] for r in recs]), np.array([r[2] for r in recs])
    per = np.array([r[3] for r in recs])
    label = (
        f"ours: PromptEval-style model, {method}"
        if method != "observed"
        else "observed cells' means (no model)"
    )
    lam, lam_rank = max(set(chosen), key=chosen.count) if chosen else (np.nan, np.nan)
    base = {"method": label, "budget": float(budget), "calls_share": share, "lam": lam, "lam_rank": lam_rank,
            "n_plans_without_cells": n_empty}  # fmt: skip
    rows = []
    for j, name in enumerate(names):
        covered = (lo[:, j] <= full_q[j]) & (full_q[j] <= hi[:, j])
        rows.append({
            **base, "statistic": name, "full": float(full_q[j]), "mean_estimate": float(q[:, j].mean()),
            "rmse": float(np.sqrt(((q[:, j] - full_q[j]) ** 2).mean())),
            "coverage": float(covered.mean()) if np.isfinite(lo[:, j]).all() else float("nan"),
        })  # fmt: skip
    mae = np.abs(per - full_per[None, :]).mean(axis=1)
    rows.append({
        **base, "statistic": "per_wording_mae", "full": 0.0, "mean_estimate": float(mae.mean()),
        "rmse": float(np.sqrt((mae**2).mean())), "coverage": float("nan"),
    })  # fmt: skip
    return rows
