"""The lottery stage's analyses on a judgment grid with verdicts (no I/O): every section of
:data:`~promptlottery.analysis.sections.registry.SECTIONS` that has judgments to read."""

from __future__ import annotations

from typing import Any

import pandas as pd

from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.sections import registry
from promptlottery.analysis.sections.lottery import VERDICT
from promptlottery.judging.grid import JudgmentGrid


def analyse(grid: JudgmentGrid, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Run every active section on a judgment grid; returns ``{"tables": ..., ...}``.

    Every section checks its input before any computes (a bad pairwise table fails before the
    pointwise analyses run). Analyses 1-8 run on the pointwise configurations (n/a tables without
    one); pairwise judgments (the grid's own verdict kind, ``grid.pairwise``) get the "Pairwise
    judges" tables; a section's verdict sentences follow the lottery's in the verdict table.
    """
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
            tables[VERDICT] = pd.concat([tables[VERDICT], rows], ignore_index=True)
    return result
