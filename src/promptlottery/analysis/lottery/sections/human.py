"""The lottery report's human-baseline section: human agreement within one wording and across
wordings beside the judge's, from ``analysis.human_ratings`` (a ratings file) or
``analysis.human_raters`` (the datasets' own raters); rendered by
:func:`~promptlottery.analysis.common.human_baseline.render_human_section`, which ``human_report.md`` shares."""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.common.human_baseline import TABLES, render_human_section
from promptlottery.analysis.lottery.sections.base import ReportContext, Section


def _wanted(opts) -> bool:
    return bool(opts.human_ratings or opts.human_raters)


class HumanSection(Section):
    """The human baseline under rewording, beside the judge's (``analysis.human_ratings`` /
    ``analysis.human_raters``); nothing without them."""

    name = "human"
    mode = None  # the label matrix
    tables = TABLES

    def active(self, grid, opts) -> bool:
        return bool(len(grid)) and _wanted(opts)

    def compute(self, grid, opts, *, checked=None, encode=None) -> dict[str, Any]:
        from promptlottery.human.analysis import human_tables_for_report

        return {"tables": human_tables_for_report(grid.judgments, opts)}

    def metrics(self, tables: dict[str, pd.DataFrame]) -> dict[str, float]:
        if not any(name in tables for name in TABLES):
            return {}
        from promptlottery.human.analysis import human_metrics

        return human_metrics(tables)

    def render(self, R: rp.Report, ctx: ReportContext) -> None:
        if _wanted(ctx.opts):
            render_human_section(R, ctx.tables, level=ctx.opts.level, verdict=ctx.opts.verdict)
