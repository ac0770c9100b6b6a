"""``+analysis=budget`` on a pairwise sparse grid (``judge.design=sparse`` with a pairwise judge).

Each configuration's plan is rebuilt from its rows (:func:`promptlottery.metrics.sparse_pairwise.
pairwise_plan` over the (wording, order) cells) and every planned cell checked present; then the
pairwise section's measures are estimated with inverse-probability weights: ``position_consistency``
(overall and per wording) and ``pairwise_kappa`` (Fleiss' kappa of the two-order verdict across the
wordings, inconsistent = tie: the section's ``pairwise_paraphrase_kappa``). Intervals: pairs resampled
with the cells each drew (``lo`` / ``hi``); ``full_lo`` / ``full_hi`` narrowed by ``sqrt(1 - calls
share)`` for the full grid's value on these pairs (ours, as for the pointwise estimates). Where the
pairs' ``cluster_id`` puts two or more pairs in one cluster (the pairs of one instruction or question)
the clusters are resampled, each with its pairs and their cells, as the lottery report's pairwise
section does; otherwise the pairs one by one (:func:`~.simulation.pair_weights`; the
``resampled`` column says which).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.design_rows import design_items, one_design
from promptlottery.analysis.budget.simulation import percentile_bounds
from promptlottery.analysis.common.pairwise.pairs import pair_table
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import sparse as sp
from promptlottery.metrics import sparse_pairwise as spp
from promptlottery.tracking.staging import staged_outputs
from promptlottery.tracking.tables import left_out_lines, markdown_table, write_table

__all__ = ["estimate_pairwise_sparse", "run_pairwise_budget", "run_sparse_pairwise"]

PARAMS = [
    "design_budget",
    "design_anchor",
    "design_full_share",
    "design_seed",
    "design_items",
    "design_wordings",
]


def _plan_of(cid: str, rows: pd.DataFrame, orders: tuple[str, ...]):
    p = one_design(cid, rows, PARAMS, "sparse plans")
    wordings = str(p["design_wordings"]).split(",")
    items = design_items(
        cid,
        rows,
        p,
        "pairs have no judgment (a job failed or was killed): re-run the sweep to complete the plan",
    )
    plan = spp.pairwise_plan(
        items, wordings, orders=orders, budget=float(p["design_budget"]), anchor=p["design_anchor"] or None,
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


def estimate_pairwise_sparse(
    first, second, plan, wordings, *, n_resamples: int, level: float, seed: int, human=None, system_1=None,
    system_2=None, clusters=None,
):  # fmt: skip
    """One row per statistic (and wording, and system): the estimate and its intervals, as
    ``estimate_sparse``; with ``human`` (per pair) each wording's human agreement, with the systems
    (per pair) each wording's win rates (:func:`~.simulation.pairwise_estimates`). The
    intervals resample the ``clusters`` (per pair, its ``cluster_id``) where one holds two pairs or
    more, else the pairs (:func:`~.simulation.pair_weights`): the ``resampled`` column."""
    from promptlottery.analysis.budget.pairwise.simulation import pair_weights, pairwise_estimates

    both, four = spp.pair_probabilities(plan, wordings)
    r, resampled = pair_weights(clusters, len(plan.items), n_resamples, seed)
    cons = spp.consistency_parts(first, second, both)
    est = {
        ("position_consistency", "", ""): spp.consistency_batch(cons, r),
        ("pairwise_kappa", "", ""): sp.fleiss_batch(spp.kappa_parts(first, second, both, four), r),
    }
    per = spp.consistency_batch(cons, r, per_wording=True)
    est |= {("position_consistency", w, ""): per[:, j] for j, w in enumerate(wordings)}
    n = len(plan.items)
    more = pairwise_estimates(
        first, second, [None] * n if human is None else list(human), [None] * n if system_1 is None else system_1,
        [None] * n if system_2 is None else system_2, plan, wordings, r,
    )  # fmt: skip
    for name, dist in more.items():
        if name.split("/")[0] in ("position_consistency", "pairwise_kappa"):
            continue
        stat, wording, system = (*name.split("/", 2), "", "")[:3]
        est[(stat, wording, system)] = dist
    fpc = math.sqrt(max(0.0, 1.0 - plan.share))
    out = []
    for (stat, wording, system), dist in est.items():
        e = float(dist[0])
        lo, hi = percentile_bounds(dist[1:], level)
        out.append(
            {"statistic": stat, "wording": wording, "system": system, "estimate": e, "lo": lo, "hi": hi,
             "full_lo": e - fpc * (e - lo), "full_hi": e + fpc * (hi - e),
             "n_undefined": int(np.isnan(dist[1:]).sum()), "resampled": resampled}
        )  # fmt: skip
    return _with_bt_ranks(pd.DataFrame(out))


def _with_bt_ranks(table: pd.DataFrame) -> pd.DataFrame:
    """``rank`` of each ``bradley_terry`` row: 1 + the ranked systems with a strictly higher estimated
    strength under the same wording (the wording's Bradley-Terry ranking); NaN on the other rows."""
    bt = table["statistic"] == "bradley_terry"
    ranks = table[bt].groupby("wording")["estimate"].rank(method="min", ascending=False)
    return table.assign(rank=ranks.reindex(table.index))


def run_sparse_pairwise(opts, grid, job, mode) -> dict[str, Any]:
    from promptlottery.analysis.budget.pairwise.wording_model import pairwise_model_sparse, write_model_sparse

    tables, models = [], []
    for cid, rows in sorted(grid.rows(mode.name).items()):
        plan, wordings, items = _plan_of(cid, rows, mode.orders)
        pt = pair_table(rows, verdict=opts.verdict, reference=opts.reference)
        mats = [
            pt.pivot(index="item_id", columns="variant", values=col).reindex(index=items, columns=wordings)
            for col in ("first", "second")
        ]
        first, second = (m.astype(object).where(m.notna(), None).to_numpy(object) for m in mats)
        meta = pt.drop_duplicates("item_id").set_index("item_id").reindex(items)
        human, s1, s2, clusters = (
            [None if pd.isna(v) else str(v) for v in meta[c]]
            for c in ("human", "system_1", "system_2", "cluster_id")
        )
        est = estimate_pairwise_sparse(
            first, second, plan, wordings, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed,
            human=human, system_1=s1, system_2=s2, clusters=clusters,
        )  # fmt: skip
        tables.append(
            est.assign(config_id=cid, n_pairs=len(items), calls=plan.n_calls, calls_share=plan.share)
        )
        if opts.model_ranks:
            models += pairwise_model_sparse(cid, rows, first, second, human, wordings, plan, opts)
    table = pd.concat(tables, ignore_index=True)
    with staged_outputs(job.output_dir) as out:  # the one writer: staged, then published together
        write_table(table, out / "tables", "sparse_pairwise_estimates", float_format="%.6g")
        cols = ("config_id", "n_pairs", "calls", "calls_share", "statistic", "wording", "system", "rank", "estimate",
                "lo", "hi", "full_lo", "full_hi", "n_undefined", "resampled")  # fmt: skip
        text = [
            "# Estimates from a pairwise sparse grid",
            "",
            f"Runs: `{opts.runs}`; verdict: {opts.verdict} preference. Cells: (wording, order) of each pair; each "
            "configuration's plan is rebuilt from its rows and every planned cell checked present. "
            "`position_consistency`: share of (pair, wording) with the same verdict in both orders, weighted by "
            "1 / P(both orders); `pairwise_kappa`: Fleiss' kappa of the two-order verdict (inconsistent = tie) "
            "across wordings, rating pairs weighted by 1 / P(all four cells); `first_position_rate`: single-order "
            "verdicts (ties out) for the answer shown first, each weighted by 1 / P(cell); `human_agreement` "
            "(pooled, and per wording) and `win_rate` (per wording and system, ties half): the two-order verdict, "
            "weighted by 1 / P(both orders) (ratios of Horvitz-Thompson totals); `bradley_terry` (per wording and "
            "system, `rank` its place in the wording's ranking): Bradley-Terry strengths fitted to the two-order "
            "verdicts with each game weighted by 1 / P(both orders) (ours: the Horvitz-Thompson estimate of the "
            "full grid's log-likelihood, maximised), and the rank changes between the wordings' rankings, "
            "`bt_kendall_tau`, `bt_flip_share`, `bt_rank_change_share` (a fixed baseline plays but is not ranked; "
            "every resample refitted). `lo`/`hi`: pairs resampled with "
            f"their cells ({opts.n_resamples} resamples, level {opts.level}), as `resampled` says: `clusters "
            "(cluster_id, K clusters)` where a cluster_id holds two pairs or more (its pairs drawn together, as "
            "the lottery report's pairwise section), else `pairs` one by one; `full_lo`/`full_hi`: narrowed by "
            "sqrt(1 - calls share) (ours). Estimators: docs/sparse.md.",
            "",
            markdown_table(table, {c: c for c in cols}),
            *write_model_sparse(models, out),
        ]
        (out / "budget.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    metrics = {
        f"sparse_pairwise/{r.config_id}/{r.statistic}"
        + (f"/{r.wording}" if r.wording else "")
        + (f"/{r.system}" if r.system else "")
        + suffix: float(v)
        for r in table.itertuples(index=False)
        for suffix, v in (("", r.estimate), ("_lo", r.lo), ("_hi", r.hi))
        if np.isfinite(v)
    }
    return job.ok(analysis=asdict(opts), metrics=metrics, report=str(Path(job.output_dir) / "budget.md"))


# --------------------------------------------------------------------------- a full pairwise grid


def _family(statistic: str) -> str:
    return statistic.split("/", 1)[0]


def _families(budget: pd.DataFrame) -> pd.DataFrame:
    """Per configuration, design, budget and headline family: the members' mean RMSE, share within the
    full CI and coverage, and the lowest member's coverage (``human_agreement`` is its pooled row)."""
    b = budget.assign(
        statistic=budget["statistic"].map(_family), _pooled=~budget["statistic"].str.contains("/")
    )
    b = b[b["_pooled"] | b["statistic"].isin(["win_rate", "bradley_terry"])]
    keys = ["config_id", "n_items", "resampled", "design", "budget", "statistic"]
    return (
        b.groupby(keys, sort=False)
        .agg(calls_share=("calls_share", "mean"), members=("rmse", "size"), full=("full", "mean"),
             mean_estimate=("mean_estimate", "mean"), rmse=("rmse", "mean"),
             within_full_ci=("within_full_ci", "mean"), coverage=("coverage", "mean"),
             lowest_coverage=("coverage", "min"), n_undefined=("n_undefined", "sum"))
        .reset_index()
    )  # fmt: skip


def _full_pairs(pt: pd.DataFrame):
    """The pairs judged in both orders under every wording, as matrices and per-pair columns."""
    wordings = list(dict.fromkeys(pt["variant"]))
    mats = [
        pt.pivot(index="item_id", columns="variant", values=c).reindex(columns=wordings)
        for c in ("first", "second")
    ]
    keep = mats[0].notna().all(axis=1) & mats[1].notna().all(axis=1)
    pairs = list(mats[0].index[keep])
    meta = pt.drop_duplicates("item_id").set_index("item_id").loc[pairs]
    first, second = (m.loc[pairs].astype(object).to_numpy(object) for m in mats)

    def opt(col):
        return [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in meta[col]]

    return wordings, pairs, first, second, opt("human"), opt("system_1"), opt("system_2"), opt("cluster_id")


def run_pairwise_budget(opts, grid, job, mode) -> dict[str, Any]:
    """``+analysis=budget`` on a full pairwise grid: the simulated sparse designs and adaptive stopping."""
    from promptlottery.analysis.budget.pairwise.simulation import (
        simulate_pairwise_adaptive,
        simulate_pairwise_budgets,
    )
    from promptlottery.analysis.budget.pairwise.wording_model import pairwise_model_full, write_model_full
    from promptlottery.analysis.budget.plots import plot_budget

    budget_rows, adaptive_rows, skipped, model_rows, model_summaries = [], [], {}, [], []
    for cid, rows in sorted(grid.rows(mode.name).items()):
        pt = pair_table(rows, verdict=opts.verdict, reference=opts.reference)
        wordings, pairs, first, second, human, s1, s2, clusters = _full_pairs(pt)
        if len(pairs) < opts.min_items or len(wordings) < 2:
            skipped[cid] = f"{len(pairs)} fully judged pairs x {len(wordings)} wordings"
            continue
        table = simulate_pairwise_budgets(
            first, second, human, s1, s2, pairs=pairs, wordings=wordings, reference=opts.reference,
            budgets=[float(b) for b in opts.budgets], designs=opts.designs, n_sim=opts.n_sim,
            n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed, clusters=clusters, orders=mode.orders,
        )  # fmt: skip
        budget_rows.append(table.assign(config_id=cid, n_items=len(pairs)))
        if opts.model_ranks:
            rows_, summary = pairwise_model_full(
                cid, rows, first, second, human, pairs, wordings, opts, mode.orders
            )
            model_rows.append(rows_)
            model_summaries.append(summary)
        runs = [("paper_3of5", 0.95)] + [
            (r, float(c)) for c in opts.confidences for r in ("beta", "dirichlet")
        ]
        for rule, conf in runs:
            rec = simulate_pairwise_adaptive(
                first, second, rule=rule, confidence=conf, n_sim=opts.n_sim, seed=opts.seed
            )
            stop_votes = math.ceil((rec["n_cells"] + 1) / 2) if rule == "paper_3of5" else math.nan
            adaptive_rows.append({"config_id": cid, **rec, "stop_votes": stop_votes})
    if not budget_rows:
        raise AnalysisError(
            f"no pairwise configuration with >= {opts.min_items} fully judged pairs: {skipped}"
        )
    budget = pd.concat(budget_rows, ignore_index=True)
    budget = budget[
        ["config_id", "n_items", *[c for c in budget.columns if c not in ("config_id", "n_items")]]
    ]
    families, adaptive = _families(budget), pd.DataFrame(adaptive_rows)
    with staged_outputs(job.output_dir) as out:  # the one writer: staged, then published together
        write_table(budget, out / "tables", "budget_pairwise", float_format="%.6g")
        write_table(families, out / "tables", "budget_pairwise_families", float_format="%.6g")
        write_table(adaptive, out / "tables", "adaptive_pairwise", float_format="%.6g")
        figure = plot_budget(families, out / "figures" / "budget.png")
        text = _pairwise_report(opts, grid, families, adaptive, skipped, figure, out)
        text += "\n".join(write_model_full(model_rows, model_summaries, out))
        (out / "budget.md").write_text(text + "\n", encoding="utf-8")
    metrics = {
        f"budget_pairwise/{r.config_id}/{r.design}/{r.budget:g}/{r.statistic}/{col}": float(getattr(r, col))
        for r in families.itertuples(index=False)
        for col in ("within_full_ci", "coverage", "rmse")
        if np.isfinite(getattr(r, col))
    }
    for r in adaptive.itertuples(index=False):
        key = f"adaptive_pairwise/{r.config_id}/{r.rule}" + (
            f"_{r.confidence:g}" if r.rule != "paper_3of5" else ""
        )
        metrics[f"{key}/saving"] = float(r.saving)
        if np.isfinite(r.recovered):
            metrics[f"{key}/recovered"] = float(r.recovered)
    return job.ok(
        analysis=asdict(opts), metrics=metrics, skipped_configurations=skipped, report=str(Path(job.output_dir) / "budget.md"),
        judgment_files=[str(Path(f).resolve()) for f in grid.files],
    )  # fmt: skip


def _pairwise_report(opts, grid, families, adaptive, skipped, figure, out: Path) -> str:
    runs = opts.runs if isinstance(opts.runs, str) else ", ".join(map(str, opts.runs))
    fam_cols = ("config_id", "n_items", "resampled", "design", "budget", "calls_share", "statistic", "members",
                "full", "rmse", "within_full_ci", "coverage", "lowest_coverage", "n_undefined")  # fmt: skip
    ad_cols = ("config_id", "rule", "confidence", "stop_votes", "n_items", "n_cells", "items_with_cluster",
               "mean_calls", "saving", "recovered", "recovered_lo", "recovered_hi")  # fmt: skip
    lines = [
        "# The pairwise lottery at a fraction of the calls (simulated on a full pairwise grid)",
        "",
        f"Runs: `{runs}` ({grid.n_judgments} judgments); verdict: {opts.verdict} preference. No model was "
        f"called: every plan masks the full grid's (wording, order) cells. {opts.n_sim} plans per design and "
        f"budget, intervals from {opts.n_resamples} resamples at level {opts.level}, as `resampled` says: "
        "`clusters (cluster_id, K clusters)` where a cluster_id holds two pairs or more (its pairs drawn "
        "together, as the lottery report's pairwise section), else `pairs` one by one.",
        "",
        "Statistics (the pairwise section's, estimated with 1 / inclusion-probability weights): "
        "`position_consistency`, `first_position_rate`, `pairwise_kappa` (two-order verdict, inconsistent = "
        "tie), `human_agreement` (pooled over wordings; per wording in `tables/budget_pairwise.csv`), "
        "`win_rate` and `bradley_terry` (every wording x system; here their means, the lowest member's coverage "
        "beside), `bt_kendall_tau` / `bt_flip_share` / `bt_rank_change_share` (the rank changes between the "
        "wordings' Bradley-Terry rankings, each plan's and resample's strengths refitted with 1 / P(both "
        "orders) weights; ours, docs/sparse.md).",
        "",
        f"![budget]({figure.relative_to(out)})"
        if figure
        else "_no figure: no statistic defined at any budget_",
        "",
        "## Sparse designs",
        "",
        markdown_table(families, {c: c for c in fam_cols}),
        "",
        "## Adaptive stopping over each pair's (wording, order) cells",
        "",
        "Every cell is a vote (`1`, `2`, `tie`); the full decision is the plurality cluster of the 2K "
        "single-order verdicts (at least `stop_votes` = ceil((2K + 1) / 2) of them). `paper_3of5`: stop at "
        "that many votes; `beta` / `dirichlet`: Adaptive-Consistency's posteriors at the confidence. "
        "`mean_calls` of the 2K cells per pair; `recovered`: share of pairs with a cluster whose stopped "
        "plurality is it (2.5-97.5% over the orders).",
        "",
        markdown_table(adaptive, {c: c for c in ad_cols}),
        *left_out_lines(skipped, "too few fully judged pairs or wordings"),
    ]
    return "\n".join(lines) + "\n"
