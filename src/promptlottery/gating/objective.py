"""The validation figures a gate search optimises (``gate.tune.metric``), and how a run names them.

The paper (§F.1): "Optuna tuned DeBERTa-v3-large LoRA for validation Matthews correlation
coefficient and balanced accuracy over 35 two-epoch trials ... using an 80/20 stratified holdout
split". It names both figures without saying how they are combined; ``val/mcc_plus_balanced_accuracy``
is their unweighted sum (one scalar, so the median pruner and a single best trial still apply):
our reading of "MCC and balanced accuracy", each at the 0.5 cut, positive class = in the cluster
(balanced accuracy is the same under either polarity, and so is MCC).

This module stays light (no torch): the Lightning module and the tune script import it.
"""

from __future__ import annotations

import math

#: the paper's objective (§F.1), as the classifier logs it on each validation epoch
PAPER_OBJECTIVE = "val/mcc_plus_balanced_accuracy"
#: what each ``gate.tune.metric`` is, in the words a results row carries
OBJECTIVES = {
    PAPER_OBJECTIVE: "paper's (§F.1): validation MCC + balanced accuracy (summed: our reading of 'and')",
    "val/mcc": "ours: validation MCC",
    "val/balanced_accuracy": "ours: validation balanced accuracy",
    "val/tpr": "ours: validation TPR in the cluster (= the paper's TNR, its §5.2 selection rule)",
    "val/tnr": "ours: validation TNR in the cluster",
    "val/loss": "ours: validation loss",
}
#: how each ``gate.split`` is named in a results row
SPLITS = {
    "three_way": "ours: train / validation / test (instance-disjoint, stratified; test untouched)",
    "holdout": "paper's (§F.1): 80/20 stratified holdout (figures on the holdout that also chose)",
}


def mcc_plus_balanced_accuracy(tp: int, fp: int, tn: int, fn: int) -> float:
    """MCC + balanced accuracy of a 2x2 confusion matrix (MCC 0 where a margin is empty).

    >>> round(mcc_plus_balanced_accuracy(tp=3, fp=1, tn=4, fn=2), 6)  # MCC 0.408248, BA 0.7
    1.108248
    """
    counts = (tp, fp, tn, fn)
    if any(c < 0 for c in counts):
        raise ValueError(f"confusion counts must be >= 0, got tp={tp} fp={fp} tn={tn} fn={fn}")
    den = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    mcc = (tp * tn - fp * fn) / math.sqrt(den) if den else 0.0
    rates = [r for r in (_rate(tp, tp + fn), _rate(tn, tn + fp)) if r is not None]
    bacc = sum(rates) / len(rates) if rates else float("nan")
    return float(mcc + bacc)


def _rate(hit: int, total: int) -> float | None:
    return hit / total if total else None


def objective_name(metric: str | None) -> str:
    """The row text for ``gate.tune.metric`` (an unknown metric is named as given)."""
    if metric is None:
        return "none (no Optuna search: the classifier's configured hyperparameters)"
    return f"{metric} - {OBJECTIVES.get(metric, 'ours')}"
