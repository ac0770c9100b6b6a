"""The lottery stage's analyses on a judgment grid with verdicts (no I/O): every section of
:data:`~promptlottery.analysis.lottery.sections.registry.SECTIONS` that has judgments to read."""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.sections import registry
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import AnalysisError
from promptlottery.modes import MODES


def check_read(grid: JudgmentGrid) -> None:
    """Every judge mode with rows in ``grid`` is read: by the lottery (a ``label_matrix`` mode) or by
    a section of its own; a mode no section reads is one line, never dropped."""
    read = {s.mode for s in registry.SECTIONS}
    for name, mode in MODES.items():
        if not mode.label_matrix and name not in read and grid.rows(name):
            n = sum(len(r) for r in grid.rows(name).values())
            raise AnalysisError(
                f"{n} judgments of judge.mode={name}, which no report section reads; add a Section with "
                f"mode = {name!r} to analysis/lottery/sections/registry.py:SECTIONS"
            )


def analyse(grid: JudgmentGrid, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Run every active section on a judgment grid; returns ``{"tables": ..., ...}``.

    Every section checks its input before any computes (a bad pairwise table fails before the
    pointwise analyses run). Analyses 1-8 run on the pointwise configurations (n/a tables without
    one); pairwise judgments (the grid's own verdict kind, ``grid.rows(mode)``) get the "Pairwise
    judges" tables; a section's verdict sentences follow the lottery's in the verdict table.
    """
    check_read(grid)
    active = [s for s in registry.SECTIONS if s.active(grid, opts)]
    checked = [section.check(grid, opts) for section in active]
    result: dict[str, Any] = {"tables": {}}
    for section, inputs in zip(active, checked, strict=True):
        part = section.compute(grid, opts, checked=inputs, encode=encode)
        result["tables"].update(part.pop("tables"))
        result.update(part)
    tables = result["tables"]
    for section in active:
        rows = section.verdict_rows(tables)
        if rows is not None and not rows.empty:
            tables[lt.VERDICT] = pd.concat([tables[lt.VERDICT], rows], ignore_index=True)
    return result
