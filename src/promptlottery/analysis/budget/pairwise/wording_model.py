"""The PromptEval-style wording model (:mod:`.wording_model`) on a pairwise grid, full or sparse.

The cell (ours): a (pair, wording), its outcome whether the **two-order verdict** (the common verdict
of orders 12 and 21, inconsistent = tie: the pairwise section's order-resolved verdict) equals the
human preference, pairs whose human label is a tie or missing left out: the section's
``human_agreement`` per wording, so the model's per-wording agreement estimates the figure the
section and the sparse estimates (``human_agreement/<wording>``) report. Without a human preference
on any pair the outcome is agreement with the pair's plurality two-order verdict over its judged
wordings (as the pointwise path without ``analysis.human_range``). Why not per-order cells: a single
order's verdict carries the position bias into the outcome (the judge that always prefers the answer
shown first agrees with the humans on half of the single orders but never on the two-order verdict),
and per-order agreement is not the headline. The price: a (pair, wording) cell is observed only when
the plan judged **both** orders, so a plan over (wording, order) cells feeds the model ``P(both)`` of
its spread pairs (the simulator's plans are :func:`~promptlottery.metrics.sparse_pairwise.pairwise_plan`
random cells at each budget: what a sparse pairwise sweep judges).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.wording_model import agreement_matrix
from promptlottery.analysis.budget.wording_model_report import (
    covariates_of,
    group_of_rows,
    model_full_rows,
    model_sparse_summaries,
    wording_model_section,
    wording_sparse_lines,
)
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import sparse_pairwise as spp
from promptlottery.tracking.tables import write_table

__all__ = [
    "pairwise_agreement",
    "pairwise_model_full",
    "pairwise_model_sparse",
    "write_model_full",
    "write_model_sparse",
]

_CODES = {"1": 0.0, "2": 1.0, "tie": 2.0}


def pairwise_agreement(first: Any, second: Any, human: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """Pairs x wordings: 1 where the two-order verdict agrees, 0 where not, NaN where either order has
    no verdict; the pairs kept (a boolean per pair) and the outcome's name.

    >>> agree, kept, _ = pairwise_agreement([["1", "1"], ["1", "2"]], [["1", "2"], ["2", "2"]], ["1", "2"])
    >>> agree.tolist(), kept.tolist()  # pair 0: P1 agrees, P2 inconsistent (a tie); pair 1: P1 a tie, P2 agrees
    ([[1.0, 0.0], [0.0, 1.0]], [True, True])
    """
    v = spp.two_order(first, second)
    h = np.array([None if x is None or x != x else str(x) for x in human], dtype=object)
    if len(h) != len(v):
        raise ValueError(f"human must hold one preference per pair ({len(v)}), got {len(h)}")
    bad = sorted({x for x in h if x is not None and x not in _CODES})
    if bad:
        raise ValueError(f"a human preference must be '1', '2' or 'tie', got {bad[:3]}")
    seen = v != None  # noqa: E711 - elementwise on an object array
    kept = np.array([x in ("1", "2") for x in h])
    if kept.any():
        agree = np.where(seen, (v == h[:, None]).astype(float), np.nan)
        outcome = (
            "two-order verdict (inconsistent = tie) == the human preference (pairs with a human tie or none "
            "left out)"
        )
        return agree[kept], kept, outcome
    codes = np.vectorize(lambda x: _CODES.get(x, np.nan) if x is not None else np.nan, otypes=[float])(v)
    agree, _ = agreement_matrix(codes)
    return agree, np.ones(len(v), dtype=bool), "two-order verdict == the pair's plurality two-order verdict"


def _checked(cid: str, agree: np.ndarray, kept: np.ndarray) -> None:
    if len(agree) < 4:
        raise AnalysisError(
            f"analysis.model_ranks: {cid} has {len(agree)} pairs with a usable outcome ({int((~kept).sum())} "
            "left out for a human tie or none): the wording model needs >= 4 (2 validation, 2 reported)"
        )
    if agree.shape[1] < 2:
        raise AnalysisError(
            f"analysis.model_ranks: {cid} has {agree.shape[1]} wording (the model needs >= 2)"
        )


def pairwise_model_full(cid: str, rows: pd.DataFrame, first, second, human, pairs, wordings, opts, orders):
    """On a full pairwise grid: the simulation's rows (plans of ``pairwise_plan`` random cells at each
    budget; a cell is observed when both of its orders, the mode's ``orders``, are) and the full grid's own
    estimate."""
    agree, kept, outcome = pairwise_agreement(first, second, human)
    _checked(cid, agree, kept)
    kept_pairs = [p for p, k in zip(pairs, kept) if k]
    x, what = covariates_of(cid, group_of_rows(rows), wordings, opts)

    def mask_of(budget: float, seed: int) -> tuple[np.ndarray, float]:
        plan = spp.pairwise_plan(kept_pairs, wordings, orders=orders, budget=budget, seed=seed)
        col = {c: j for j, c in enumerate(plan.variants)}
        both = np.column_stack(
            [
                plan.mask[:, col[spp.cell(w, orders[0])]] & plan.mask[:, col[spp.cell(w, orders[1])]]
                for w in wordings
            ]
        )
        return both, plan.share

    table, summary = model_full_rows(
        cid, agree, kept_pairs, wordings, x, what, outcome, opts, mask_of=mask_of
    )
    summary["n_left_out"] = int((~kept).sum())
    return table, summary


def pairwise_model_sparse(cid: str, rows: pd.DataFrame, first, second, human, wordings, plan, opts):
    """On a sparse pairwise grid: per rank of ``analysis.model_ranks`` each wording's agreement (observed
    cells as judged, the rest predicted) and its quantiles over the wordings, as the pointwise path."""
    agree, kept, outcome = pairwise_agreement(first, second, human)
    _checked(cid, agree, kept)
    x, what = covariates_of(cid, group_of_rows(rows), wordings, opts)
    out = model_sparse_summaries(cid, agree, wordings, x, what, outcome, (plan.n_calls, plan.share), opts)
    return [{**s, "n_left_out": int((~kept).sum())} for s in out]


def write_model_full(tables: list[pd.DataFrame], summaries: list[dict], out: Path) -> list[str]:
    """Write ``tables/wording_model.csv`` and ``tables/wording_model_full.json``; the report's lines."""
    if not tables:
        return []
    model = pd.concat(tables, ignore_index=True)
    write_table(model, out / "tables", "wording_model", float_format="%.6g")
    (out / "tables" / "wording_model_full.json").write_text(json.dumps(summaries, indent=1), encoding="utf-8")
    return ["", *wording_model_section(model, summaries)]


def write_model_sparse(summaries: list[dict], out: Path) -> list[str]:
    """Write ``tables/wording_model_sparse.json``; the report's lines."""
    if not summaries:
        return []
    (out / "tables" / "wording_model_sparse.json").write_text(
        json.dumps(summaries, indent=1), encoding="utf-8"
    )
    return wording_sparse_lines(summaries)
