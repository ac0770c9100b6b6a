"""Repeated judging vs prompt diversity: does aggregating P1's samples match aggregating the wordings?

The prompt-lottery paper's limitations (§6, p. 10): "the authors note that Section 5 gains may
partly reflect repeated judging rather than prompt diversity itself." The data here can test it:
per configuration with a fixed-prompt baseline (the reference variant sampled ``n_samples`` times,
e.g. ``judge.variant=P1 n_samples=5 decoding.temperature=0.7``), the mean verdict of the repeats and
the mean verdict of the wordings (the variants' sample 0), both against the human labels (Pearson,
the measure of the paper's Table 6), on the same items. ``diff`` = r(wordings) - r(repeats) with the
paired bootstrap over items (``metrics.paired_bootstrap_test``, one comparison: the 25th and 975th of
1000 sorted differences); ``diff`` > 0 with 0 outside its interval = the wordings carry more than
repetition does. The comparison and the mean aggregate are ours (the summary prints no test), named
``repeats_vs_wordings``; the verdict column says which verdict kind the numbers use.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics import UndefinedMetricWarning, paired_bootstrap_test, pearson
from promptlottery.metrics.aggregate import mean_score

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions

COLUMNS = [
    "config_id", "dataset", "backbone", "setting", "temperature", "n_samples", "n_variants", "n", "verdict",
    "pearson_repeats", "pearson_wordings", "diff", "diff_lo", "diff_hi", "significant", "note",
]  # fmt: skip


def repeats_vs_wordings(grid: JudgmentGrid, opts: LotteryOptions) -> pd.DataFrame:
    """One row per configuration x fixed-prompt setting: the repeats' and the wordings' mean verdict
    against the humans (module docstring); no fixed-prompt baseline or no human labels: no row."""
    rows = []
    for conf in grid:
        v = conf.matrix("value")
        wordings = mean_score(v.to_numpy(float))
        human = conf.humans(v.index)
        for setting in conf.fixed:
            m = conf.fixed_matrix(setting, "value").reindex(v.index)
            repeats = mean_score(m.to_numpy(float))
            keep = np.isfinite(wordings) & np.isfinite(repeats) & np.isfinite(human)
            rec = {
                "config_id": conf.config_id,
                "dataset": conf.first["dataset"],
                "backbone": conf.backbone,
                "setting": setting.name,
                "temperature": setting.temperature,
                "n_samples": m.shape[1],
                "n_variants": v.shape[1],
                "n": int(keep.sum()),
                "verdict": grid.verdict,
                "note": "",
            }
            if keep.sum() < 3:
                rec["note"] = (
                    f"n/a: {int(keep.sum())} items with both aggregates and a human label (need >= 3)"
                )
                rows.append(rec)
                continue
            h, w, r = human[keep], wordings[keep], repeats[keep]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UndefinedMetricWarning)
                rec["pearson_repeats"], rec["pearson_wordings"] = pearson(r, h), pearson(w, h)
                try:
                    res = paired_bootstrap_test(lambda hh, x: pearson(x, hh), w, r, h, **opts.resampling)
                except ValueError as exc:  # too few resamples with a defined difference
                    rec["note"] = f"n/a interval: {exc}"
                else:
                    n_undef = int(np.isnan(res.distribution).sum())
                    rec.update(
                        diff=res.difference, diff_lo=res.low, diff_hi=res.high, significant=res.significant
                    )
                    if n_undef:
                        rec["note"] = (
                            f"interval over {res.n_resamples - n_undef} of {res.n_resamples} resamples"
                        )
            if not np.isfinite(rec["pearson_repeats"]) or not np.isfinite(rec["pearson_wordings"]):
                rec["note"] = (
                    "n/a: Pearson undefined (an aggregate or the human labels constant on these items)"
                )
                rec.update(diff=np.nan, diff_lo=np.nan, diff_hi=np.nan, significant=None)
            rows.append(rec)
    return pd.DataFrame(rows, columns=COLUMNS)
