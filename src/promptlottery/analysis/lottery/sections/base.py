"""What a section of the lottery report is: the judge mode whose rows it reads, the tables it
builds (their names declared once), its headline numbers for ``results.json`` and its part of
report.md. :func:`~promptlottery.analysis.lottery.analyse.analyse`, :func:`~promptlottery.analysis.stage.summary_metrics`
and :func:`~promptlottery.analysis.lottery.render.render_report` loop over
:data:`promptlottery.analysis.lottery.sections.SECTIONS` and name none of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from promptlottery.modes import MODES

if TYPE_CHECKING:
    from promptlottery.analysis.common import report as rp
    from promptlottery.analysis.lottery.options import LotteryOptions
    from promptlottery.judging.grid import JudgmentGrid


@dataclass(frozen=True)
class ReportContext:
    """What a section's rendering may read: the analysis result, the grid, the options, where the
    report is written, the figures drawn and the judgment files read."""

    result: dict[str, Any]
    grid: JudgmentGrid
    opts: LotteryOptions
    out_dir: Path
    figures: dict[str, Any]
    files: list[str]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.result["tables"]


class Section:
    """One section of the lottery report. Subclasses set :attr:`name`, :attr:`mode` and
    :attr:`tables` and implement :meth:`compute`, :meth:`metrics` and :meth:`render`."""

    #: the section's name (its key in :data:`~promptlottery.analysis.lottery.sections.SECTIONS`)
    name: ClassVar[str]
    #: the judge mode whose judgments it reads (``grid.rows(mode)``), its name read from the mode's
    #: class (``mode = Pairwise.name``); None: the label matrix (``grid.judgments``: the rows of every
    #: ``label_matrix`` mode, which no section need name)
    mode: ClassVar[str | None]
    #: the names of the tables it builds (``tables/<name>.csv``)
    tables: ClassVar[tuple[str, ...]]

    def active(self, grid: JudgmentGrid, opts: LotteryOptions) -> bool:
        """Whether the section has anything to compute on ``grid`` under ``opts``."""
        return True

    def in_report(self, ctx: ReportContext) -> bool:
        """Whether report.md has this section: its mode judged something in the grid (``mode`` None or a
        label-matrix mode: a configuration of the label matrix). A section whose mode has no rows is
        left out, so a report of one mode's sweep never opens with another mode's sections saying n/a."""
        if self.mode is None or (self.mode in MODES and MODES.get(self.mode).label_matrix):
            return len(ctx.grid) > 0
        return bool(ctx.grid.rows(self.mode))

    def check(self, grid: JudgmentGrid, opts: LotteryOptions) -> Any:
        """Raise a one-line :class:`~promptlottery.judging.table.AnalysisError` on bad input, before
        any section spends time computing (default: nothing to check). What it returns (the input
        it checked, built once) is handed to :meth:`compute` as ``checked``."""
        return None

    def compute(
        self, grid: JudgmentGrid, opts: LotteryOptions, *, checked: Any = None, encode=None
    ) -> dict[str, Any]:
        """``{"tables": {name: table}, ...}``: its tables, and any other result it renders from;
        ``checked``: what :meth:`check` returned."""
        raise NotImplementedError

    def verdict_rows(self, tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
        """Rows (``config_id``, ``sentence``) the section adds to the report's verdict table."""
        return None

    def metrics(self, tables: dict[str, pd.DataFrame]) -> dict[str, float]:
        """Its finite headline numbers, flat, for ``results.json`` (none when its tables are absent)."""
        raise NotImplementedError

    def render(self, R: rp.Report, ctx: ReportContext) -> None:
        """Its part of report.md into ``R``."""
        raise NotImplementedError
