"""The budget analysis of a grid of a judge mode without a label matrix: the one the mode names
(``JudgeMode.budget_full`` / ``budget_sparse``); the budget stage names no mode."""

from __future__ import annotations

import functools

from promptlottery.analysis.common.plugin import plugin
from promptlottery.judging.table import AnalysisError
from promptlottery.modes import default_mode, get_mode


def _matrix_mode(grid) -> str:
    """The judge mode of the grid's label-matrix rows (their ``judge_mode``; none named: the default)."""
    named = grid.judgments["judge_mode"] if "judge_mode" in grid.judgments.columns else ()
    return next((str(m) for m in named if isinstance(m, str) and m), default_mode())


def mode_budget(grid, *, sparse: bool):
    """The budget analysis of the grid's judge mode without a label matrix, as the mode names it
    (``JudgeMode.budget_sparse`` / ``budget_full``), bound to the mode; None for a label-matrix grid."""
    modes = [get_mode(name) for name in grid.by_mode if grid.rows(name)]
    if not modes:
        return None
    mode = modes[0]
    kind = " sparse" if sparse else ""
    if len(grid.judgments) or len(modes) > 1:
        other = _matrix_mode(grid) if len(grid.judgments) else modes[1].name
        raise AnalysisError(
            f"analysis.runs mixes {other} and {mode.name}{kind} grids: analyse each sweep alone"
        )
    ref = mode.budget_sparse if sparse else mode.budget_full
    if ref is None:
        raise AnalysisError(
            f"+analysis=budget of a{kind} judge.mode={mode.name} grid: missing (the mode names no budget analysis)"
        )
    return functools.partial(plugin(ref), mode=mode)
