"""The studentized (bootstrap-t) interval of Fleiss' kappa, an option beside the percentile interval.

Why: the percentile interval of Fleiss' kappa under-covers at small n (docs/analysis.md, "Intervals
of Fleiss' kappa"). Its chance term ``sum p_j^2`` is estimated with an upward bias (its variance
adds to it), so kappa is biased below its value, and the item bootstrap repeats that bias once more
around the estimate: the percentile interval sits about twice the bias too low. The bootstrap-t
interval (Efron & Tibshirani 1993, §12.5) divides each resample's deviation by that resample's own
standard error, which carries the bias and skew along.

Resampling is over units (items, or clusters of items drawn together): ``w[r, c]`` copies of unit
``c`` in resample ``r``. The standard error of a sample (the original or a resample) is the
jackknife's, leaving out one drawn unit at a time:
``se^2 = (m - 1) / m * sum_k (kappa_(-k) - mean)^2`` over its ``m`` drawn units. The interval is
``[k - t_(1 - a/2) se, k - t_(a/2) se]`` with ``t_q`` the quantiles of ``(k*_r - k) / se*_r``.
A resample whose jackknife standard error is 0 (every unit left out gives the same kappa) has no
``t``: it is left out and counted, like a resample where kappa is undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "NEAR_NOMINAL_ITEMS",
    "StudentizedInterval",
    "unit_tables",
    "fleiss_studentized",
    "item_bootstrap_t",
    "fleiss_interval",
]

#: the fewest items from which each interval's coverage of the true kappa (0 and 0.5; 2, 3, 5 and 10
#: labels; five wordings; 8 to 256 items) was measured at >= 90% for a nominal 95%
#: (benchmarks/kappa_ci_coverage.py; the table in docs/analysis.md)
NEAR_NOMINAL_ITEMS = {"studentized": 8, "percentile": 128}

_CHUNK = 2**21  # cap on the (resamples x units x categories) intermediates


@dataclass(frozen=True)
class StudentizedInterval:
    estimate: float
    low: float
    high: float
    distribution: np.ndarray  # kappa on each resample (NaN: undefined)
    n_undefined: int  # resamples without a t (kappa undefined, or a jackknife SE of 0)


def unit_tables(codes: np.ndarray, n_cat: int, units: np.ndarray | None = None):
    """Per unit: the summed per-item agreement ``P_i``, the summed category counts and the item count.

    ``codes``: a complete items x raters matrix of category codes ``0 .. n_cat - 1``; ``units``: the
    unit number (0 .. C - 1) of each item (default: one unit per item)."""
    codes = np.asarray(codes, dtype=np.int64)
    n, r = codes.shape
    counts = np.zeros((n, n_cat))
    np.add.at(counts, (np.repeat(np.arange(n), r), codes.ravel()), 1.0)
    p_i = ((counts**2).sum(axis=1) - r) / (r * (r - 1.0))
    units = np.arange(n) if units is None else np.asarray(units, dtype=np.int64)
    n_units = int(units.max()) + 1
    s_p, s_c, m = np.zeros(n_units), np.zeros((n_units, n_cat)), np.zeros(n_units)
    np.add.at(s_p, units, p_i)
    np.add.at(s_c, units, counts)
    np.add.at(m, units, 1.0)
    return s_p, s_c, m, r


def _kappa(sum_p, sum_c, n_items, r):
    p_e = ((sum_c / (n_items[..., None] * r)) ** 2).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = (sum_p / n_items - p_e) / (1 - p_e)
    return np.where(p_e < 1 - 1e-12, k, np.nan)


def _jackknife_se(w, s_p, s_c, m, r) -> np.ndarray:
    """The jackknife standard error of kappa on each weighted resample (rows of ``w``)."""
    out = np.empty(len(w))
    step = max(1, _CHUNK // max(1, w.shape[1] * s_c.shape[1]))
    for a in range(0, len(w), step):
        wb = w[a : a + step]
        tp, tc, tm = wb @ s_p, wb @ s_c, wb @ m
        loo = _kappa(tp[:, None] - s_p, tc[:, None, :] - s_c[None], tm[:, None] - m, r)  # (R, C)
        drawn = wb > 0
        n_drawn = wb.sum(axis=1)
        loo_w = np.where(drawn, loo, 0.0)
        mean = (wb * loo_w).sum(axis=1) / n_drawn
        dev = np.where(drawn, loo - mean[:, None], 0.0)
        with np.errstate(invalid="ignore"):
            out[a : a + step] = np.sqrt((n_drawn - 1) / n_drawn * (wb * dev**2).sum(axis=1))
    return out


def fleiss_studentized(codes, n_cat: int, w, *, level: float = 0.95, units=None) -> StudentizedInterval:
    """Fleiss' kappa of ``codes`` with its bootstrap-t interval over the resamples ``w``.

    ``w``: ``(R, C)`` copies of each unit per resample (``resample_counts`` of the item bootstrap, or
    the cluster draws' counts). Equal to :func:`~promptlottery.metrics.fleiss_kappa` at the estimate.

    >>> codes = np.array([[0, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 0]])
    >>> w = np.random.default_rng(0).multinomial(4, [0.25] * 4, size=500).astype(float)
    >>> res = fleiss_studentized(codes, 2, w)
    >>> round(res.estimate, 6), res.low < res.estimate < res.high
    (0.333333, True)
    """
    s_p, s_c, m, r = unit_tables(codes, n_cat, units)
    w = np.asarray(w, dtype=np.float64)
    ones = np.ones((1, len(m)))
    est = float(_kappa(ones @ s_p, ones @ s_c, ones @ m, r)[0])
    dist = _kappa(w @ s_p, w @ s_c, w @ m, r)
    if not np.isfinite(est):
        return StudentizedInterval(est, np.nan, np.nan, dist, len(w))
    se0 = float(_jackknife_se(ones, s_p, s_c, m, r)[0])
    se = _jackknife_se(w, s_p, s_c, m, r)
    ok = np.isfinite(dist) & np.isfinite(se) & (se > 1e-12)
    if se0 <= 1e-12 or not ok.any():  # every unit gives the same kappa: nothing to studentize
        lo = hi = est if se0 <= 1e-12 else float("nan")
        return StudentizedInterval(est, lo, hi, dist, int((~ok).sum()))
    t = (dist[ok] - est) / se[ok]
    t_hi, t_lo = np.percentile(t, [50.0 * (1.0 + level), 50.0 * (1.0 - level)])
    low, high = float(est - t_hi * se0), float(est - t_lo * se0)
    return StudentizedInterval(est, low, high, dist, int((~ok).sum()))


def item_bootstrap_t(codes, n_cat: int, *, n_resamples: int, seed: int, level: float) -> StudentizedInterval:
    """:func:`fleiss_studentized` over the item resamples ``bootstrap_ci(..., seed=seed)`` draws."""
    from promptlottery.metrics._resampled import resample_counts
    from promptlottery.metrics.bootstrap import resample_indices

    n = len(codes)
    return fleiss_studentized(
        codes, n_cat, resample_counts(resample_indices(n, n_resamples, seed=seed), n), level=level
    )


def _resample_weights(n: int, n_resamples: int, seed: int, clusters) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``(R, C)`` unit copies of the resamples ``bootstrap_ci`` (items, ``clusters`` None) or
    ``clustered_bootstrap`` (clusters) draws with ``seed``, and each item's unit number."""
    from promptlottery.metrics._resampled import resample_counts
    from promptlottery.metrics.bootstrap import bootstrap_indices
    from promptlottery.metrics.cluster_bootstrap import cluster_resample

    if clusters is None:  # bootstrap_indices: the very draw (and counts) the percentile interval used
        return resample_counts(bootstrap_indices(None, n, n_resamples, seed), n), None
    draws, _ = cluster_resample(clusters, n_resamples, seed=seed)
    units = pd.factorize(np.asarray(clusters))[0]  # as cluster_resample numbers them
    w = np.zeros((len(draws), int(units.max()) + 1))
    np.add.at(w, (np.repeat(np.arange(len(draws)), draws.shape[1]), draws.ravel()), 1.0)
    return w, units


_LAST_STUDENTIZED: list[tuple[tuple, np.ndarray, StudentizedInterval]] = []


def _studentized_once(codes, n_cat: int, w: np.ndarray, level: float, units) -> StudentizedInterval:
    """:func:`fleiss_studentized`, kept for the next call on the same codes and resamples (a
    configuration's two Fleiss columns ask for the same interval)."""
    codes = np.asarray(codes)
    key = (codes.shape, codes.dtype.str, codes.tobytes(), n_cat, level, units is None)
    for k, weights, res in _LAST_STUDENTIZED:
        if k == key and weights is w and units is None:
            return res
    res = fleiss_studentized(codes, n_cat, w, level=level, units=units)
    _LAST_STUDENTIZED[:] = [(key, w, res)]
    return res


def fleiss_interval(
    codes,
    n_cat: int,
    kind: str,
    *,
    percentile: tuple[float, float],
    n_resamples: int,
    seed: int,
    level: float,
    clusters=None,
    noun: str = "items",
) -> tuple[float, float, list[str]]:
    """The ``kind`` interval (``studentized`` or ``percentile``, given) of Fleiss' kappa of the complete
    items x raters matrix of category codes ``codes`` (``0 .. n_cat - 1``), and its notes: the resamples
    without a t, and a warning below :data:`NEAR_NOMINAL_ITEMS` (counting ``noun``).

    The bootstrap-t resamples what the percentile interval resampled: the items (``clusters`` None), or
    the clusters of ``clusters`` (one id per item; a cluster is then the jackknife's unit), with ``seed``.
    """
    kind, notes = str(kind), []
    low, high = percentile
    if kind == "studentized":
        w, units = _resample_weights(len(codes), n_resamples, seed, clusters)
        res = _studentized_once(codes, n_cat, w, level, units)
        low, high = res.low, res.high
        if res.n_undefined:
            notes.append(f"studentized interval: {res.n_undefined} of {len(w)} resamples without a t")
        if high > 1:  # bootstrap-t does not respect kappa's range: its upper end cut at kappa's maximum
            notes.append(f"studentized interval's upper end {high:.3f} cut at kappa's maximum 1")
            high = 1.0
    if len(codes) < NEAR_NOMINAL_ITEMS[kind]:
        notes.append(
            f"{kind} interval on {len(codes)} {noun}: its coverage was measured near nominal from "
            f"{NEAR_NOMINAL_ITEMS[kind]} items only (docs/analysis.md)"
        )
    return low, high, notes
