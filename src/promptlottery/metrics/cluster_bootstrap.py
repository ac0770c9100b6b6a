"""The cluster bootstrap: where several items share a unit that was sampled once (pairs of one
instruction, answers to one question), each resample draws as many clusters as there are, with
replacement, and keeps every item of a drawn cluster (the "pairs cluster bootstrap" of Cameron,
Gelbach & Miller, 2008). With one item per cluster it draws exactly what
:func:`~promptlottery.metrics.bootstrap.bootstrap_ci` draws.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ._validation import (
    UndefinedMetricWarning,
    check_min_items,
    check_positive_int,
    check_same_length,
    to_array,
)
from .bootstrap import (
    BootstrapResult,
    Seed,
    as_scalar,
    check_call,
    check_level,
    check_seed,
    percentile_interval,
    resample_indices,
)

__all__ = [
    "cluster_codes",
    "cluster_resample",
    "cluster_resample_counts",
    "cluster_weights",
    "clustered_bootstrap_ci",
    "clustered_ratio_ci",
]


def cluster_resample(clusters: Any, n_resamples: int = 1000, *, seed: Seed = 0) -> tuple[np.ndarray, list]:
    """The cluster draws of a clustered bootstrap: ``(draws, members)``.

    Clusters are numbered in order of first appearance; ``draws`` is the ``(n_resamples,
    n_clusters)`` matrix ``resample_indices(n_clusters, n_resamples, seed=seed)`` of cluster numbers
    and ``members[c]`` the item positions of cluster ``c``. Resample ``r`` holds the items of the
    clusters ``draws[r]``, a cluster drawn twice contributing its items twice. A missing cluster id
    raises ValueError.

    >>> draws, members = cluster_resample(["q1", "q1", "q2"], 2, seed=0)
    >>> draws.tolist(), [m.tolist() for m in members]
    ([[1, 1], [1, 0]], [[0, 1], [2]])
    """
    ids = to_array(clusters, "clusters")
    if ids.ndim != 1:
        raise ValueError(f"clusters must be one id per item (1-D), got shape {ids.shape}")
    check_min_items(len(ids))
    if pd.isna(ids).any():
        raise ValueError(f"clusters has a missing id at item {int(np.flatnonzero(pd.isna(ids))[0])}")
    codes, uniques = pd.factorize(ids)
    draws = resample_indices(len(uniques), n_resamples, seed=seed)
    order = np.argsort(codes, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(codes, minlength=len(uniques)))[:-1])
    return draws, members


def cluster_resample_counts(clusters: Any, n_resamples: int = 1000, *, seed: Seed = 0) -> np.ndarray:
    """``(n_resamples, n)``: the copies of each item in each resample of :func:`cluster_resample`.

    An item's count is the number of times its cluster was drawn; a statistic that is a sum over
    items is ``counts @ values`` on every resample at once.

    >>> cluster_resample_counts(["q1", "q1", "q2"], 2, seed=0).tolist()
    [[0.0, 0.0, 2.0], [1.0, 1.0, 1.0]]
    """
    draws, members = cluster_resample(clusters, n_resamples, seed=seed)
    n_res, n_clusters = draws.shape
    flat = (np.arange(n_res, dtype=np.int64)[:, None] * n_clusters + draws).ravel()
    per_cluster = np.bincount(flat, minlength=n_res * n_clusters).reshape(n_res, n_clusters)
    codes = np.empty(sum(len(m) for m in members), dtype=np.int64)
    for c, m in enumerate(members):
        codes[m] = c
    return per_cluster[:, codes].astype(np.float64)


def cluster_codes(clusters: Any) -> np.ndarray:
    """One cluster number per item, in order of first appearance; an item without an id (None, NaN)
    is a cluster of its own.

    >>> cluster_codes(["a", "a", None, "b", float("nan"), "a"]).tolist()
    [0, 0, 1, 2, 3, 0]
    """
    ids = to_array(clusters, "clusters")
    if ids.ndim != 1:
        raise ValueError(f"clusters must be one id per item (1-D), got shape {ids.shape}")
    missing = pd.isna(ids)
    seen: dict[tuple, int] = {}
    # a missing id is keyed by its position, so no two missing ids (and no real id) share a cluster
    keys = [("own", i) if m else ("id", v) for i, (v, m) in enumerate(zip(ids, missing, strict=True))]
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.int64)


def cluster_weights(clusters: Any, n_resamples: int = 1000, *, seed: Seed = 0) -> np.ndarray:
    """``(n_resamples, n)`` item weights of a cluster bootstrap: each resample draws as many clusters
    as there are, with replacement, and an item's weight is the number of times its cluster was drawn
    (:func:`cluster_resample_counts` over :func:`cluster_codes`: an item without an id is its own
    cluster). With every item its own cluster these are the counts of ``resample_indices(n,
    n_resamples, seed=seed)``, the plain bootstrap's.

    >>> cluster_weights(["q1", "q1", None], 2, seed=0).tolist()
    [[0.0, 0.0, 2.0], [1.0, 1.0, 1.0]]
    """
    n_resamples = check_positive_int("n_resamples", n_resamples)
    check_seed(seed)
    return cluster_resample_counts(cluster_codes(clusters), n_resamples, seed=seed)


def clustered_bootstrap_ci(
    stat: Callable[..., float],
    *arrays: Any,
    clusters: Any = None,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: Seed = 0,
) -> BootstrapResult:
    """Percentile bootstrap CI of ``stat(*arrays)``, resampling clusters of items.

    As :func:`bootstrap_ci` (arrays indexed together, NaN resamples left out with a warning), but
    each resample is the items of ``n_clusters`` clusters drawn with replacement
    (:func:`cluster_resample`), so items of one cluster stay together. ``clusters=None`` makes
    every item its own cluster: the same draws and interval as ``bootstrap_ci(..., seed=seed)``.
    ``stat`` is looped over the resamples.

    >>> import numpy as np
    >>> res = clustered_bootstrap_ci(np.mean, [1.0, 1.0, 0.0, 0.0], clusters=["a", "a", "b", "b"],
    ...                              n_resamples=200, seed=0)
    >>> res.estimate, sorted(set(np.round(res.distribution, 2).tolist()))
    (0.5, [0.0, 0.5, 1.0])
    """
    n_resamples, level, arrs, n = check_call(stat, n_resamples, level, seed, arrays)
    ids = np.arange(n) if clusters is None else to_array(clusters, "clusters")
    check_same_length([arrs[0], ids], ["arrays[0]", "clusters"])
    draws, members = cluster_resample(ids, n_resamples, seed=seed)
    estimate = as_scalar(stat(*arrs))
    dist = np.empty(len(draws))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for r, row in enumerate(draws):
            idx = np.concatenate([members[c] for c in row])
            dist[r] = as_scalar(stat(*(a[idx] for a in arrs)))
    return percentile_interval(estimate, dist, level, len(draws))


def clustered_ratio_ci(
    numerator: Any,
    denominator: Any,
    *,
    clusters: Any = None,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: Seed = 0,
) -> BootstrapResult:
    """``sum(numerator) / sum(denominator)`` with a cluster-bootstrap percentile CI.

    A pooled share whose items contribute different numbers of events (both orders' verdicts of a
    pair, the annotator pairs of an item): each item brings its count of events (``denominator``)
    and of successes among them (``numerator``). Resamples are drawn as by
    :func:`clustered_bootstrap_ci` (the same draws for the same ``clusters`` and ``seed``) and the
    ratio of the resampled sums computed for all of them at once; a resample with no event is
    undefined (left out with a warning). ``nan`` with an :class:`UndefinedMetricWarning` when no
    item has an event.

    >>> res = clustered_ratio_ci([2, 0, 1], [2, 1, 1], n_resamples=100, seed=0)
    >>> res.estimate
    0.75
    """
    n_resamples = check_positive_int("n_resamples", n_resamples)
    level = check_level(level)
    check_seed(seed)
    num = to_array(numerator, "numerator").astype(np.float64)
    den = to_array(denominator, "denominator").astype(np.float64)
    n = check_same_length([num, den], ["numerator", "denominator"])
    if num.ndim != 1 or den.ndim != 1:
        raise ValueError("numerator and denominator must be one count per item (1-D)")
    if np.isnan(num).any() or np.isnan(den).any() or (den < 0).any() or (num > den).any() or (num < 0).any():
        raise ValueError("numerator and denominator must be counts with 0 <= numerator <= denominator")
    ids = np.arange(n) if clusters is None else to_array(clusters, "clusters")
    check_same_length([num, ids], ["numerator", "clusters"])
    if den.sum() == 0:
        empty = BootstrapResult(float("nan"), float("nan"), float("nan"), level, 0, np.empty(0))
        warnings.warn("the ratio is undefined: no item has an event", UndefinedMetricWarning, stacklevel=2)
        return empty
    w = cluster_resample_counts(ids, n_resamples, seed=seed)
    top, bottom = w @ num, w @ den
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)
    return percentile_interval(float(num.sum() / den.sum()), dist, level, len(w))
