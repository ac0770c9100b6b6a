"""The agreement measures on one items x judges matrix, each declared once, with a bootstrap CI
over items and the reason recorded where a measure is undefined (a collapse onto one label skips
the chance-corrected ones).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

import numpy as np

from promptlottery.analysis.lottery.labels import collapse_reason
from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
)

#: measures on the label matrix, each declared once: ``chance`` marks the chance-corrected ones
#: (skipped on collapse), ``fn`` / ``kwargs`` the metric (given the scale's labels unless ``labels``
#: is False), ``column`` its report header (None: not in the report)
AGREEMENT_MEASURES = {
    "overlap": {
        "chance": False,
        "label": "overlap (mean pairwise)",
        "fn": mean_pairwise_overlap,
        "column": "overlap",
    },
    "mean_kappa": {
        "chance": True,
        "label": "mean pairwise Cohen's kappa",
        "fn": mean_pairwise_cohen_kappa,
        "column": "mean kappa",
    },
    "fleiss_kappa": {"chance": True, "label": "Fleiss' kappa", "fn": fleiss_kappa, "column": "Fleiss kappa"},
    "alpha_nominal": {
        "chance": True,
        "label": "Krippendorff's alpha (nominal)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "nominal"},
        "column": "alpha (nominal)",
    },
    "alpha_interval": {
        "chance": True,
        "label": "Krippendorff's alpha (interval, verdict scores)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "interval"},
        "column": "alpha (interval)",
    },
    "alpha_interval_cont": {
        "chance": False,
        "label": "Krippendorff's alpha (interval, unrounded weighted score)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "interval"},
        "labels": False,
        "column": "alpha (interval, weighted)",
    },
    # the paper's kappa means (§3.2, §4.1) average every configuration where kappa is defined; the
    # collapse filter above (>= collapse_share of the verdicts one label) is ours, so the unfiltered
    # measures are kept beside the filtered ones (undefined only where every verdict is one label)
    "fleiss_kappa_all": {
        "chance": False,
        "label": "Fleiss' kappa, no collapse filter (the paper's mean)",
        "fn": fleiss_kappa,
        "column": "Fleiss kappa (no collapse filter)",
    },
    "mean_kappa_all": {
        "chance": False,
        "label": "mean pairwise Cohen's kappa, no collapse filter",
        "fn": mean_pairwise_cohen_kappa,
        "column": None,
    },
}


def _measure(name: str, labels: list[float]):
    spec = AGREEMENT_MEASURES[name]
    return partial(
        spec["fn"], **spec.get("kwargs", {}), **({"labels": labels} if spec.get("labels", True) else {})
    )


def measure_columns(names: Iterable[str]) -> dict[str, str]:
    """``{measure: report header}`` of ``names`` (measures of :data:`AGREEMENT_MEASURES`), in that order."""
    return {m: AGREEMENT_MEASURES[m]["column"] for m in names}


@dataclass
class Estimate:
    estimate: float
    low: float
    high: float
    note: str | None
    distribution: np.ndarray | None


def _nan_estimate(note: str) -> Estimate:
    return Estimate(np.nan, np.nan, np.nan, note, None)


def estimate_with_ci(stat, *arrays, n_resamples: int, seed: int, level: float) -> Estimate:
    """``bootstrap_ci`` with the reason recorded when the statistic is undefined."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndefinedMetricWarning)
        try:
            est = float(stat(*arrays))
        except ValueError as exc:
            return _nan_estimate(f"n/a: {exc}")
    if not np.isfinite(est):
        why = str(caught[0].message) if caught else "undefined"
        return _nan_estimate(f"n/a: {why}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        res = bootstrap_ci(stat, *arrays, n_resamples=n_resamples, level=level, seed=seed)
    note = None
    if res.n_undefined:
        note = f"undefined on {res.n_undefined} of {res.n_resamples} resamples (left out of the CI)"
    return Estimate(est, res.low, res.high, note, res.distribution)


def agreement_measures(
    values: np.ndarray,
    scale_scores: list[float],
    cont: np.ndarray | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    collapse_share: float = 0.95,
    scale_labels: list[str] | None = None,
    kappa_interval: str = "studentized",
) -> dict[str, Estimate]:
    """Every measure of :data:`AGREEMENT_MEASURES` on one complete items x judges matrix.

    ``values`` holds the verdicts' scale scores, ``cont`` the continuous scores (same shape);
    ``scale_labels`` (parallel to ``scale_scores``) names the labels in the collapse notes. Every
    interval is the percentile bootstrap over items but Fleiss' kappa's with ``kappa_interval=
    "studentized"`` (bootstrap-t on the same resamples; its replicates stay the distribution).
    """
    values = np.asarray(values, dtype=float)
    out: dict[str, Estimate] = {}
    if values.shape[0] < 2 or values.shape[1] < 2:
        why = f"n/a: need >= 2 complete items and >= 2 judges, have {values.shape[0]} x {values.shape[1]}"
        return {m: _nan_estimate(why) for m in AGREEMENT_MEASURES}
    names = dict(zip((float(x) for x in scale_scores), scale_labels)) if scale_labels else {}
    judges = np.tile(
        np.arange(1, values.shape[1] + 1), values.shape[0]
    )  # the judge of each value, ravel order
    collapsed = collapse_reason(
        [names.get(v, v) for v in values.ravel()], collapse_share, by=[f"judge {j}" for j in judges]
    )
    labels = sorted(float(s) for s in scale_scores)
    for name, spec in AGREEMENT_MEASURES.items():
        if spec["chance"] and collapsed:
            out[name] = _nan_estimate(f"n/a: {collapsed}")
            continue
        if name == "alpha_interval_cont":
            if cont is None:
                out[name] = _nan_estimate("n/a: no continuous scores")
                continue
            # the unrounded scores: interval alpha costs O(items) per resample whatever the values
            arr = np.asarray(cont, dtype=float)
        else:
            arr = values
        out[name] = estimate_with_ci(
            _measure(name, labels), arr, n_resamples=n_resamples, seed=seed, level=level
        )
        if name in FLEISS and np.isfinite(out[name].estimate):
            out[name] = _fleiss_interval(out[name], values, labels, n_resamples, seed, level, kappa_interval)
    return out


#: the Fleiss' kappa columns whose interval ``kappa_interval`` picks
FLEISS = ("fleiss_kappa", "fleiss_kappa_all")


def _fleiss_interval(est: Estimate, values, labels, n_resamples, seed, level, kind) -> Estimate:
    from promptlottery.metrics.kappa_interval import fleiss_interval

    codes = np.searchsorted(np.asarray(labels, dtype=float), np.asarray(values, dtype=float))
    low, high, notes = fleiss_interval(
        codes,
        len(labels),
        kind,
        percentile=(est.low, est.high),
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )
    note = "; ".join([est.note, *notes] if est.note else notes) or None
    return Estimate(est.estimate, low, high, note, est.distribution)
