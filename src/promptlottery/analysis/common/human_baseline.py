"""The human-baseline section of a report (the lottery report's, :mod:`promptlottery.analysis.lottery.sections.human`,
or ``human_report.md``): human agreement within one wording and across wordings beside the judge's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.human.agreement import MEASURES, PAPER_HUMAN, PAPER_RATIO

AGREEMENT = "human_agreement"
DEGRADATION = "human_degradation"
PER_WORDING = "human_per_wording"
#: the datasets with several raters per item (``analysis.human_raters``)
RATERS_AGREEMENT = "human_raters_agreement"
#: the tables of :func:`promptlottery.human.analysis.human_tables_for_report`
TABLES = (AGREEMENT, DEGRADATION, PER_WORDING, RATERS_AGREEMENT)

_NAMES = {
    "overlap": "overlap",
    "cohen": "pairwise Cohen",
    "fleiss": "Fleiss kappa",
    "alpha": "Krippendorff alpha",
}


def render_human_section(
    R: rp.Report, tables: dict[str, pd.DataFrame], *, level: float = 0.95, verdict: str | None = None
) -> None:
    """Append the human-baseline section to ``R`` (nothing when no human table is there)."""
    agree, deg = tables.get(AGREEMENT), tables.get(DEGRADATION)
    per_w, raters = tables.get(PER_WORDING), tables.get(RATERS_AGREEMENT)
    if all(t is None for t in (agree, deg, raters)):
        return
    R.h("Human baseline under rewording")
    pct = round(100 * level)
    R.p(
        "Definitions (ours; the paper's summary does not define them, see `promptlottery.human.agreement`): "
        "humans *within one wording* = annotators who rated the same (item, wording) cell; *across wordings* = "
        "ratings of one item under different wordings by different annotators (units (item, slot), raters the "
        "wordings). The judge *within* = "
        "repeated samples of the fixed reference prompt; *across* = the prompt variants. **Degradation (ours)** = "
        "agreement within one wording minus agreement across wordings; **drop difference** = judge drop - "
        "human drop; **ratio** = judge drop / human drop (defined where the human drop is > 0; its interval is "
        "over all resamples, those with no human drop counted against both ends, so it may be unbounded). "
        f"Brackets: {pct}% bootstrap CIs over items."
        + (f" Judge labels: the `{verdict}` verdict." if verdict else "")
    )
    _agreement(R, agree)
    _degradation(R, deg)
    _per_wording_and_raters(R, per_w, raters)


def _agreement(R: rp.Report, agree: pd.DataFrame | None) -> None:
    if agree is None or not len(agree):
        return
    R.h("Agreement within one wording and across wordings", 3)
    show = rp.with_ci_columns(agree, MEASURES)
    cols = {
        "config_id": "configuration",
        "side": "raters of",
        "setting": "setting",
        "raters": "raters",
        "n_items": "items",
        "n_units": "units",
        **_NAMES,
    }
    R.table(show, cols)
    R.p(
        "Paper (§3.2, 10 annotators, 650 data points): "
        + ", ".join(f"{_NAMES[m]} {v:.2f}" for m, v in PAPER_HUMAN.items())
        + " (its setting is not split by wording)."
    )
    R.notes(
        agree.assign(key=agree["config_id"].astype(str) + " " + agree["side"] + " " + agree["setting"]),
        "key",
        "notes",
    )


def _degradation(R: rp.Report, deg: pd.DataFrame | None) -> None:
    if deg is None or not len(deg):
        return
    R.h("Degradation under rewording: judge vs human (ours)", 3)
    show = rp.with_ci_columns(deg, ["human_drop", "judge_drop", "drop_difference"])
    show["ratio"] = [_ratio_ci(*v) for v in zip(deg["ratio"], deg["ratio_lo"], deg["ratio_hi"])]
    show["measure"] = show["measure"].map(_NAMES)
    R.table(
        show,
        {
            "config_id": "configuration",
            "measure": "measure",
            "human_drop": "human drop",
            "judge_drop": "judge drop",
            "drop_difference": "drop difference judge - human (ours)",
            "ratio": "ratio judge/human (ours)",
            "paper_ratio": "paper (Abstract)",
        },
    )
    R.p(
        f"The paper's Abstract: judges show {PAPER_RATIO} larger agreement degradation under rephrasing than humans; "
        "its exact definition of degradation is not in the summary, so the two columns are not the same measure."
    )
    R.notes(deg.assign(key=deg["config_id"].astype(str) + " " + deg["measure"]), "key", "notes")


def _per_wording_and_raters(R: rp.Report, per_w: pd.DataFrame | None, raters: pd.DataFrame | None) -> None:
    if per_w is not None and len(per_w):
        R.h("Human agreement under each wording", 3)
        R.table(
            rp.with_ci_columns(per_w, MEASURES),
            {"wording": "wording", "n_items": "items", "n_units": "cells", **_NAMES},
        )
    if raters is not None and len(raters):
        R.h("Datasets with several raters per item: one wording", 3)
        R.p(
            "Human agreement among the dataset's own raters (under its one instruction; raters = positions in the "
            "item's rater list) beside the judge's fixed-prompt agreement on the same items."
        )
        R.table(
            rp.with_ci_columns(raters, MEASURES),
            {
                "config_id": "configuration",
                "side": "raters of",
                "wording": "wording",
                "n_items": "items",
                "n_raters": "raters",
                **_NAMES,
            },
        )
        R.notes(raters.assign(key=raters["config_id"].astype(str) + " " + raters["side"]), "key", "notes")


def _ratio_ci(est: float, lo: float, hi: float) -> str:
    """The ratio with its interval over all resamples, whose ends may be unbounded (``-inf`` / ``+inf``)."""

    def end(v: float) -> str:
        if np.isnan(v):
            return "n/a"
        return f"{v:.3f}" if np.isfinite(v) else f"{v:+}"  # -inf / +inf

    head = f"{est:.3f}" if np.isfinite(est) else "n/a"
    return head if np.isnan(lo) and np.isnan(hi) else f"{head} [{end(lo)}, {end(hi)}]"
