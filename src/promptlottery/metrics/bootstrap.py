"""Bootstrap over items: confidence intervals (the rubric paper's paired significance test on the
same resamples: :mod:`promptlottery.metrics.paired_test`).

Resampling is over items (rows): paired arrays, and the rows of an items x raters matrix, are
resampled together. ``bootstrap_ci(..., seed=s)`` draws exactly
``resample_indices(n, n_resamples, seed=s)``, so a caller can reproduce (or replace, via
``indices=``) the resamples. When the statistic has a vectorised ``batch`` form (every statistic
of this package has one, and :func:`item_mean` for plain means) all resamples are computed at
once, equal to the loop to rounding; any other callable is looped.

Where several items share a unit that was sampled once (pairs of one instruction, answers to one
question), :func:`~promptlottery.metrics.cluster_bootstrap.clustered_bootstrap_ci` and
:func:`~promptlottery.metrics.cluster_bootstrap.clustered_ratio_ci` resample the clusters instead: each resample draws as many clusters as there are, with replacement, and keeps every item
of a drawn cluster (the "pairs cluster bootstrap" of Cameron, Gelbach & Miller, 2008). With one
item per cluster they draw exactly what :func:`bootstrap_ci` draws.
"""

from __future__ import annotations

import functools
import hashlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validation import (
    UndefinedMetricWarning,
    check_min_items,
    check_positive_int,
    check_same_length,
    to_array,
)

__all__ = [
    "BootstrapResult",
    "percentile_bounds",
    "Seed",
    "resample_indices",
    "bootstrap_ci",
    "item_mean",
    "bca_bounds",
    "as_scalar",
    "bootstrap_indices",
    "bootstrap_replicates",
    "check_call",
    "check_level",
    "check_seed",
    "defined_replicates",
    "order_statistic",
    "percentile_interval",
]

Seed = int | np.random.Generator | None


@dataclass(frozen=True)
class BootstrapResult:
    """A percentile bootstrap interval around a point estimate."""

    estimate: float  # the statistic on the original data
    low: float
    high: float
    level: float
    n_resamples: int
    distribution: np.ndarray = field(repr=False)  # the statistic on each resample (NaN: undefined)

    @property
    def n_undefined(self) -> int:
        """Resamples on which the statistic was undefined (left out of the interval)."""
        return int(np.isnan(self.distribution).sum())


def resample_indices(n: int, n_resamples: int = 1000, *, seed: Seed = 0) -> np.ndarray:
    """The ``(n_resamples, n)`` item indices drawn with replacement that the bootstrap uses.

    ``np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))``.

    >>> resample_indices(4, 2, seed=0)
    array([[3, 2, 2, 1],
           [1, 0, 0, 0]])
    """
    n = check_positive_int("n", n)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_resamples, n))


def item_mean(values: Any) -> float:
    """The mean of one value per item: for 0/1 indicators, the share of items where it holds.

    Unlike ``np.mean`` it carries a vectorised ``batch`` form, so :func:`bootstrap_ci` computes all
    resamples at once (row means of the resampled values, in chunks of rows).

    >>> item_mean([1, 0, 1, 1])
    0.75
    """
    arr = to_array(values, "values")
    if arr.ndim != 1:
        raise ValueError(f"values must be one value per item (1-D), got shape {arr.shape}")
    return float(np.mean(arr.astype(np.float64)))


def _item_mean_batch(indices: np.ndarray, values: Any) -> np.ndarray | None:
    arr = to_array(values, "values").astype(np.float64)
    if np.isnan(arr).any():  # NaN times a zero count is NaN: leave missing values to the loop
        return None
    out = np.empty(len(indices))
    step = max(1, 2**22 // max(1, indices.shape[1]))  # pooled shares resample many items: in chunks
    for s in range(0, len(indices), step):
        out[s : s + step] = arr[indices[s : s + step]].mean(axis=1)
    return out


item_mean.batch = _item_mean_batch  # type: ignore[attr-defined]


# ------------------------------------------- the pieces the paired test and cluster bootstrap share


def check_seed(seed: Any) -> None:
    if seed is not None and not isinstance(seed, np.random.Generator):
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, a numpy Generator or None, got {seed!r}")


def check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float | np.floating) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return float(level)


def _prepare(arrays: Sequence[Any], names: Sequence[str]) -> tuple[list[np.ndarray], int]:
    if not arrays:
        raise ValueError("bootstrap needs at least one array to resample")
    arrs = [to_array(a, nm) for a, nm in zip(arrays, names, strict=True)]
    for a, nm in zip(arrs, names, strict=True):
        if a.ndim == 0:
            raise ValueError(f"{nm} must be an array of items, got a scalar")
    n = check_same_length(arrs, names)
    check_min_items(n)
    return arrs, n


def check_call(
    stat: Any,
    n_resamples: Any,
    level: Any,
    seed: Any,
    arrays: Sequence[Any],
    names: Sequence[str] | None = None,
) -> tuple[int, float, list[np.ndarray], int]:
    """The checks every bootstrap entry point makes: ``stat`` callable, ``n_resamples`` a positive
    int, ``level`` in (0, 1), a valid seed, equal-length arrays (``names`` for the messages,
    default ``arrays[i]``). Returns ``(n_resamples, level, arrays, n)``."""
    if not callable(stat):
        raise ValueError(f"stat must be callable, got {stat!r}")
    n_resamples = check_positive_int("n_resamples", n_resamples)
    level = check_level(level)
    check_seed(seed)
    arrs, n = _prepare(arrays, names or [f"arrays[{i}]" for i in range(len(arrays))])
    return n_resamples, level, arrs, n


@functools.lru_cache(maxsize=8)
def _cached_indices(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The draw of an integer seed, shared (read-only) by the many bootstraps of one matrix."""
    idx = resample_indices(n, n_resamples, seed=seed)
    idx.setflags(write=False)
    return idx


def bootstrap_indices(indices: Any, n: int, n_resamples: int, seed: Seed) -> np.ndarray:
    if indices is None:
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool) and n * n_resamples <= 2**22:
            return _cached_indices(n, n_resamples, int(seed))
        return resample_indices(n, n_resamples, seed=seed)
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] < 1:
        raise ValueError(f"indices must be a non-empty 2-D (n_resamples, n) array, got shape {idx.shape}")
    if idx.dtype.kind not in "iu":
        raise ValueError(f"indices must be integers, got dtype {idx.dtype}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"indices must lie in [0, {n}), got values in [{idx.min()}, {idx.max()}]")
    return idx


def as_scalar(value: Any) -> float:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 0:
        raise ValueError(f"stat must return a single number, got an array of shape {arr.shape}")
    return float(arr)


def _batch_form(stat: Callable) -> tuple[Callable | None, dict]:
    """The vectorised form of ``stat`` (``stat.batch``, also through functools.partial keywords)."""
    kwargs: dict = {}
    func = stat
    if isinstance(stat, functools.partial):
        if stat.args:
            return None, {}
        func, kwargs = stat.func, dict(stat.keywords)
    return getattr(func, "batch", None), kwargs


_REPLICATES_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # key -> (indices kept alive, replicates)


def _replicates_key(batch: Callable, kwargs: dict, arrays: list[np.ndarray], idx: np.ndarray) -> tuple | None:
    """What the replicates of a batch form depend on; None (no caching) for non-numeric data or
    caller-supplied (writable) resamples."""
    if idx.flags.writeable or any(a.dtype.kind not in "biuf" for a in arrays):
        return None
    digest = hashlib.blake2b(digest_size=16)
    for a in arrays:
        digest.update(f"{a.dtype.str}{a.shape}".encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    return (batch, repr(sorted(kwargs.items())), id(idx), digest.hexdigest())


def bootstrap_replicates(
    stat: Callable, arrays: list[np.ndarray], idx: np.ndarray, vectorized: bool
) -> np.ndarray:
    """The statistic on every resample; NaN where it is undefined (warnings kept quiet).

    The batch replicates of the last few (statistic, data, resamples) are kept: one configuration's
    analyses bootstrap the same data more than once (P1 against the humans in each paired test).
    """
    batch, kwargs = _batch_form(stat) if vectorized else (None, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        if batch is not None:
            key = _replicates_key(batch, kwargs, arrays, idx)
            hit = _REPLICATES_CACHE.get(key) if key is not None else None
            if hit is not None and hit[0] is idx:
                return hit[1].copy()
            out = batch(idx, *arrays, **kwargs)
            if out is not None:
                out = np.asarray(out, dtype=np.float64)
                if key is not None:
                    if len(_REPLICATES_CACHE) >= 32:
                        _REPLICATES_CACHE.pop(next(iter(_REPLICATES_CACHE)))
                    _REPLICATES_CACHE[key] = (idx, out.copy())
                return out
        return np.array([as_scalar(stat(*(a[row] for a in arrays))) for row in idx], dtype=np.float64)


def defined_replicates(dist: np.ndarray, what: str) -> np.ndarray:
    ok = dist[~np.isnan(dist)]
    if 0 < ok.size < dist.size:
        warnings.warn(
            f"{what} is undefined on {dist.size - ok.size} of {dist.size} resamples; "
            "they are left out of the interval",
            UndefinedMetricWarning,
            stacklevel=3,
        )
    return ok


# --------------------------------------------------------------------------- public


def bootstrap_ci(
    stat: Callable[..., float],
    *arrays: Any,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: Seed = 0,
    indices: Any = None,
    vectorized: bool = True,
) -> BootstrapResult:
    """Percentile bootstrap confidence interval of ``stat(*arrays)``, resampling items.

    All ``arrays`` (1-D, or items x columns) are indexed by the same resampled item indices, so
    paired scores stay paired. The interval is the ``(1 - level) / 2`` and ``(1 + level) / 2``
    percentiles (``numpy.percentile``, linear) of the resampled statistic. Resamples on which the
    statistic is undefined (NaN) are left out, with a warning.

    ``seed`` fixes the draw: the resamples are ``resample_indices(n, n_resamples, seed=seed)``.
    ``indices`` (an ``(R, n)`` integer matrix) supplies the resamples instead (``n_resamples``
    and ``seed`` are then ignored). ``vectorized=False`` forces the plain loop even when ``stat``
    has a vectorised ``batch`` form (results are the same).

    >>> from promptlottery.metrics import kendall_tau
    >>> x = [1, 2, 3, 4, 5, 6, 7, 8]
    >>> y = [2, 1, 4, 3, 6, 5, 8, 7]
    >>> res = bootstrap_ci(kendall_tau, x, y, n_resamples=200, seed=1)
    >>> round(res.estimate, 4), res.low <= res.estimate <= res.high
    (0.7143, True)
    """
    n_resamples, level, arrs, n = check_call(stat, n_resamples, level, seed, arrays)
    idx = bootstrap_indices(indices, n, n_resamples, seed)
    estimate = as_scalar(stat(*arrs))
    dist = bootstrap_replicates(stat, arrs, idx, vectorized)
    return percentile_interval(estimate, dist, level, len(idx))


def order_statistic(sorted_values: np.ndarray, rank: float) -> float:
    """The value at 1-based ``rank`` of the sorted values; between two ranks, their mean."""
    nearest = round(rank)
    if abs(rank - nearest) < 1e-9:
        return float(sorted_values[nearest - 1])
    lo = math.floor(rank)
    return float((sorted_values[lo - 1] + sorted_values[lo]) / 2.0)


_order_statistic = order_statistic  # the name the rubric study's strata import


def bca_bounds(estimate: float, dist: Any, jackknife: Any, level: float = 0.95) -> tuple[float, float]:
    """The bias-corrected and accelerated (BCa) bootstrap interval (Efron, 1987; Efron & Tibshirani,
    1993, §14.3) from the resampled statistic ``dist`` and the leave-one-item-out values ``jackknife``.

    ``z0 = Phi^-1(share of resamples below the estimate, ties counted half)``; the acceleration
    ``a = sum(d^3) / (6 (sum d^2)^1.5)`` with ``d = mean(jackknife) - jackknife``; the bounds are the
    ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` quantiles of ``dist`` for ``z = Phi^-1((1 -+ level) / 2)``.
    NaN resamples and leave-one-out values are left out; ``(nan, nan)`` when nothing is left.
    With a symmetric, unbiased ``dist`` (z0 = 0, a = 0) it is the percentile interval:

    >>> d = np.arange(1, 100) / 100.0
    >>> [round(v, 3) for v in bca_bounds(0.5, d, [0.4, 0.5, 0.6], 0.9)]
    [0.059, 0.941]
    """
    from scipy.stats import norm

    d = np.asarray(dist, dtype=float)
    d = d[~np.isnan(d)]
    jk = np.asarray(jackknife, dtype=float)
    jk = jk[~np.isnan(jk)]
    if d.size == 0 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    below = (np.sum(d < estimate) + 0.5 * np.sum(d == estimate)) / d.size
    z0 = float(norm.ppf(np.clip(below, 0.5 / d.size, 1 - 0.5 / d.size)))
    dev = jk.mean() - jk if jk.size else np.zeros(1)
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    acc = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
    qs = []
    for z in norm.ppf([(1 - level) / 2, (1 + level) / 2]):
        qs.append(float(norm.cdf(z0 + (z0 + z) / (1 - acc * (z0 + z)))))
    low, high = (float(v) for v in np.quantile(d, qs))
    return low, high


def percentile_interval(estimate: float, dist: np.ndarray, level: float, n_res: int) -> BootstrapResult:
    ok = defined_replicates(dist, "the statistic")
    if ok.size == 0:
        warnings.warn("the statistic is undefined on every resample", UndefinedMetricWarning, stacklevel=3)
        low = high = float("nan")
    else:
        low, high = (float(v) for v in np.percentile(ok, [50.0 * (1.0 - level), 50.0 * (1.0 + level)]))
    return BootstrapResult(estimate, low, high, level, n_res, dist)


def percentile_bounds(dist, level: float, *, finite_only: bool = True) -> tuple[float, float]:
    """The ``level`` percentile interval of the replicates ``dist``, NaN left out (and +-inf too unless
    ``finite_only=False``, where an infinite replicate switches to the ``nearest`` order statistic so
    that a bound is a replicate, e.g. a ratio whose noise is 0); (nan, nan) when none is left.

    >>> percentile_bounds(np.array([1.0, 2.0, np.nan, 3.0]), 0.5)
    (1.5, 2.5)
    """
    d = np.asarray(dist, dtype=float)
    ok = d[np.isfinite(d)] if finite_only else d[~np.isnan(d)]
    if ok.size == 0:
        return float("nan"), float("nan")
    method = "linear" if np.isfinite(ok).all() else "nearest"
    lo, hi = np.percentile(ok, [50 * (1 - level), 50 * (1 + level)], method=method)
    return float(lo), float(hi)
