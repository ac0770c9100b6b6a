"""Kendall's tau, Pearson's r and Spearman's rho between paired scores, with their batch forms.

Split out of :mod:`promptlottery.metrics.correlation`, which re-exports every name here; see that
module's docstring for the conventions (NaN pairs dropped, ``nan`` with a warning when undefined).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._fast_kendall import kendall_tau_resampled
from ._lazy import lazy
from ._validation import (
    check_choice,
    check_min_items,
    check_same_length,
    to_numeric_1d,
    warn_undefined,
)

stats = lazy("scipy.stats")

__all__ = [
    "kendall_tau",
    "pearson",
    "spearman",
    "TAU_VARIANTS",
    "kendall_tau_batch",
]


TAU_VARIANTS = ("b", "c")


# --------------------------------------------------------------------------- helpers


def _paired(x: Any, y: Any, names: tuple[str, str] = ("x", "y")) -> tuple[np.ndarray, np.ndarray]:
    """Two numeric 1-D arrays of equal length (>= 2), with the pairs holding a NaN dropped."""
    xa, ya = to_numeric_1d(x, names[0]), to_numeric_1d(y, names[1])
    n = check_same_length([xa, ya], names)
    check_min_items(n)
    keep = ~(np.isnan(xa) | np.isnan(ya))
    return xa[keep], ya[keep]


def _undefined_reason(x: np.ndarray, y: np.ndarray) -> str | None:
    if len(x) < 2:
        return f"fewer than two complete pairs ({len(x)}) after dropping missing values"
    if (x == x[0]).all():
        return "x has no variance"
    if (y == y[0]).all():
        return "y has no variance"
    return None


def _resample_stack(indices: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
    return [a[indices] for a in arrays]


# --------------------------------------------------------------------------- the three coefficients


def kendall_tau(x: Any, y: Any, *, variant: str = "b") -> float:
    """Kendall's tau between paired scores (``scipy.stats.kendalltau``), tie-corrected.

    ``variant="b"`` (the default, as in SciPy and the seed paper) or ``"c"`` (Stuart's tau-c).
    Pairs where either value is NaN are dropped. ``nan`` with an :class:`UndefinedMetricWarning`
    when fewer than two pairs remain or a side is constant.

    >>> round(kendall_tau([1, 2, 3, 4, 5], [1, 3, 2, 5, 4]), 6)
    0.6
    >>> round(kendall_tau([1, 1, 2, 3], [1, 2, 2, 3], variant="c"), 6)
    0.75
    """
    check_choice("variant", variant, TAU_VARIANTS)
    return _scipy_statistic(x, y, "Kendall's tau", lambda a, b: stats.kendalltau(a, b, variant=variant))


def _scipy_statistic(x: Any, y: Any, name: str, test) -> float:
    """``test(x, y).statistic`` on the complete pairs; NaN (with a warning) where ``name`` is undefined."""
    xa, ya = _paired(x, y)
    reason = _undefined_reason(xa, ya)
    if reason:
        return warn_undefined(f"{name} is undefined: {reason}")
    return float(test(xa, ya).statistic)


def kendall_tau_batch(indices: np.ndarray, x: Any, y: Any, *, variant: str = "b") -> np.ndarray | None:
    """Kendall's tau on ``(x[idx], y[idx])`` for each row ``idx`` of ``indices``, vectorised.

    Equals ``[kendall_tau(x[idx], y[idx], variant=variant) for idx in indices]`` (NaN where that
    is undefined) without sorting each resample; see :mod:`promptlottery.metrics._fast_kendall`.
    """
    check_choice("variant", variant, TAU_VARIANTS)
    xa, ya = to_numeric_1d(x, "x"), to_numeric_1d(y, "y")
    check_same_length([xa, ya], ["x", "y"])
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.shape[1] >= 2**24:  # outside what the exact float32 path covers
        return None
    return kendall_tau_resampled(xa, ya, indices, variant=variant)


def pearson(x: Any, y: Any) -> float:
    """Pearson's r between paired scores (``scipy.stats.pearsonr``); NaN pairs dropped.

    >>> round(pearson([1, 2, 3, 4], [2, 4, 5, 9]), 6)
    0.964764
    """
    return _scipy_statistic(x, y, "Pearson's r", stats.pearsonr)


def _pearson_rows(xs: np.ndarray, ys: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Pearson's r of each row pair of two (R, n) matrices, on the entries where ``keep`` holds.

    NaN where fewer than two entries are kept or a side is constant on them (as the loop form).
    """
    if keep is None:
        keep = np.ones(xs.shape, dtype=bool)
    n_kept = keep.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        xm = np.where(keep, xs - np.where(keep, xs, 0.0).sum(axis=1, keepdims=True) / n_kept[:, None], 0.0)
        ym = np.where(keep, ys - np.where(keep, ys, 0.0).sum(axis=1, keepdims=True) / n_kept[:, None], 0.0)
        r = np.einsum("ij,ij->i", xm, ym) / np.sqrt(
            np.einsum("ij,ij->i", xm, xm) * np.einsum("ij,ij->i", ym, ym)
        )
    constant = _constant_rows(xs, keep) | _constant_rows(ys, keep)
    r = np.clip(r, -1.0, 1.0)
    r[constant | (n_kept < 2)] = np.nan
    return r


def _constant_rows(m: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep, m, np.inf).min(axis=1) == np.where(keep, m, -np.inf).max(axis=1)


def _pearson_rows_batch(indices: np.ndarray, x: Any, y: Any, transform=None) -> np.ndarray:
    """Pearson's r of each resample (after ``transform`` of the kept values, if given); NaN pairs dropped."""
    xa, ya = to_numeric_1d(x, "x"), to_numeric_1d(y, "y")
    check_same_length([xa, ya], ["x", "y"])
    valid = ~(np.isnan(xa) | np.isnan(ya))
    out = np.empty(len(indices))
    step = max(1, 2**20 // max(1, indices.shape[1]))
    for s in range(0, len(indices), step):
        xs, ys = _resample_stack(indices[s : s + step], xa, ya)
        keep = valid[indices[s : s + step]]
        if transform is not None:
            xs, ys = transform(xs, keep), transform(ys, keep)
        out[s : s + step] = _pearson_rows(xs, ys, None if valid.all() else keep)
    return out


def _pearson_batch(indices: np.ndarray, x: Any, y: Any) -> np.ndarray:
    """Pearson's r on each resample (pairs with a missing value dropped, as in the loop)."""
    return _pearson_rows_batch(indices, x, y)


def spearman(x: Any, y: Any) -> float:
    """Spearman's rho between paired scores (``scipy.stats.spearmanr``); NaN pairs dropped.

    >>> round(spearman([1, 2, 3, 4], [2, 4, 5, 9]), 6)
    1.0
    """
    return _scipy_statistic(x, y, "Spearman's rho", stats.spearmanr)


def _ranks_of_kept(m: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Average ranks within each row among the kept entries (the dropped ones rank last, unused)."""
    return stats.rankdata(np.where(keep, m, np.inf), axis=1)


def _spearman_batch(indices: np.ndarray, x: Any, y: Any) -> np.ndarray:
    """Spearman's rho on each resample: Pearson's r of the ranks of the complete pairs."""
    return _pearson_rows_batch(indices, x, y, _ranks_of_kept)


kendall_tau.batch = kendall_tau_batch  # type: ignore[attr-defined]
pearson.batch = _pearson_batch  # type: ignore[attr-defined]
spearman.batch = _spearman_batch  # type: ignore[attr-defined]
