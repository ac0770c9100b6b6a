"""Operating points, matched-recovery savings and classifier rows: tables over the simulated gate.

Thresholds are chosen on the validation items (``threshold=auto``: the largest call saving that
recovers ``target_recovery`` of the five-judge decisions) and every reported point is then
computed on the test items at that threshold.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.gating.baselines import classification_metrics, polarity_rates
from promptlottery.gating.config import GateConfig
from promptlottery.gating.simulate import (
    baseline_points,
    choose_operating_point,
    point_at_threshold,
    threshold_curve,
)

#: the paper's policy (the gate asked about P1 only; else the adaptive full aggregation); every
#: other scorer is simulated as our sequential per-judge gate
PAPER_POLICIES = ("paper_gate",)


def _point(block, df, name: str, col: str, threshold: float) -> pd.Series:
    return point_at_threshold(
        block, block.scores(df, col), name, float(threshold), paper=name in PAPER_POLICIES
    )


def curves_for(block, df: pd.DataFrame, scorers: dict[str, str]) -> pd.DataFrame:
    """Every threshold policy's cost curve on ``block``."""
    curves = [
        threshold_curve(block, block.scores(df, col), name, paper=name in PAPER_POLICIES)
        for name, col in scorers.items()
    ]
    return pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()


def choose_thresholds(val_curves: pd.DataFrame, scorers: dict[str, str], g: GateConfig) -> dict[str, float]:
    """Each threshold policy's threshold, chosen on the validation curves (or fixed in advance)."""
    if g.threshold != "auto":
        return {name: float(g.threshold) for name in scorers}
    return {
        name: float(
            choose_operating_point(val_curves[val_curves["policy"] == name], g.target_recovery)["threshold"]
        )
        for name in scorers
    }


def operating_points(
    block, df: pd.DataFrame, scorers: dict[str, str], g: GateConfig, thresholds: dict[str, float]
) -> pd.DataFrame:
    """The threshold policies at ``thresholds`` and the fixed baselines, all on ``block``."""
    chosen = pd.DataFrame([_point(block, df, name, col, thresholds[name]) for name, col in scorers.items()])
    return pd.concat([chosen, baseline_points(block, tuple(g.first_k))], ignore_index=True)


def savings_at_recovery(curves: pd.DataFrame, points: pd.DataFrame, targets) -> pd.DataFrame:
    """Each threshold policy's largest call saving with at least ``t`` of the decisions recovered, per
    target ``t`` (on the items of ``curves``), beside the fixed baselines' points that reach it."""
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
    """The threshold policies on ``block`` at the thresholds ``matched`` chose per recovery level on
    other items (validation); nothing is re-chosen on ``block``. Fixed baselines keep their rows."""
    rows = []
    for r in matched.itertuples(index=False):
        if r.policy not in scorers:
            continue
        pt = _point(block, df, r.policy, scorers[r.policy], r.threshold)
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


def _rates(y: np.ndarray, prob: np.ndarray, cut: float) -> dict[str, float]:
    m = classification_metrics(y, prob, cut)
    trusted = np.nan_to_num(np.asarray(prob, dtype=float), nan=0.0) >= cut
    return {"mcc": m["mcc"], "balanced_accuracy": m["balanced_accuracy"], **polarity_rates(y, trusted)}


def classifier_rows(
    df: pd.DataFrame,
    scorers: dict[str, str],
    extra: dict[str, tuple[str, float]] | None = None,
    only: dict[str, pd.Series] | None = None,
) -> pd.DataFrame:
    """Classifier metrics per scorer, both polarities named (see :func:`polarity_rates`)."""
    rows = []
    y = df["in_cluster"].to_numpy()
    for name, col in scorers.items():
        sel = (only or {}).get(name, pd.Series(True, index=df.index)).to_numpy()
        rows.append({"classifier": name, "cut": 0.5, **_rates(y[sel], df.loc[sel, col].to_numpy(), 0.5)})
    for name, (col, thr) in (extra or {}).items():
        rows.append({"classifier": name, "cut": thr, **_rates(y, df[col].to_numpy(), thr)})
    rows.append({"classifier": "always_trust", "cut": 0.0, **_rates(y, np.ones(len(y)), 0.0)})
    return pd.DataFrame(rows)
