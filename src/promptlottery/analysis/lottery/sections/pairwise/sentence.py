"""The pairwise section's plain-words verdict (how often the verdict follows the position, how often
the wording) and the rows comparable to each dataset's own paper."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.common.pairwise.estimates import KINDS
from promptlottery.analysis.lottery.sections.pairwise.names import CONFIGURATIONS, HUMAN_AGREEMENT
from promptlottery.tracking.tables import ci, pct_ci


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two ``(estimate, lo, hi)`` intervals overlap (an undefined bound: the estimate)."""
    lo_a, hi_a = (a[0] if not np.isfinite(x) else x for x in a[1:])
    lo_b, hi_b = (b[0] if not np.isfinite(x) else x for x in b[1:])
    return not (hi_a < lo_b or hi_b < lo_a)


def _est(rec: Any, name: str) -> tuple[float, float, float]:
    return tuple(float(rec.get(f"{name}{s}", np.nan)) for s in ("", "_lo", "_hi"))


def pairwise_sentence(rec: dict, human: pd.DataFrame) -> str:
    """The plain-words verdict of one pairwise configuration: how often the verdict follows the
    position (it changes when the two answers swap places), how often it follows the wording (it
    changes when one wording replaces another, same order), and what the order-resolved and
    order-averaged verdicts agree with the humans on.

    "Follows the position more than the wording" is said only when the two shares' CIs do not
    overlap (ours: a conservative reading, not a test).
    """
    pos, word, first = (
        _est(rec, n) for n in ("position_change_share", "wording_change_share", "first_position_rate")
    )
    cid, j = rec["config_id"], int(rec["n_wordings"])
    if not np.isfinite(pos[0]):
        return f"{cid} (pairwise): no pair has verdicts in both orders, so position and wording cannot be told apart."
    if j < 2 or not np.isfinite(word[0]):
        lead = "one wording only: the wording lottery is not measured"
    elif _overlap(pos, word):
        lead = "the verdict follows the position about as often as the wording"
    elif pos[0] > word[0]:
        lead = "the verdict follows the position more than the wording"
    else:
        lead = "the verdict follows the wording more than the position"
    parts = [
        f"{cid} (pairwise): {lead}. Swapping the two answers changes the verdict on {pct_ci(*pos)} of "
        f"{int(rec.get('position_change_share_n', 0))} (pair, wording) cases"
    ]
    if np.isfinite(first[0]):
        side = (
            "the answer shown first"
            if first[1] > 0.5
            else "the answer shown second"
            if first[2] < 0.5
            else None
        )
        bias = f", a bias towards {side}" if side else ", no position bias shown (CI includes 50%)"
        parts.append(
            f"the answer shown first wins {pct_ci(*first)} of the untied single-order verdicts{bias}"
        )
    if j >= 2 and np.isfinite(word[0]):
        kappa = _est(rec, "pairwise_paraphrase_kappa")
        parts.append(
            f"replacing one wording by another (same order) changes it on {pct_ci(*word)} of the comparisons; "
            f"Fleiss' kappa of the order-resolved verdict across the {j} wordings = {ci(*kappa)}"
        )
    h = human[(human["config_id"] == cid)] if not human.empty else human
    if not h.empty and "human_agreement" in h.columns:
        per = h[~h["judges"].str.startswith("plurality")]
        means = per.groupby("verdict")["human_agreement"].mean()
        if means.notna().any():
            shown = [
                f"{KINDS[k].split(' (')[0]} {means[k]:.0%}"
                for k in ("single_order", "resolved", "averaged")
                if k in means and np.isfinite(means[k])
            ]
            parts.append("agreement with the humans (ties excluded, mean over wordings): " + ", ".join(shown))
    return "; ".join(parts) + "."


def pairwise_verdict(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per pairwise configuration: ``config_id`` and the ``sentence`` (the verdict table's columns)."""
    cfg = tables[CONFIGURATIONS]
    if cfg.empty:
        return pd.DataFrame(columns=["config_id", "sentence"])
    human = tables[HUMAN_AGREEMENT]
    return pd.DataFrame(
        [
            {"config_id": r["config_id"], "sentence": pairwise_sentence(r, human)}
            for r in cfg.to_dict("records")
        ]
    )


#: the agreement a dataset's own paper reports, as one of our named measures: (measure, the paper's rule), by
#: the ``dataset`` column (the LLMBar subsets share the name ``llmbar``, so MT-Bench's is not told apart here)
PAPER_AGREEMENT = {
    "autoj_pairwise": (
        "human_agreement_autoj",
        "Auto-J (pairwise_eval.py): both orders equal the 3-class gold",
    ),
}


def paper_rows(human: pd.DataFrame) -> pd.DataFrame:
    """Per configuration x wording of a dataset in :data:`PAPER_AGREEMENT`, its paper's agreement on
    the order-resolved verdicts: ``measure``, ``paper`` (the rule), ``value`` with ``_lo`` / ``_hi``
    / ``_n``. Empty when no configuration's dataset has one."""
    if human is None or human.empty or "dataset" not in human.columns:
        return pd.DataFrame()
    rows = []
    for r in human[human["verdict"] == "resolved"].to_dict("records"):
        if r["dataset"] not in PAPER_AGREEMENT or r["judges"].startswith("plurality"):
            continue
        measure, rule = PAPER_AGREEMENT[r["dataset"]]
        rec = {k: r[k] for k in ("config_id", "dataset", "judges")}
        rec.update(measure=measure, paper=rule)
        for suffix in ("", "_lo", "_hi", "_n"):
            rec[f"value{suffix}"] = r.get(f"{measure}{suffix}", np.nan)
        rows.append(rec)
    return pd.DataFrame(rows)
