"""The per-configuration analyses, run for many configurations in parallel (``analysis.n_jobs``).

Analyses 1, 3, 4's agreement table, 6 and 7a look at one configuration at a time: each worker
runs them on one configuration of the grid (:meth:`~promptlottery.judging.grid.JudgmentGrid.only`,
with the same bootstrap seed), and the tables are rebuilt from the workers' rows in
configuration order, so that they equal -- and are written byte for byte as -- the tables of a
serial run (tested). The analyses that pool configurations (2, 4-5 summaries, 7b, 8, headlines)
run afterwards on the merged tables, as before.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pandas as pd

from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.agreement import agreement_collapse, sort_collapse, variant_agreement
from promptlottery.analysis.lottery.ensembles import aggregation_vs_humans
from promptlottery.analysis.lottery.human_correlation import variant_human_correlation
from promptlottery.analysis.lottery.ranks import rank_reversals
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics import UndefinedMetricWarning

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions


def configuration_tables(grid: JudgmentGrid, opts: LotteryOptions) -> dict[str, Any]:
    """The per-configuration tables of ``grid`` (one or many configurations) and their replicates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        collapse, dists = agreement_collapse(grid, opts, return_distributions=True)
        tables = {
            lt.AGREEMENT_COLLAPSE: collapse,
            lt.VARIANT_HUMAN_CORRELATION: variant_human_correlation(grid, opts),
            lt.VARIANT_AGREEMENT: variant_agreement(grid),
        }
        ranks, rank_dists = rank_reversals(grid, opts, return_distributions=True)
        tables.update({f"rank_{k}": v for k, v in ranks.items()})
        tables[lt.AGGREGATION_VS_HUMANS] = aggregation_vs_humans(grid, opts)
    return {"tables": tables, "distributions": dists, "rank_distributions": rank_dists}


def _rebuild(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """One table from per-configuration tables, built from their rows as the serial run builds it."""
    return pd.DataFrame([rec for p in parts for rec in p.to_dict("records")])


def analyse_configurations(grid: JudgmentGrid, opts: LotteryOptions) -> dict[str, Any]:
    """:func:`configuration_tables` of every configuration, ``opts.n_jobs`` at a time (1: in this process)."""
    if opts.n_jobs == 1:
        return configuration_tables(grid, opts)
    from joblib import Parallel, delayed

    parts = Parallel(n_jobs=opts.n_jobs)(delayed(configuration_tables)(grid.only([c]), opts) for c in grid)
    tables = {name: _rebuild([p["tables"][name] for p in parts]) for name in lt.PER_CONFIGURATION}
    if len(tables[lt.AGREEMENT_COLLAPSE]):
        tables[lt.AGREEMENT_COLLAPSE] = sort_collapse(tables[lt.AGREEMENT_COLLAPSE])
    merged: dict[str, Any] = {"tables": tables, "distributions": {}, "rank_distributions": {}}
    for p in parts:
        merged["distributions"].update(p["distributions"])
        merged["rank_distributions"].update(p["rank_distributions"])
    return merged
