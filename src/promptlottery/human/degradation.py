"""The degradation of agreement under rewording: humans' and judges' agreement within one wording
and across wordings side by side (the tables and measures of :mod:`promptlottery.human.agreement`),
with bootstrap intervals over items. No I/O: pure functions over the rater tables.

* **Degradation (ours)** of a measure ``A``: ``drop = A(within one wording) - A(across wordings)``,
  an absolute difference; beside it the **drop difference** ``drop(judge) - drop(human)`` (defined
  wherever both drops are) and the **ratio** ``drop(judge) / drop(human)``, defined only where the
  human drop is positive. The paper's "6-9x" is printed beside it, not computed by us.
* **Confidence intervals**: percentile bootstrap over items (every unit of a drawn item comes
  along; human and judge share each draw, so the drop difference's and the ratio's intervals are
  paired), ``n_resamples`` draws with ``seed``. The ratio's interval is over **all** resamples: a
  resample where the human drop is not positive has no ratio, and it is counted against both ends
  (at ``-inf`` for the lower bound, at ``+inf`` for the upper), so the interval widens, up to
  unbounded, as such resamples grow, instead of being conditional on a human drop > 0; the note
  gives their number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.human.agreement import (
    MAX_PAIRS_RESAMPLED,
    MEASURES,
    PAPER_RATIO,
    SETTINGS,
    RaterTable,
    measures,
    resampled_measures,
)
from promptlottery.metrics._resampled import resample_counts
from promptlottery.metrics.bootstrap import resample_indices


def _ci(dist: np.ndarray, level: float) -> tuple[float, float]:
    ok = dist[np.isfinite(dist)]
    if ok.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(ok, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(lo), float(hi)


def ci_all_resamples(dist: np.ndarray, undefined: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of ``dist`` over every resample: the ``undefined`` ones (no value,
    but drawn) at ``-inf`` for the lower bound and at ``+inf`` for the upper; resamples that are
    neither finite nor ``undefined`` are left out.

    >>> d = np.array([np.nan, 1, 2, 3, 4, 5, 6, 7])
    >>> ci_all_resamples(d, np.isnan(d), 0.5)  # defined ones only would give (2.5, 5.5)
    (1.75, 6.25)
    """
    keep = np.isfinite(dist) | undefined
    d, u = dist[keep], undefined[keep]
    if d.size == 0:
        return float("nan"), float("nan")
    q = [50.0 * (1.0 - level), 50.0 * (1.0 + level)]
    with np.errstate(invalid="ignore"):  # inf - inf in the interpolation next to an undefined draw
        lo = float(np.percentile(np.where(u, -np.inf, d), q[0]))
        hi = float(np.percentile(np.where(u, np.inf, d), q[1]))
    return (-np.inf if np.isnan(lo) else lo), (np.inf if np.isnan(hi) else hi)


@dataclass
class Side:
    """One rater population's two tables (within one wording, across wordings) and their numbers."""

    name: str
    tables: dict[str, RaterTable]
    notes: dict[str, str] = field(default_factory=dict)
    est: dict[str, dict[str, float]] = field(default_factory=dict)
    dist: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


def degradation(
    human: dict[str, RaterTable],
    judges: dict[str, dict[str, RaterTable]],
    n_items: int,
    n_labels: int,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    alpha_level: str = "nominal",
    judge_notes: dict[str, dict[str, str]] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The agreement table (one row per side and setting) and the degradation table (one row per
    judge and measure), with bootstrap CIs over the ``n_items`` items the tables index."""
    idx = resample_indices(n_items, n_resamples, seed=seed)
    w = resample_counts(idx, n_items)
    sides = [Side("human", human)] + [
        Side(k, v, dict((judge_notes or {}).get(k, {}))) for k, v in judges.items()
    ]
    for s in sides:
        for setting in SETTINGS:
            t = s.tables.get(setting)
            if t is None:
                s.est[setting] = dict.fromkeys(MEASURES, float("nan"))
                s.dist[setting] = dict.fromkeys(MEASURES, np.full(n_resamples, np.nan))
                continue
            s.est[setting] = measures(t, n_labels, alpha_level=alpha_level)
            s.dist[setting] = resampled_measures(t, w, n_labels, alpha_level=alpha_level)
    agree_rows = [_agreement_row(s, setting, level) for s in sides for setting in SETTINGS]
    deg_rows = [_degradation_row(sides[0], s, m, n_resamples, level) for s in sides[1:] for m in MEASURES]
    return pd.DataFrame(agree_rows), pd.DataFrame(deg_rows)


def _agreement_row(s: Side, setting: str, level: float) -> dict[str, Any]:
    """One row of the agreement table: one side's measures in one setting, with their CIs."""
    t = s.tables.get(setting)
    rec: dict[str, Any] = {
        "side": s.name,
        "setting": setting,
        "raters": t.raters if t is not None else "",
        "n_items": int(len(np.unique(t.unit_item))) if t is not None else 0,
        "n_units": t.n_units if t is not None else 0,
        "n_raters": int(t.codes.shape[1]) if t is not None else 0,
    }
    for m in MEASURES:
        lo, hi = _ci(s.dist[setting][m], level)
        rec[m], rec[f"{m}_lo"], rec[f"{m}_hi"] = s.est[setting][m], lo, hi
    notes = list(t.notes) if t is not None else []
    if t is not None and t.codes.shape[1] * (t.codes.shape[1] - 1) // 2 > MAX_PAIRS_RESAMPLED:
        notes.append(f"cohen: no CI ({t.codes.shape[1]} raters: more than {MAX_PAIRS_RESAMPLED} pairs)")
    if setting in s.notes:
        notes.append(s.notes[setting])
    rec["notes"] = "; ".join(notes)
    return rec


def _degradation_row(h: Side, s: Side, m: str, n_resamples: int, level: float) -> dict[str, Any]:
    """One row of the degradation table: judge ``s``'s drop across wordings in measure ``m`` beside
    the humans' ``h``, and their ratio."""
    h_drop = h.est["within"][m] - h.est["across"][m]
    j_drop = s.est["within"][m] - s.est["across"][m]
    h_dist = h.dist["within"][m] - h.dist["across"][m]
    j_dist = s.dist["within"][m] - s.dist["across"][m]
    ok = np.isfinite(h_dist) & (h_dist > 0) & np.isfinite(j_dist)
    with np.errstate(invalid="ignore", divide="ignore"):
        r_dist = np.where(ok, j_dist / np.where(ok, h_dist, 1.0), np.nan)
    # no ratio on a drawn resample because the humans do not drop there (the judge's drop is defined)
    no_drop = np.isfinite(j_dist) & np.isfinite(h_dist) & (h_dist <= 0)
    ratio = j_drop / h_drop if np.isfinite(h_drop) and h_drop > 0 and np.isfinite(j_drop) else float("nan")
    notes = []
    if np.isfinite(h_drop) and h_drop <= 0:
        notes.append("ratio n/a: the human agreement does not drop across wordings")
    elif not np.isfinite(j_drop):
        notes.append("ratio n/a: " + (s.notes.get("within") or "the judge's drop is undefined"))
    if np.isfinite(j_drop) and np.isfinite(h_drop) and no_drop.any():
        notes.append(
            f"ratio CI over all {n_resamples} resamples: {int(no_drop.sum())} with no human drop "
            "(<= 0) have no ratio and count against both ends"
        )
    left = int(np.sum(~ok & ~no_drop))
    if np.isfinite(j_drop) and np.isfinite(h_drop) and left:
        notes.append(f"{left} resample(s) with an undefined drop left out of the ratio's CI")
    rec = {"judge": s.name, "measure": m}
    for key, est, dist in (
        ("human_within", h.est["within"][m], h.dist["within"][m]),
        ("human_across", h.est["across"][m], h.dist["across"][m]),
        ("human_drop", h_drop, h_dist),
        ("judge_within", s.est["within"][m], s.dist["within"][m]),
        ("judge_across", s.est["across"][m], s.dist["across"][m]),
        ("judge_drop", j_drop, j_dist),
        ("drop_difference", j_drop - h_drop, j_dist - h_dist),
    ):
        lo, hi = _ci(dist, level)
        rec[key], rec[f"{key}_lo"], rec[f"{key}_hi"] = est, lo, hi
    rec["ratio"] = ratio
    rec["ratio_lo"], rec["ratio_hi"] = ci_all_resamples(r_dist, no_drop, level)
    rec["n_resamples_no_human_drop"] = int(no_drop.sum())
    rec["paper_ratio"] = PAPER_RATIO
    rec["notes"] = "; ".join(notes)
    return rec
