"""Agreement between raters on categorical (or ordinal / interval) labels.

Inputs are plain arrays: two 1-D label vectors for the two-rater measures, an ``items x raters``
matrix for the many-rater ones (the same orientation for every function here). Missing ratings are
``NaN`` / ``None`` / ``pd.NA``. The computations are those of scikit-learn
(:func:`sklearn.metrics.cohen_kappa_score`, its formula applied to the contingency table here),
statsmodels
(:func:`statsmodels.stats.inter_rater.fleiss_kappa`) and the ``krippendorff`` package; this module
adds input checking, a declared label scale (``labels=``) and ``nan`` plus an
:class:`UndefinedMetricWarning` where a measure is undefined.

Each function also carries a ``batch(indices, *arrays, **options)`` form that computes it on many
bootstrap resamples at once from the resample counts (see :mod:`._resampled`), which
:func:`~promptlottery.metrics.bootstrap_ci` uses; equal to the loop to rounding.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import krippendorff as _krippendorff
import numpy as np

from ._resampled import (
    fleiss_kappa_resampled,
    kappa_weights,
    krippendorff_alpha_resampled,
    mean_defined,
    pairwise_kappa_resampled,
    pairwise_overlap_resampled,
    resample_counts,
)
from ._validation import (
    UndefinedMetricWarning,
    check_choice,
    check_min_items,
    check_no_empty_rows,
    check_same_length,
    encode_labels,
    missing_mask,
    to_1d,
    to_array,
    to_numeric_2d,
    warn_undefined,
)

__all__ = [
    "overlap",
    "mean_pairwise_overlap",
    "cohen_kappa",
    "mean_pairwise_cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
]

_KAPPA_WEIGHTS = (None, "linear", "quadratic")
_ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")
_PACKAGE_MAX_CELLS = 2**22  # above this many items x values^2, alpha is not handed to the package


# --------------------------------------------------------------------------- helpers


def _pair_codes(a: Any, b: Any, labels: Sequence[Any] | None) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes of two paired label vectors on one shared scale, with pairs having a missing value dropped."""
    codes, n_labels = _pair_matrix(a, b, labels)
    keep = (codes >= 0).all(axis=1)
    return codes[keep, 0], codes[keep, 1], n_labels


def _pair_matrix(a: Any, b: Any, labels: Sequence[Any] | None) -> tuple[np.ndarray, int]:
    """``(n, 2)`` codes of two paired label vectors on one shared scale (``-1``: missing)."""
    a_arr, b_arr = to_1d(a, "a"), to_1d(b, "b")
    n = check_same_length([a_arr, b_arr], ["a", "b"])
    check_min_items(n)
    if a_arr.dtype.kind in "biuf" and b_arr.dtype.kind in "biuf":
        both = np.concatenate([a_arr.astype(np.float64), b_arr.astype(np.float64)])
    else:  # keep labels as they are: no silent promotion of 1 to "1"
        both = np.concatenate([a_arr.astype(object), b_arr.astype(object)])
    codes, scale = encode_labels(both, labels, "a/b")
    return np.stack([codes[:n], codes[n:]], axis=1), len(scale)


def _matrix_codes(ratings: Any, labels: Sequence[Any] | None) -> tuple[np.ndarray, list[Any]]:
    arr = to_array(ratings, "ratings")
    if arr.ndim != 2:
        raise ValueError(f"ratings must be a two-dimensional items x raters matrix, got shape {arr.shape}")
    check_min_items(arr.shape[0], "items (rows of ratings)")
    check_min_items(arr.shape[1], "raters (columns of ratings)")
    check_no_empty_rows(missing_mask(arr), "ratings")
    return encode_labels(arr, labels, "ratings")


def _kappa_from_codes(ca: np.ndarray, cb: np.ndarray, n_labels: int, weights: str | None) -> float | None:
    """scikit-learn's ``cohen_kappa_score`` on integer codes; None where it is undefined.

    sklearn's formula, ``1 - sum(W * observed) / sum(W * expected)``, on the contingency table
    (tested equal to ``cohen_kappa_score``): calling sklearn costs milliseconds of argument checks
    per pair, which the analysis of a large grid pays thousands of times.
    """
    if ca.size < 2:
        return None
    table = np.bincount(ca * n_labels + cb, minlength=n_labels * n_labels).reshape(n_labels, n_labels)
    sum0, sum1 = table.sum(axis=0), table.sum(axis=1)
    expected = np.outer(sum0, sum1) / sum0.sum()
    wmat = kappa_weights(n_labels, weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = 1.0 - np.sum(wmat * table) / np.sum(wmat * expected)
    return float(k) if np.isfinite(k) else None


def _mean_over_pairs(values: list[float | None], what: str, n_raters: int) -> float:
    defined = [v for v in values if v is not None]
    if not defined:
        return warn_undefined(f"{what} is undefined for every pair of the {n_raters} raters", stacklevel=4)
    if len(defined) < len(values):
        warnings.warn(
            f"{what} is undefined for {len(values) - len(defined)} of {len(values)} rater pairs "
            "(no shared items or no variation); averaging the others",
            UndefinedMetricWarning,
            stacklevel=4,
        )
    return float(np.mean(defined))


# --------------------------------------------------------------------------- raw agreement


def overlap(a: Any, b: Any, *, labels: Sequence[Any] | None = None) -> float:
    """Raw agreement: the share of items on which two raters give the same label.

    Pairs where either label is missing are dropped. ``labels`` declares the scale: a label outside
    it raises ValueError.

    >>> overlap(["yes", "no", "yes", "yes"], ["yes", "no", "no", "yes"])
    0.75
    >>> overlap([1, 2, 3], [1, 2, 3], labels=[1, 2, 3, 4, 5])
    1.0
    """
    ca, cb, _ = _pair_codes(a, b, labels)
    if ca.size == 0:
        return warn_undefined("overlap is undefined: no item has a label from both raters")
    return float(np.mean(ca == cb))


def mean_pairwise_overlap(ratings: Any, *, labels: Sequence[Any] | None = None) -> float:
    """Mean over all pairs of raters of their raw agreement (:func:`overlap`).

    ``ratings`` is an items x raters matrix; for each pair of raters only the items both rated count.

    >>> mean_pairwise_overlap([[1, 1, 1], [2, 2, 1], [3, 3, 3]])
    0.7777777777777777
    """
    codes, _ = _matrix_codes(ratings, labels)
    values: list[float | None] = []
    for j, k in itertools.combinations(range(codes.shape[1]), 2):
        keep = (codes[:, j] >= 0) & (codes[:, k] >= 0)
        values.append(float(np.mean(codes[keep, j] == codes[keep, k])) if keep.any() else None)
    return _mean_over_pairs(values, "overlap", codes.shape[1])


# --------------------------------------------------------------------------- kappas


def cohen_kappa(a: Any, b: Any, *, weights: str | None = None, labels: Sequence[Any] | None = None) -> float:
    """Cohen's kappa between two raters (scikit-learn's ``cohen_kappa_score``).

    ``weights`` is ``None`` (nominal), ``"linear"`` or ``"quadratic"``; weighted kappa uses the
    positions of the labels on the scale, so for ordinal data declare the full scale in ``labels``
    (in order) if some categories may go unused. Without ``labels`` the scale is the sorted set of
    observed labels. Pairs with a missing label are dropped. Returns ``nan`` with an
    :class:`UndefinedMetricWarning` where kappa is undefined (e.g. both raters always give the same
    single label).

    >>> round(cohen_kappa([1, 2, 3, 1, 2], [1, 2, 2, 1, 3]), 6)
    0.375
    >>> round(cohen_kappa([1, 2, 3, 1, 2], [1, 2, 2, 1, 3], weights="quadratic"), 6)
    0.642857
    """
    check_choice("weights", weights, _KAPPA_WEIGHTS)
    ca, cb, n_labels = _pair_codes(a, b, labels)
    k = _kappa_from_codes(ca, cb, n_labels, weights)
    if k is None:
        return warn_undefined(
            "Cohen's kappa is undefined: fewer than two complete pairs or chance agreement is perfect"
        )
    return k


def mean_pairwise_cohen_kappa(
    ratings: Any, *, weights: str | None = None, labels: Sequence[Any] | None = None
) -> float:
    """Mean of Cohen's kappa over all pairs of raters (Light's kappa when unweighted).

    ``ratings`` is an items x raters matrix; each pair uses the items both raters labelled. Pairs
    where kappa is undefined are left out with a warning.

    >>> round(mean_pairwise_cohen_kappa([[1, 1, 1], [2, 2, 1], [3, 3, 3], [2, 2, 2]]), 6)
    0.757576
    """
    check_choice("weights", weights, _KAPPA_WEIGHTS)
    codes, scale = _matrix_codes(ratings, labels)
    values: list[float | None] = []
    for j, k in itertools.combinations(range(codes.shape[1]), 2):
        keep = (codes[:, j] >= 0) & (codes[:, k] >= 0)
        values.append(_kappa_from_codes(codes[keep, j], codes[keep, k], len(scale), weights))
    return _mean_over_pairs(values, "Cohen's kappa", codes.shape[1])


def fleiss_kappa(ratings: Any, *, labels: Sequence[Any] | None = None) -> float:
    """Fleiss' kappa over an items x raters matrix of category labels (statsmodels' ``fleiss_kappa``).

    Every item must carry the same number of ratings: a missing rating raises ValueError (use
    :func:`krippendorff_alpha` for incomplete data). The columns need not be the same raters.

    >>> round(fleiss_kappa([["a", "a", "a"], ["b", "b", "a"], ["b", "b", "b"], ["a", "b", "a"]]), 6)
    0.333333
    """
    codes, scale = _matrix_codes(ratings, labels)
    incomplete = np.flatnonzero((codes < 0).any(axis=1))
    if incomplete.size:
        shown = ", ".join(str(i) for i in incomplete[:10]) + (", ..." if incomplete.size > 10 else "")
        raise ValueError(
            f"fleiss_kappa needs the same number of ratings for every item; rows {shown} have missing "
            "ratings (use krippendorff_alpha for incomplete data)"
        )
    n_items, n_raters = codes.shape
    n_cat = len(scale)
    table = np.bincount((np.arange(n_items)[:, None] * n_cat + codes).ravel(), minlength=n_items * n_cat)
    table = table.reshape(n_items, n_cat)
    p_cat = table.sum(axis=0) / table.sum()
    if np.isclose((p_cat**2).sum(), 1.0, rtol=0, atol=1e-15):
        return warn_undefined("Fleiss' kappa is undefined: every rating is the same category")
    from statsmodels.stats.inter_rater import fleiss_kappa as _sm_fleiss_kappa  # slow to import

    return float(_sm_fleiss_kappa(table, method="fleiss"))


def krippendorff_alpha(ratings: Any, *, level: str = "nominal", labels: Sequence[Any] | None = None) -> float:
    """Krippendorff's alpha over an items x raters matrix (the ``krippendorff`` package).

    Missing ratings are NaN / None. ``level`` is ``"nominal"``, ``"ordinal"``, ``"interval"`` or
    ``"ratio"``. For nominal and ordinal data the labels may be any hashable values; the ordinal
    order is that of ``labels`` when given, else the sorted observed values. Interval and ratio data
    must be numeric; ``labels`` then declares the admissible values. Items rated only once are
    unpairable and do not count. Returns ``nan`` with an :class:`UndefinedMetricWarning` when no
    item has two ratings or all pairable ratings are the same value.

    >>> data = [[1, 1, 2], [2, 2, 2], [3, 3, None], [1, 2, 1]]
    >>> round(krippendorff_alpha(data, level="nominal"), 6)
    0.473684
    >>> round(krippendorff_alpha(data, level="interval"), 6)
    0.677419
    """
    codes, domain = _alpha_codes(ratings, level, labels)
    n_items, n_cat = codes.shape[0], len(domain)
    present = codes >= 0
    rows = np.repeat(np.arange(n_items), codes.shape[1])[present.ravel()]
    counts = np.bincount(rows * n_cat + codes[present], minlength=n_items * n_cat).reshape(n_items, n_cat)
    pairable = counts.sum(axis=1) >= 2
    if not pairable.any():
        return warn_undefined("Krippendorff's alpha is undefined: no item has ratings from two raters")
    if (counts[pairable].sum(axis=0) > 0).sum() < 2:
        return warn_undefined("Krippendorff's alpha is undefined: all pairable ratings are the same value")
    if len(domain) < 2:  # unreachable given the check above; kept for the package's own precondition
        return warn_undefined("Krippendorff's alpha is undefined: a single value on the scale")
    if n_items * n_cat * n_cat > _PACKAGE_MAX_CELLS:
        # the package builds an items x V x V array: many distinct values (unrounded scores) take the
        # per-item route of the batch form instead (same value to rounding, tested)
        return float(krippendorff_alpha_resampled(np.ones((1, n_items)), codes, domain, level)[0])
    return float(_krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level))


def _alpha_codes(ratings: Any, level: str, labels: Sequence[Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the ratings and the value of each code (its position for nominal / ordinal data)."""
    check_choice("level", level, _ALPHA_LEVELS)
    arr = to_array(ratings, "ratings")
    if level in ("interval", "ratio"):
        if arr.dtype.kind not in "biuf":
            arr = to_numeric_2d(arr, "ratings")
        if labels is not None and not all(_is_real(v) for v in labels):
            raise ValueError(f"level={level!r} needs numeric labels, got {list(labels)!r}")
    codes, scale = _matrix_codes(arr, labels)
    if level in ("interval", "ratio"):
        return codes, np.asarray(scale, dtype=np.float64)
    return codes, np.arange(len(scale))


def _is_real(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


# --------------------------------------------------------------------------- every resample at once
# ``f.batch(indices, *arrays, **options)`` = ``[f(*(a[idx] for a in arrays), **options) for idx in
# indices]`` (NaN where undefined), computed from the resample counts (see ``_resampled``); used by
# ``bootstrap_ci``. None means "use the loop": weighted kappa without a declared scale (the
# positions of the labels would change with the labels a resample happens to contain).


def _overlap_batch(indices: np.ndarray, a: Any, b: Any, *, labels: Sequence[Any] | None = None) -> np.ndarray:
    codes, _ = _pair_matrix(a, b, labels)
    return pairwise_overlap_resampled(resample_counts(indices, len(codes)), codes)[:, 0]


def _mean_pairwise_overlap_batch(
    indices: np.ndarray, ratings: Any, *, labels: Sequence[Any] | None = None
) -> np.ndarray:
    codes, _ = _matrix_codes(ratings, labels)
    return mean_defined(pairwise_overlap_resampled(resample_counts(indices, len(codes)), codes))


def _cohen_kappa_batch(
    indices: np.ndarray, a: Any, b: Any, *, weights: str | None = None, labels: Sequence[Any] | None = None
) -> np.ndarray | None:
    check_choice("weights", weights, _KAPPA_WEIGHTS)
    if weights is not None and labels is None:
        return None
    codes, n_labels = _pair_matrix(a, b, labels)
    return pairwise_kappa_resampled(resample_counts(indices, len(codes)), codes, n_labels, weights)[:, 0]


def _mean_pairwise_cohen_kappa_batch(
    indices: np.ndarray, ratings: Any, *, weights: str | None = None, labels: Sequence[Any] | None = None
) -> np.ndarray | None:
    check_choice("weights", weights, _KAPPA_WEIGHTS)
    if weights is not None and labels is None:
        return None
    codes, scale = _matrix_codes(ratings, labels)
    w = resample_counts(indices, len(codes))
    return mean_defined(pairwise_kappa_resampled(w, codes, len(scale), weights))


def _fleiss_kappa_batch(
    indices: np.ndarray, ratings: Any, *, labels: Sequence[Any] | None = None
) -> np.ndarray | None:
    codes, scale = _matrix_codes(ratings, labels)
    if (codes < 0).any():  # the loop raises the ValueError that explains it
        return None
    return fleiss_kappa_resampled(resample_counts(indices, len(codes)), codes, len(scale))


def _krippendorff_alpha_batch(
    indices: np.ndarray, ratings: Any, *, level: str = "nominal", labels: Sequence[Any] | None = None
) -> np.ndarray:
    codes, domain = _alpha_codes(ratings, level, labels)
    return krippendorff_alpha_resampled(resample_counts(indices, len(codes)), codes, domain, level)


overlap.batch = _overlap_batch  # type: ignore[attr-defined]
mean_pairwise_overlap.batch = _mean_pairwise_overlap_batch  # type: ignore[attr-defined]
cohen_kappa.batch = _cohen_kappa_batch  # type: ignore[attr-defined]
mean_pairwise_cohen_kappa.batch = _mean_pairwise_cohen_kappa_batch  # type: ignore[attr-defined]
fleiss_kappa.batch = _fleiss_kappa_batch  # type: ignore[attr-defined]
krippendorff_alpha.batch = _krippendorff_alpha_batch  # type: ignore[attr-defined]
