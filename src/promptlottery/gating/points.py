"""Operating points, matched-recovery savings and classifier rows: tables over the simulated gate."""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.gating.baselines import classification_metrics
from promptlottery.gating.config import GateConfig
from promptlottery.gating.simulate import (
    baseline_points,
    choose_operating_point,
    point_at_threshold,
    threshold_curve,
)


def operating_points(
    block,
    df: pd.DataFrame,
    scorers: dict[str, str],
    g: GateConfig,
    thresholds: dict[str, float] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cost curves of the threshold gates and their operating points, plus the baseline points."""
    curves, chosen = [], []
    for name, col in scorers.items():
        scores = block.scores(df, col)
        if thresholds is not None:  # transfer: the thresholds chosen on the held-out items
            chosen.append(point_at_threshold(block, scores, name, thresholds[name]))
            continue
        curve = threshold_curve(block, scores, name)
        curves.append(curve)
        if g.threshold == "auto":
            chosen.append(choose_operating_point(curve, g.target_recovery))
        else:
            chosen.append(point_at_threshold(block, scores, name, float(g.threshold)))
    chosen_df = pd.DataFrame(chosen)
    points = baseline_points(block, tuple(g.first_k))
    curves_df = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return curves_df, pd.concat([chosen_df, points], ignore_index=True)


def savings_at_recovery(curves: pd.DataFrame, points: pd.DataFrame, targets) -> pd.DataFrame:
    """Each threshold policy's largest call saving with at least ``t`` of the decisions recovered, per
    target ``t`` (the thresholds are chosen on the same items), beside the fixed baselines' points."""
    rows = []
    for t in targets:
        for policy, curve in curves.groupby("policy", sort=False) if len(curves) else []:
            best = choose_operating_point(curve, float(t))
            rows.append(
                {
                    "target": float(t),
                    "policy": policy,
                    "threshold": float(best["threshold"]),
                    "calls_saved": float(best["calls_saved"]),
                    "recovered": float(best["recovered"]),
                }
            )
        for p in points.itertuples(index=False):
            if p.recovered >= float(t) - 1e-12:
                rows.append(
                    {
                        "target": float(t),
                        "policy": p.policy,
                        "threshold": float("nan"),
                        "calls_saved": float(p.calls_saved),
                        "recovered": float(p.recovered),
                    }
                )
    return pd.DataFrame(rows, columns=["target", "policy", "threshold", "calls_saved", "recovered"])


def transfer_at_matched(
    block, df: pd.DataFrame, scorers: dict[str, str], matched: pd.DataFrame
) -> pd.DataFrame:
    """The threshold policies on the transfer items at the thresholds ``matched`` chose per recovery
    level on the held-out items (nothing is re-chosen on the transfer items)."""
    rows = []
    for r in matched.itertuples(index=False):
        if r.policy not in scorers:
            continue
        pt = point_at_threshold(block, block.scores(df, scorers[r.policy]), r.policy, r.threshold)
        rows.append(
            {
                "target": r.target,
                "policy": r.policy,
                "threshold": r.threshold,
                "calls_saved": float(pt["calls_saved"]),
                "recovered": float(pt["recovered"]),
            }
        )
    return pd.DataFrame(rows, columns=["target", "policy", "threshold", "calls_saved", "recovered"])


def classifier_rows(
    df: pd.DataFrame,
    scorers: dict[str, str],
    extra: dict[str, tuple[str, float]] | None = None,
    only: dict[str, pd.Series] | None = None,
) -> pd.DataFrame:
    rows = []
    y = df["in_cluster"].to_numpy()
    for name, col in scorers.items():
        sel = (only or {}).get(name, pd.Series(True, index=df.index)).to_numpy()
        rows.append(
            {"classifier": name, "cut": 0.5, **classification_metrics(y[sel], df.loc[sel, col].to_numpy())}
        )
    for name, (col, thr) in (extra or {}).items():
        rows.append({"classifier": name, "cut": thr, **classification_metrics(y, df[col].to_numpy(), thr)})
    rows.append({"classifier": "always_trust", "cut": 0.0, **classification_metrics(y, np.ones(len(y)))})
    return pd.DataFrame(rows)
