"""The "Pairwise judges" section of the lottery report, on the grid's pairwise judgments."""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.analysis.common.pairwise.pairs import pair_table
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.sections.base import ReportContext, Section
from promptlottery.analysis.lottery.sections.pairwise.names import TABLES, VERDICT
from promptlottery.analysis.lottery.sections.pairwise.report import pairwise_metrics, render_pairwise
from promptlottery.analysis.lottery.sections.pairwise.tables import pairwise_tables
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.modes.pairwise import Pairwise


def _rows(grid: JudgmentGrid) -> pd.DataFrame:
    return pd.concat(list(grid.rows(PairwiseSection.mode).values()), ignore_index=True)


class PairwiseSection(Section):
    """Position bias, the wording lottery of an A-versus-B prompt, human agreement, rankings."""

    name = "pairwise"
    mode = Pairwise.name
    tables = TABLES

    def active(self, grid: JudgmentGrid, opts: LotteryOptions) -> bool:
        return bool(grid.rows(self.mode))

    def check(self, grid: JudgmentGrid, opts: LotteryOptions) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The pairwise rows and their pair table, which raises every one-line contract error
        before the pointwise analyses run."""
        rows = _rows(grid)
        pairs = pair_table(rows, verdict=grid.verdict, reference=grid.reference, temperature=grid.temperature)
        return rows, pairs

    def compute(
        self, grid: JudgmentGrid, opts: LotteryOptions, *, checked=None, encode=None
    ) -> dict[str, Any]:
        rows, pairs = checked if checked is not None else self.check(grid, opts)
        tables = pairwise_tables(
            rows,
            verdict=grid.verdict,
            reference=grid.reference,
            temperature=grid.temperature,
            kappa_interval=opts.kappa_interval,
            pairs=pairs,
            **opts.resampling,
        )
        return {"tables": tables}

    def verdict_rows(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        return tables.get(VERDICT)

    def metrics(self, tables: dict[str, pd.DataFrame]) -> dict[str, float]:
        return pairwise_metrics(tables)

    def render(self, R, ctx: ReportContext) -> None:
        render_pairwise(R, ctx.tables)
