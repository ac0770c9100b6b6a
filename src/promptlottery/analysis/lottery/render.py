"""The lottery report: tables, figures and ``report.md`` from the analysis result.

:mod:`promptlottery.analysis.common.report` holds the generic Markdown helpers; each section of
:mod:`promptlottery.analysis.lottery.sections` writes its own part, in the order of their registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.sections import registry
from promptlottery.analysis.lottery.sections.base import ReportContext
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.modes import MODES


def write_outputs(
    result: dict, grid: JudgmentGrid, opts: LotteryOptions, out_dir: str | Path, files: list[str]
) -> dict[str, Any]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = result["tables"]
    tdir = out_dir / opts.tables_dir
    note = fake_judge_line(grid)
    written = {name: rp.write_table(t, name, tdir, note=note) for name, t in tables.items()}
    rp.mark_fake(tables[lt.UNSTABLE_ITEMS], bool(note)).to_csv(
        out_dir / f"{lt.UNSTABLE_ITEMS}.csv", index=False, float_format=rp.CSV_FLOAT
    )
    figures = {}
    if opts.plots:
        from promptlottery.analysis.lottery.plots import draw_all

        figures = draw_all(tables, out_dir / opts.figures_dir, thresholds=opts.thresholds)
    text = render_report(result, grid, opts, out_dir, figures, files)
    (out_dir / opts.report).write_text(text, encoding="utf-8")
    return {"tables": written, "figures": figures, "report": out_dir / opts.report}


def render_report(
    result: dict, grid: JudgmentGrid, opts: LotteryOptions, out_dir: Path, figures: dict, files: list[str]
) -> str:
    """report.md: every section of :data:`~promptlottery.analysis.lottery.sections.registry.SECTIONS` in
    order, then the files written."""
    ctx = ReportContext(result, grid, opts, Path(out_dir), figures, files)
    R = rp.Report("Prompt lottery report")
    if fake := fake_judge_line(grid):
        R.p(fake)
    shown = [section for section in registry.SECTIONS if section.in_report(ctx)]
    if registry.SECTIONS[0] not in shown:  # the lottery's own (the opening): say what was read, and why
        R.p(runs_line(ctx))
    for section in shown:
        section.render(R, ctx)
    if result.get("budget_link"):
        link = result["budget_link"]
        R.h("At a fraction of the calls")
        R.p(
            f"A budget simulation of these same judgment files ([{link}/budget.md]({link}/budget.md), no model "
            "call): each statistic re-estimated from sparse subsets of this grid, its error and its intervals' "
            "coverage of the full value against the share of the calls; adaptive stopping beside it."
        )
        R.p(f"![budget]({link}/figures/budget.png)")
    R.h("Files")
    R.bullets(
        [
            f"`{opts.tables_dir}/<name>.csv` and `.md`: " + ", ".join(sorted(ctx.tables)),
            f"`{opts.figures_dir}/`: " + (", ".join(sorted(f"{k}.png" for k in figures)) or "none"),
        ]
    )
    return R.text()


def runs_line(ctx: ReportContext) -> str:
    """The runs a report read when the lottery's own sections (its verdict, headlines and sections 1-8,
    which read the label-matrix modes' configurations) are left out: none is in these runs."""
    runs = ctx.opts.runs if isinstance(ctx.opts.runs, str) else ", ".join(map(str, ctx.opts.runs or []))
    kinds = " or ".join(name for name, mode in MODES.items() if mode.label_matrix)
    return (
        f"Runs: `{runs}` ({len(ctx.files)} judgment files, {ctx.grid.n_judgments} judgments). No configuration "
        f"judged in {kinds} mode: the lottery's verdict, headlines and sections 1-8 are left out."
    )


def fake_backbones(grid: JudgmentGrid) -> list[str]:
    """The grid's backbones that are the fake judge (``backbone=fake``, or a ``fake-<name>`` stand-in)."""
    names = {str(b) for f in (grid.judgments, *grid.mode_frames()) if "backbone" in f for b in f["backbone"]}
    return sorted(b for b in names if b == "fake" or b.startswith("fake-"))


def fake_judge_line(grid: JudgmentGrid) -> str | None:
    """The warning every report and table of a fake judge's run opens with; None for a real judge."""
    fake = fake_backbones(grid)
    if not fake:
        return None
    return (
        f"**Fake judge** (backbone {', '.join(fake)}): the fake backend's made-up labels, not a model's; "
        "these numbers check the pipeline and say nothing about any judge."
    )
