"""Correlation between judge scores and human scores.

``kendall_tau``, ``pearson`` and ``spearman`` wrap :mod:`scipy.stats` (same values, to the last
bit) and return the coefficient as a float. Pairs where either value is NaN are dropped; if fewer
than two pairs remain, or one side has no variance, the result is ``nan`` with an
:class:`UndefinedMetricWarning`. Each also carries a ``batch(indices, x, y)`` form computing the
statistic on many resamples at once, which :func:`~promptlottery.metrics.bootstrap_ci` uses.

``pareto_dominance_tau`` and ``ratio_tau`` turn a matrix of analytic (per-criterion) judge scores
into a ranking before comparing it with holistic human scores; ``dependent_correlation_test``
says whether one prompt variant agrees with humans significantly better than another.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._coefficients import (
    TAU_VARIANTS,
    kendall_tau,
    kendall_tau_batch,
    pearson,
    spearman,
)
from ._lazy import lazy
from ._resampled import resample_counts
from ._validation import (
    UndefinedMetricWarning,
    check_choice,
    check_min_items,
    check_no_empty_rows,
    check_same_length,
    missing_mask,
    plain,
    to_array,
    to_numeric_1d,
    to_numeric_2d,
    warn_undefined,
)

stats = lazy("scipy.stats")

__all__ = [
    "kendall_tau",
    "pearson",
    "spearman",
    "pareto_dominance_tau",
    "ratio_tau",
    "DependentCorrelationResult",
    "compare_dependent_correlations",
    "dependent_correlation_test",
]


# --------------------------------------------------------------------------- rubric aggregations


def _human_and_matrix(human: Any, matrix: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    h = to_numeric_1d(human, "human_holistic")
    arr = to_array(matrix, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be an items x criteria matrix, got shape {arr.shape}")
    check_same_length([h, arr], ["human_holistic", name])
    check_min_items(len(h))
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns (criteria)")
    check_no_empty_rows(missing_mask(arr), name)
    return h, arr


def _tau_from_signs(h_sign_rows, m_sign_rows) -> tuple[float, int, int]:
    """Accumulate sum(h*m), #nonzero h, #nonzero m over row blocks of the pair-sign matrices."""
    num = nh = nm = 0
    for hs, ms in zip(h_sign_rows, m_sign_rows, strict=True):
        num += int((hs * ms).sum())
        nh += int(np.count_nonzero(hs))
        nm += int(np.count_nonzero(ms))
    return num / 2, nh // 2, nm // 2


def _sign_rows(h: np.ndarray, step: int):
    for s in range(0, len(h), step):
        yield np.sign(h[s : s + step, None] - h[None, :]).astype(np.int8)


def _dominance_rows(a: np.ndarray, step: int):
    """Row blocks of d(A, B): +1 when A Pareto-dominates B, -1 when B dominates A, else 0."""
    for s in range(0, len(a), step):
        diff = a[s : s + step, None, :] - a[None, :, :]
        ge, le = (diff >= 0).all(axis=2), (diff <= 0).all(axis=2)
        gt, lt = (diff > 0).any(axis=2), (diff < 0).any(axis=2)
        yield (ge & gt).astype(np.int8) - (le & lt).astype(np.int8)


def pareto_dominance_tau(human_holistic: Any, model_analytic_matrix: Any) -> float:
    """Kendall's tau between holistic human scores and the Pareto order of analytic judge scores.

    Item A is ranked above item B by the judge only if every analytic sub-score of A is >= B's and
    at least one is greater; otherwise (equal, or better on some criteria and worse on others) the
    pair counts as a judge tie. This is the conservative aggregation of the rubric paper. With
    ``S`` the sum over pairs of ``sign(h_A - h_B) * d(A, B)`` (``d`` = +1, -1 or 0 from dominance)
    and ``n_h``, ``n_d`` the numbers of pairs untied on each side, the result is tau-b's
    ``S / sqrt(n_h * n_d)``; with a single criterion it equals ``scipy.stats.kendalltau`` (tau-b).

    Items with a missing human score or a missing sub-score are dropped; a row of the matrix with
    no sub-score at all raises ValueError. O(n^2 * criteria) time in row blocks.

    >>> human = [1, 2, 3, 4]
    >>> analytic = [[1, 1], [2, 1], [2, 3], [3, 2]]   # items 3 and 4 are incomparable
    >>> round(pareto_dominance_tau(human, analytic), 6)
    0.912871
    """
    h, a = _human_and_matrix(human_holistic, model_analytic_matrix, "model_analytic_matrix")
    a = to_numeric_2d(a, "model_analytic_matrix")
    keep = ~(np.isnan(h) | np.isnan(a).any(axis=1))
    h, a = h[keep], a[keep]
    n, k = a.shape
    if n < 2:
        return warn_undefined(f"pareto_dominance_tau is undefined: {n} complete item(s)")
    step = max(1, 2**22 // max(1, n * k))

    num, n_h, n_m = _tau_from_signs(_sign_rows(h, step), _dominance_rows(a, step))
    if n_h == 0 or n_m == 0:
        side = "human scores" if n_h == 0 else "the analytic scores (no item dominates another)"
        return warn_undefined(f"pareto_dominance_tau is undefined: no untied pair in {side}")
    return float(num / math.sqrt(n_h) / math.sqrt(n_m))


def _pareto_dominance_tau_batch(
    indices: np.ndarray, human_holistic: Any, model_analytic_matrix: Any
) -> np.ndarray:
    """Pareto-dominance tau on each resample, from the resample counts ``w``.

    The loop's sums over ordered pairs of resampled items are quadratic forms in the counts of the
    complete items: ``S = w^T (H * D) w / 2`` and the untied-pair counts ``w^T |H| w / 2``,
    ``w^T |D| w / 2`` (copies of one item tie with each other: zero diagonal). The same integers
    as the loop, hence the same final formula and value.
    """
    h, a = _human_and_matrix(human_holistic, model_analytic_matrix, "model_analytic_matrix")
    a = to_numeric_2d(a, "model_analytic_matrix")
    keep = ~(np.isnan(h) | np.isnan(a).any(axis=1))
    h, a = h[keep], a[keep]
    w = resample_counts(np.asarray(indices), len(keep))[:, keep]
    n, k = a.shape
    step = max(1, 2**22 // max(1, n * k))
    num, n_h, n_m = np.zeros(len(w)), np.zeros(len(w)), np.zeros(len(w))
    for s, (hs, ds) in enumerate(zip(_sign_rows(h, step), _dominance_rows(a, step), strict=True)):
        rows = slice(s * step, s * step + len(hs))
        for acc, mat in ((num, hs * ds), (n_h, np.abs(hs)), (n_m, np.abs(ds))):
            acc += ((w @ mat.T.astype(np.float64)) * w[:, rows]).sum(axis=1)
    num, n_h, n_m = num / 2, n_h / 2, n_m / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = num / np.sqrt(n_h) / np.sqrt(n_m)
    return np.where((w.sum(axis=1) >= 2) & (n_h > 0) & (n_m > 0), tau, np.nan)


pareto_dominance_tau.batch = _pareto_dominance_tau_batch  # type: ignore[attr-defined]

_YES = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0}


def _binary_matrix(arr: np.ndarray) -> np.ndarray:
    """YES/NO answers (yes/no, true/false, 1/0, booleans; case-insensitive) as 1.0/0.0, NaN missing."""
    missing = missing_mask(arr)
    out = np.full(arr.shape, np.nan)
    for pos in zip(*np.nonzero(~missing), strict=True):
        v = arr[pos]
        if isinstance(v, str | np.str_):
            code = _YES.get(v.strip().lower())
        elif isinstance(v, bool | np.bool_ | int | np.integer | float | np.floating) and v in (0, 1):
            code = float(v)
        else:
            code = None
        if code is None:
            raise ValueError(
                f"model_binary_matrix contains the value {plain(v)!r}, which is not in the declared scale "
                "(yes/no, true/false, 1/0)"
            )
        out[pos] = code
    return out


def ratio_tau(human_holistic: Any, model_binary_matrix: Any, *, variant: str = "b") -> float:
    """Kendall's tau between holistic human scores and the judge's share of YES answers.

    ``model_binary_matrix`` is items x checklist questions of YES/NO answers (``"yes"``/``"no"``,
    booleans or 1/0; missing answers NaN/None). Each item's score is the share of YES among its
    answered questions (the instruction-following aggregation); then :func:`kendall_tau`.
    A row with no answer at all, or an answer outside the scale, raises ValueError.

    >>> answers = [["yes", "no", "no"], ["yes", "yes", "no"], ["yes", "yes", "yes"], ["no", "no", "no"]]
    >>> round(ratio_tau([2, 3, 4, 1], answers), 6)
    1.0
    """
    return kendall_tau(*_yes_shares(human_holistic, model_binary_matrix, variant), variant=variant)


def _yes_shares(human_holistic: Any, model_binary_matrix: Any, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """The human scores and each item's share of YES answers (NaN: no answer)."""
    check_choice("variant", variant, TAU_VARIANTS)
    h, arr = _human_and_matrix(human_holistic, model_binary_matrix, "model_binary_matrix")
    b = arr.astype(np.float64) if arr.dtype.kind in "biuf" else None
    if b is None or not np.isin(b[~np.isnan(b)], (0.0, 1.0)).all():
        b = _binary_matrix(arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return h, np.nanmean(b, axis=1)


def _ratio_tau_batch(
    indices: np.ndarray, human_holistic: Any, model_binary_matrix: Any, *, variant: str = "b"
):
    """Each item's YES share does not depend on the resample: Kendall's batch form on the shares."""
    return kendall_tau_batch(
        indices, *_yes_shares(human_holistic, model_binary_matrix, variant), variant=variant
    )


ratio_tau.batch = _ratio_tau_batch  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- dependent correlations


@dataclass(frozen=True)
class DependentCorrelationResult:
    """Outcome of a test of ``r(human, a) == r(human, b)`` on the same items."""

    statistic: float  # Williams' t (df = n - 3) or Steiger's Z
    pvalue: float
    r_a: float  # correlation of condition a with the human scores
    r_b: float
    r_ab: float  # correlation between the two conditions
    n: int
    method: str
    df: float | None  # degrees of freedom of Williams' t; None for Steiger's Z

    @property
    def a_better(self) -> bool:
        """True when ``r_a > r_b``; pair with ``pvalue`` for significance."""
        return self.r_a > self.r_b


def compare_dependent_correlations(
    r_a: float, r_b: float, r_ab: float, n: int, *, method: str = "williams", alternative: str = "two-sided"
) -> DependentCorrelationResult:
    """Test ``rho(h, a) == rho(h, b)`` from the three correlations among ``h``, ``a``, ``b`` on n items.

    ``method="williams"``: Williams' (1959) t as recommended by Steiger (1980, eq. 7), df = n - 3,
    the test used for metric comparisons in MT evaluation (Graham & Baldwin 2014):

        t = (r_a - r_b) * sqrt((n - 1)(1 + r_ab) / (2 (n - 1)/(n - 3) |R| + rbar^2 (1 - r_ab)^3))

    with ``|R| = 1 - r_a^2 - r_b^2 - r_ab^2 + 2 r_a r_b r_ab`` and ``rbar = (r_a + r_b) / 2``.
    ``method="steiger"``: Steiger's (1980, eq. 14) Z on Fisher-transformed coefficients with the
    pooled ``rbar``. ``alternative``: ``"two-sided"``, ``"greater"`` (r_a > r_b) or ``"less"``.

    >>> res = compare_dependent_correlations(0.4, 0.5, 0.1, 103)
    >>> round(res.statistic, 4), round(res.pvalue, 4)
    (-0.8913, 0.3749)
    """
    check_choice("method", method, ("williams", "steiger"))
    check_choice("alternative", alternative, ("two-sided", "greater", "less"))
    for name, r in (("r_a", r_a), ("r_b", r_b), ("r_ab", r_ab)):
        if not (isinstance(r, int | float | np.floating | np.integer) and -1.0 <= float(r) <= 1.0):
            raise ValueError(f"{name} must be a correlation in [-1, 1], got {r!r}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"n must be an integer, got {n!r}")
    r_a, r_b, r_ab, n = float(r_a), float(r_b), float(r_ab), int(n)
    if n <= 3:
        stat = warn_undefined(f"the dependent-correlation test needs more than 3 items, got {n}")
        return DependentCorrelationResult(stat, float("nan"), r_a, r_b, r_ab, n, method, None)
    if method == "williams":
        det = 1.0 - r_a**2 - r_b**2 - r_ab**2 + 2.0 * r_a * r_b * r_ab
        rbar = (r_a + r_b) / 2.0
        # numpy floats: a zero denominator (r_ab = 1 and r_a = r_b) gives nan, not ZeroDivisionError
        denom = np.float64(2.0 * (n - 1) / (n - 3) * det + rbar**2 * (1.0 - r_ab) ** 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = float((r_a - r_b) * np.sqrt((n - 1) * (1.0 + r_ab) / denom))
        df: float | None = float(n - 3)
        dist = stats.t(df)
    else:
        rbar = (r_a + r_b) / 2.0
        psi = r_ab * (1.0 - 2.0 * rbar**2) - 0.5 * rbar**2 * (1.0 - 2.0 * rbar**2 - r_ab**2)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = psi / np.float64(1.0 - rbar**2) ** 2
            stat = float((np.arctanh(r_a) - np.arctanh(r_b)) * np.sqrt(n - 3) / np.sqrt(2.0 - 2.0 * c))
        df = None
        dist = stats.norm()
    if not np.isfinite(stat):
        stat = warn_undefined("the dependent-correlation test is undefined (a correlation of +-1)")
        return DependentCorrelationResult(stat, float("nan"), r_a, r_b, r_ab, n, method, df)
    if alternative == "two-sided":
        p = 2.0 * dist.sf(abs(stat))
    elif alternative == "greater":
        p = dist.sf(stat)
    else:
        p = dist.cdf(stat)
    return DependentCorrelationResult(stat, float(min(1.0, p)), r_a, r_b, r_ab, n, method, df)


def dependent_correlation_test(
    human: Any,
    cond_a: Any,
    cond_b: Any,
    *,
    method: str = "williams",
    correlation: str = "pearson",
    alternative: str = "two-sided",
) -> DependentCorrelationResult:
    """Does prompt variant ``a`` agree with the human scores better than variant ``b``?

    Computes ``r(human, a)``, ``r(human, b)`` and ``r(a, b)`` on the items where all three are
    present (``correlation`` = ``"pearson"`` or ``"spearman"``, the latter applying the test to
    ranks) and runs :func:`compare_dependent_correlations`.

    >>> human = [1, 2, 3, 4, 5, 6, 7, 8]
    >>> a = [1, 3, 2, 4, 6, 5, 8, 7]
    >>> b = [2, 1, 5, 3, 4, 8, 6, 7]
    >>> res = dependent_correlation_test(human, a, b)
    >>> res.a_better, round(res.pvalue, 4)
    (True, 0.3429)
    """
    check_choice("method", method, ("williams", "steiger"))
    check_choice("correlation", correlation, ("pearson", "spearman"))
    check_choice("alternative", alternative, ("two-sided", "greater", "less"))
    h, a, b = (to_numeric_1d(v, nm) for v, nm in ((human, "human"), (cond_a, "cond_a"), (cond_b, "cond_b")))
    check_same_length([h, a, b], ["human", "cond_a", "cond_b"])
    check_min_items(len(h))
    keep = ~(np.isnan(h) | np.isnan(a) | np.isnan(b))
    h, a, b = h[keep], a[keep], b[keep]
    nan = float("nan")
    if len(h) <= 3:
        stat = warn_undefined(
            f"the dependent-correlation test needs more than 3 complete items, got {len(h)}"
        )
        return DependentCorrelationResult(stat, nan, nan, nan, nan, len(h), method, None)
    corr = pearson if correlation == "pearson" else spearman
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndefinedMetricWarning)
        r_a, r_b, r_ab = corr(a, h), corr(b, h), corr(a, b)
    if caught:
        stat = warn_undefined(f"the dependent-correlation test is undefined: {caught[0].message}")
        return DependentCorrelationResult(stat, nan, r_a, r_b, r_ab, len(h), method, None)
    return compare_dependent_correlations(r_a, r_b, r_ab, len(h), method=method, alternative=alternative)
