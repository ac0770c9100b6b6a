"""The budget simulation's figure (``+analysis=budget``), in the style of :mod:`promptlottery.analysis.lottery.plots`.

:func:`plot_budget` takes ``tables/budget.csv`` (in memory or read back) and a PNG path, and returns the
path, or ``None`` when the table has nothing to draw.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from promptlottery.analysis.common.plots import as_numbers, plt, save_figure, short_config

#: the band the issue asks the 95% intervals' coverage to fall in
COVERAGE_BAND = (0.92, 0.98)


def plot_budget(budget: pd.DataFrame, path: str | Path) -> Path | None:
    """Per statistic (columns): the RMSE of the sparse estimate against the full grid's value (top) and
    the share of plans whose interval covers it, beside the share whose estimate falls inside the full
    grid's 95% CI (dashed; bottom), against the share of the full grid's calls, one line per design."""
    if budget is None or budget.empty:
        return None
    stats = list(dict.fromkeys(budget["statistic"]))
    fig, axes = plt.subplots(2, len(stats), figsize=(3.2 * len(stats), 5.6), squeeze=False)
    several = budget["config_id"].nunique() > 1 if "config_id" in budget.columns else False
    for j, stat in enumerate(stats):
        sub = budget[budget["statistic"] == stat]
        keys = ["config_id", "design"] if "config_id" in sub.columns else ["design"]
        for key, g in sub.groupby(keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            label = f"{key[-1]} {short_config(key[0])}" if several else str(key[-1])
            g = g.sort_values("calls_share")
            x = as_numbers(g["calls_share"])
            (line,) = axes[0, j].plot(x, as_numbers(g["rmse"]), marker="o", label=label)
            axes[1, j].plot(x, as_numbers(g["coverage"]), marker="o", color=line.get_color(), label=label)
            axes[1, j].plot(x, as_numbers(g["within_full_ci"]), ls="--", lw=0.9, color=line.get_color())
        axes[0, j].set_title(stat)
        axes[0, j].set_xlim(0, 1)
        axes[0, j].set_ylabel("RMSE vs full grid" if j == 0 else "")
        axes[1, j].axhspan(*COVERAGE_BAND, color="0.9")
        axes[1, j].axhline(0.95, color="0.5", lw=0.8)
        axes[1, j].set_ylim(0, 1.02)
        axes[1, j].set_xlim(0, 1)
        axes[1, j].set_xlabel("share of the full grid's calls")
        axes[1, j].set_ylabel("coverage (solid), within full CI (dashed)" if j == 0 else "", fontsize=8)
    axes[0, 0].legend(fontsize=7)
    if not np.isfinite(as_numbers(budget["rmse"])).any():
        plt.close(fig)
        return None
    return save_figure(fig, path)
