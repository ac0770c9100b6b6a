"""``+analysis=budget`` on a pairwise sparse grid (``judge.design=sparse`` with a pairwise judge).

Each configuration's plan is rebuilt from its rows (:func:`promptlottery.metrics.sparse_pairwise.
pairwise_plan` over the (wording, order) cells) and every planned cell checked present; then the
pairwise section's measures are estimated with inverse-probability weights: ``position_consistency``
(overall and per wording) and ``pairwise_kappa`` (Fleiss' kappa of the two-order verdict across the
wordings, inconsistent = tie: the section's ``pairwise_paraphrase_kappa``). Intervals: pairs resampled
with the cells each drew (``lo`` / ``hi``); ``full_lo`` / ``full_hi`` narrowed by ``sqrt(1 - calls
share)`` for the full grid's value on these pairs (ours, as for the pointwise estimates). The pairs
are resampled one by one, not by their ``cluster_id`` as the lottery report's section does (ours: the
cluster bootstrap of a sparse plan is missing).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget import _percentiles, _weights
from promptlottery.analysis.design_rows import design_items, one_design
from promptlottery.analysis.sections.pairwise import pair_table
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import sparse as sp
from promptlottery.metrics import sparse_pairwise as spp
from promptlottery.tracking.tables import markdown_table, write_table

__all__ = ["estimate_pairwise_sparse", "run_sparse_pairwise"]

PARAMS = [
    "design_budget",
    "design_anchor",
    "design_full_share",
    "design_seed",
    "design_items",
    "design_wordings",
]


def _plan_of(cid: str, rows: pd.DataFrame):
    p = one_design(cid, rows, PARAMS, "sparse plans")
    wordings = str(p["design_wordings"]).split(",")
    items = design_items(
        cid,
        rows,
        p,
        "pairs have no judgment (a job failed or was killed): re-run the sweep to complete the plan",
    )
    plan = spp.pairwise_plan(
        items, wordings, budget=float(p["design_budget"]), anchor=p["design_anchor"] or None,
        full_share=float(p["design_full_share"]), seed=int(p["design_seed"]),
    )  # fmt: skip
    judged = {
        (str(i), spp.cell(str(v), str(o))) for i, v, o in zip(rows["item_id"], rows["variant"], rows["order"])
    }
    planned = {(i, c) for i, c, _ in plan.cells()}
    if planned - judged:
        raise AnalysisError(
            f"{cid}: {len(planned - judged)} planned cell(s) have no judgment (a job failed or was killed): "
            "re-run the sweep to complete the plan"
        )
    if judged - planned:
        raise AnalysisError(f"{cid}: judgments outside the sparse plan (mixed runs?)")
    return plan, wordings, items


def estimate_pairwise_sparse(first, second, plan, wordings, *, n_resamples: int, level: float, seed: int):
    """One row per statistic (and wording): the estimate and its intervals, as ``estimate_sparse``."""
    both, four = spp.pair_probabilities(plan, wordings)
    r = _weights(len(plan.items), n_resamples, seed)
    cons = spp.consistency_parts(first, second, both)
    est = {
        ("position_consistency", ""): spp.consistency_batch(cons, r),
        ("pairwise_kappa", ""): sp.fleiss_batch(spp.kappa_parts(first, second, both, four), r),
    }
    per = spp.consistency_batch(cons, r, per_wording=True)
    est |= {("position_consistency", w): per[:, j] for j, w in enumerate(wordings)}
    fpc = math.sqrt(max(0.0, 1.0 - plan.share))
    out = []
    for (stat, wording), dist in est.items():
        e = float(dist[0])
        lo, hi = _percentiles(dist[1:], level)
        out.append(
            {"statistic": stat, "wording": wording, "estimate": e, "lo": lo, "hi": hi,
             "full_lo": e - fpc * (e - lo), "full_hi": e + fpc * (hi - e),
             "n_undefined": int(np.isnan(dist[1:]).sum())}
        )  # fmt: skip
    return pd.DataFrame(out)


def run_sparse_pairwise(opts, grid, job) -> dict[str, Any]:
    tables = []
    for cid, rows in sorted(grid.pairwise.items()):
        plan, wordings, items = _plan_of(cid, rows)
        pt = pair_table(rows, verdict=opts.verdict, reference=opts.reference)
        mats = [
            pt.pivot(index="item_id", columns="variant", values=col).reindex(index=items, columns=wordings)
            for col in ("first", "second")
        ]
        first, second = (m.astype(object).where(m.notna(), None).to_numpy(object) for m in mats)
        est = estimate_pairwise_sparse(
            first, second, plan, wordings, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed
        )
        tables.append(
            est.assign(config_id=cid, n_pairs=len(items), calls=plan.n_calls, calls_share=plan.share)
        )
    table = pd.concat(tables, ignore_index=True)
    out = Path(job.output_dir)
    write_table(table, out / "tables", "sparse_pairwise_estimates", float_format="%.6g")
    cols = ("config_id", "n_pairs", "calls", "calls_share", "statistic", "wording", "estimate", "lo", "hi",
            "full_lo", "full_hi", "n_undefined")  # fmt: skip
    text = [
        "# Estimates from a pairwise sparse grid",
        "",
        f"Runs: `{opts.runs}`; verdict: {opts.verdict} preference. Cells: (wording, order) of each pair; each "
        "configuration's plan is rebuilt from its rows and every planned cell checked present. "
        "`position_consistency`: share of (pair, wording) with the same verdict in both orders, weighted by "
        "1 / P(both orders); `pairwise_kappa`: Fleiss' kappa of the two-order verdict (inconsistent = tie) "
        "across wordings, rating pairs weighted by 1 / P(all four cells). `lo`/`hi`: pairs resampled with "
        f"their cells ({opts.n_resamples} resamples, level {opts.level}); `full_lo`/`full_hi`: narrowed by "
        "sqrt(1 - calls share) (ours). Estimators: docs/sparse.md.",
        "",
        markdown_table(table, {c: c for c in cols}),
    ]
    (out / "budget.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    metrics = {
        f"sparse_pairwise/{r.config_id}/{r.statistic}"
        + (f"/{r.wording}" if r.wording else "")
        + suffix: float(v)
        for r in table.itertuples(index=False)
        for suffix, v in (("", r.estimate), ("_lo", r.lo), ("_hi", r.hi))
        if np.isfinite(v)
    }
    return job.ok(analysis=asdict(opts), metrics=metrics, report=str(out / "budget.md"))
