"""The rubric paper's paired bootstrap test: is the difference between two conditions' agreement with
the humans nonzero, on the same item resamples for both (Bonferroni over the comparisons)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validation import check_positive_int
from .bootstrap import (
    Seed,
    as_scalar,
    bootstrap_indices,
    bootstrap_replicates,
    check_call,
    defined_replicates,
    order_statistic,
)

__all__ = ["PairedBootstrapResult", "paired_bootstrap_test"]


@dataclass(frozen=True)
class PairedBootstrapResult:
    """Outcome of :func:`paired_bootstrap_test`: is ``stat(cond_a) - stat(cond_b)`` nonzero?"""

    difference: float  # stat(human, cond_a) - stat(human, cond_b) on the original data
    low: float
    high: float
    significant: bool  # 0 lies outside [low, high]
    estimate_a: float
    estimate_b: float
    level: float
    n_comparisons: int
    n_resamples: int
    distribution: np.ndarray = field(repr=False)  # the difference on each resample


def paired_bootstrap_test(
    stat: Callable[..., float],
    cond_a: Any,
    cond_b: Any,
    human: Any,
    *,
    n_resamples: int = 1000,
    n_comparisons: int = 1,
    level: float = 0.95,
    seed: Seed = 0,
    indices: Any = None,
    vectorized: bool = True,
) -> PairedBootstrapResult:
    """Paired bootstrap test of the difference between two conditions, as in the rubric paper.

    On each of ``n_resamples`` resamples of the items (the same resample for both conditions) the
    difference ``stat(human, cond_a) - stat(human, cond_b)`` is computed and the differences are
    sorted. With ``R`` resamples and ``alpha = (1 - level) / n_comparisons`` (Bonferroni), the
    interval runs from the value at rank ``R * alpha / 2`` to the value at rank
    ``R * (1 - alpha / 2)`` (1-based), taking the mean of the two neighbouring values when a rank
    falls between two. With the paper's 1000 resamples that is the 25th and 975th values for one
    comparison, and the means of the 8th/9th and 991st/992nd values for three. The difference is
    significant when 0 lies outside the interval.

    ``stat`` is called as ``stat(human, cond)``: :func:`kendall_tau`, :func:`pareto_dominance_tau`
    (``cond`` an items x criteria matrix) and the like. Resamples with an undefined difference are
    left out with a warning.

    >>> from promptlottery.metrics import kendall_tau
    >>> human = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    >>> good = [1, 2, 3, 4, 5, 6, 7, 8, 10, 9]
    >>> bad = [3, 1, 2, 6, 4, 5, 9, 7, 8, 10]
    >>> res = paired_bootstrap_test(kendall_tau, good, bad, human, seed=0)
    >>> round(res.difference, 4), res.significant
    (0.2222, False)
    """
    n_comparisons = check_positive_int("n_comparisons", n_comparisons)
    n_resamples, level, (a, b, h), n = check_call(
        stat, n_resamples, level, seed, [cond_a, cond_b, human], ["cond_a", "cond_b", "human"]
    )
    idx = bootstrap_indices(indices, n, n_resamples, seed)
    est_a, est_b = as_scalar(stat(h, a)), as_scalar(stat(h, b))
    dist = bootstrap_replicates(stat, [h, a], idx, vectorized) - bootstrap_replicates(
        stat, [h, b], idx, vectorized
    )
    ok = np.sort(defined_replicates(dist, "the difference"))
    tail = (1.0 - level) / (2.0 * n_comparisons)
    rank_low, rank_high = ok.size * tail, ok.size * (1.0 - tail)
    if math.floor(rank_low + 1e-9) < 1 or math.ceil(rank_high - 1e-9) > ok.size:
        raise ValueError(
            f"too few defined resamples ({ok.size}) for level={level} with n_comparisons={n_comparisons}: "
            f"the interval needs ranks {rank_low:.2f} and {rank_high:.2f}"
        )
    low, high = order_statistic(ok, rank_low), order_statistic(ok, rank_high)
    return PairedBootstrapResult(
        difference=est_a - est_b,
        low=low,
        high=high,
        significant=bool(low > 0.0 or high < 0.0),
        estimate_a=est_a,
        estimate_b=est_b,
        level=level,
        n_comparisons=n_comparisons,
        n_resamples=len(idx),
        distribution=dist,
    )
