"""promptlottery.metrics correlation measures against SciPy and hand-written references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from promptlottery.metrics import (
    UndefinedMetricWarning,
    compare_dependent_correlations,
    dependent_correlation_test,
    kendall_tau,
    pareto_dominance_tau,
    pearson,
    ratio_tau,
    spearman,
)

TOL = 1e-9


def _scores_with_ties_and_nan(seed, n=80, nan_share=0.1):
    rng = np.random.default_rng(seed)
    human = np.round(rng.normal(3, 1, n) * 2) / 2  # half-point human means: ties
    judge = np.clip(np.round(human + rng.normal(0, 1, n)), 1, 5)  # Likert judge: many ties
    human[rng.random(n) < nan_share] = np.nan
    judge[rng.random(n) < nan_share] = np.nan
    return human, judge


# --------------------------------------------------------------------------- scipy equivalence


@pytest.mark.parametrize("seed", range(6))
def test_correlations_match_scipy_with_ties_and_missing(seed):
    x, y = _scores_with_ties_and_nan(seed)
    keep = ~(np.isnan(x) | np.isnan(y))
    xs, ys = x[keep], y[keep]
    assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(xs, ys).statistic, abs=TOL)
    assert kendall_tau(x, y, variant="c") == pytest.approx(
        stats.kendalltau(xs, ys, variant="c").statistic, abs=TOL
    )
    assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y, nan_policy="omit").statistic, abs=TOL)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(xs, ys).statistic, abs=TOL)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=TOL)


def test_correlations_accept_pandas_and_lists():
    s = pd.Series([1.0, 2.0, None, 4.0, 5.0])
    assert kendall_tau(s, [2, 1, 3, 4, 5]) == pytest.approx(stats.kendalltau([1, 2, 4, 5], [2, 1, 4, 5])[0])
    assert pearson(s, pd.Series([1, 2, 3, 4, 6])) == pytest.approx(
        stats.pearsonr([1, 2, 4, 5], [1, 2, 4, 6])[0]
    )


def test_correlations_undefined_give_nan_and_warning():
    for f in (kendall_tau, pearson, spearman):
        with pytest.warns(UndefinedMetricWarning, match="no variance"):
            assert np.isnan(f([1, 2, 3], [4, 4, 4]))
        with pytest.warns(UndefinedMetricWarning, match="fewer than two complete pairs"):
            assert np.isnan(f([1, np.nan, 3], [np.nan, 2, np.nan]))


def test_correlations_bad_input():
    with pytest.raises(ValueError, match="mismatched lengths: x has 3, y has 2"):
        kendall_tau([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2 items, got 1"):
        pearson([1], [2])
    with pytest.raises(ValueError, match="variant='a' is not valid"):
        kendall_tau([1, 2], [1, 2], variant="a")
    with pytest.raises(ValueError, match="must be numeric; found the value 'high'"):
        spearman([1, 2, "high"], [1, 2, 3])
    with pytest.raises(ValueError, match="one-dimensional"):
        pearson([[1, 2], [3, 4]], [1, 2])


# --------------------------------------------------------------------------- Pareto-dominance tau


def _pareto_reference(h, a):
    """Brute force over pairs, straight from the definition."""
    num = nh = nm = 0
    for i, j in itertools.combinations(range(len(h)), 2):
        hs = np.sign(h[i] - h[j])
        if np.all(a[i] >= a[j]) and np.any(a[i] > a[j]):
            ms = 1
        elif np.all(a[i] <= a[j]) and np.any(a[i] < a[j]):
            ms = -1
        else:
            ms = 0
        num += hs * ms
        nh += hs != 0
        nm += ms != 0
    return num / math.sqrt(nh * nm)


@pytest.mark.parametrize("seed", range(4))
def test_pareto_dominance_tau_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, k = 40, 3
    human = rng.integers(1, 6, n).astype(float)
    analytic = np.clip(human[:, None] + rng.integers(-1, 2, (n, k)), 1, 5).astype(float)
    assert pareto_dominance_tau(human, analytic) == pytest.approx(_pareto_reference(human, analytic), abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_pareto_dominance_tau_one_criterion_is_scipy_tau_b(seed):
    x, y = _scores_with_ties_and_nan(seed, nan_share=0.0)
    assert pareto_dominance_tau(x, y[:, None]) == pytest.approx(stats.kendalltau(x, y).statistic, abs=TOL)
    assert pareto_dominance_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=TOL)


def test_pareto_dominance_tau_incomparable_items_are_ties():
    human = [1, 2]
    assert pareto_dominance_tau(human, [[1, 1], [2, 2]]) == pytest.approx(1.0)
    assert pareto_dominance_tau(human, [[2, 1], [2, 2]]) == pytest.approx(1.0)  # >= on all, > on one
    with pytest.warns(UndefinedMetricWarning, match="no item dominates another"):
        assert np.isnan(pareto_dominance_tau(human, [[1, 2], [2, 1]]))  # incomparable: a judge tie


def test_pareto_dominance_tau_missing_and_bad_input():
    h = np.array([1, 2, 3, 4, np.nan])
    a = np.array([[1, 1], [2, np.nan], [3, 3], [4, 4], [5, 5]])
    keep = [0, 2, 3]
    assert pareto_dominance_tau(h, a) == pytest.approx(_pareto_reference(h[keep], a[keep]), abs=TOL)
    with pytest.raises(ValueError, match=r"all-missing row.*rows 1"):
        pareto_dominance_tau([1, 2, 3], [[1, 1], [np.nan, np.nan], [2, 2]])
    with pytest.raises(ValueError, match="mismatched lengths"):
        pareto_dominance_tau([1, 2, 3], [[1, 1], [2, 2]])
    with pytest.raises(ValueError, match="at least 2 items"):
        pareto_dominance_tau([1], [[1, 1]])


# --------------------------------------------------------------------------- ratio tau


def test_ratio_tau_is_kendall_on_share_of_yes():
    rng = np.random.default_rng(3)
    n, q = 50, 6
    human = rng.integers(1, 11, n).astype(float)
    answers = rng.random((n, q)) < (human[:, None] / 12)
    answers = answers.astype(float)
    answers[rng.random((n, q)) < 0.1] = np.nan
    share = np.nanmean(answers, axis=1)
    assert ratio_tau(human, answers) == pytest.approx(stats.kendalltau(human, share).statistic, abs=TOL)
    words = np.where(np.isnan(answers), None, np.where(answers == 1, "YES", "no")).astype(object)
    assert ratio_tau(human, words) == pytest.approx(stats.kendalltau(human, share).statistic, abs=TOL)
    assert ratio_tau(human, answers, variant="c") == pytest.approx(
        stats.kendalltau(human, share, variant="c").statistic, abs=TOL
    )


def test_ratio_tau_bad_input():
    with pytest.raises(ValueError, match="'maybe', which is not in the declared scale"):
        ratio_tau([1, 2], [["yes", "maybe"], ["no", "no"]])
    with pytest.raises(ValueError, match="value 2"):
        ratio_tau([1, 2], [[1, 2], [0, 0]])
    with pytest.raises(ValueError, match=r"all-missing row.*rows 0"):
        ratio_tau([1, 2], [[None, None], ["yes", "no"]])


# --------------------------------------------------------------------------- dependent correlations


def _williams_psych(n, r12, r13, r23):
    """Transcription of psych::r.test's Williams' t (Steiger 1980, eq. 7)."""
    diff = r12 - r13
    determin = 1 - r12 * r12 - r23 * r23 - r13 * r13 + 2 * r12 * r23 * r13
    av = (r12 + r13) / 2
    cube = (1 - r23) ** 3
    return diff * math.sqrt((n - 1) * (1 + r23) / ((2 * (n - 1) / (n - 3)) * determin + av * av * cube))


def test_williams_test_steiger_example():
    # Steiger (1980) case A, the example of psych::r.test(103, .4, .5, .1): t = -0.89 on 100 df
    res = compare_dependent_correlations(0.4, 0.5, 0.1, 103)
    assert round(res.statistic, 2) == -0.89
    assert res.df == 100
    assert res.statistic == pytest.approx(_williams_psych(103, 0.4, 0.5, 0.1), abs=TOL)
    assert res.pvalue == pytest.approx(2 * stats.t.sf(abs(res.statistic), 100), abs=TOL)
    assert not res.a_better


def test_steiger_z_formula_and_symmetry():
    r_a, r_b, r_ab, n = 0.62, 0.48, 0.55, 200
    res = compare_dependent_correlations(r_a, r_b, r_ab, n, method="steiger")
    rbar = (r_a + r_b) / 2
    psi = r_ab * (1 - 2 * rbar**2) - 0.5 * rbar**2 * (1 - 2 * rbar**2 - r_ab**2)
    c = psi / (1 - rbar**2) ** 2
    z = (np.arctanh(r_a) - np.arctanh(r_b)) * math.sqrt(n - 3) / math.sqrt(2 - 2 * c)
    assert res.statistic == pytest.approx(z, abs=TOL)
    assert res.pvalue == pytest.approx(2 * stats.norm.sf(abs(z)), abs=TOL)
    flipped = compare_dependent_correlations(r_b, r_a, r_ab, n, method="steiger")
    assert flipped.statistic == pytest.approx(-z, abs=TOL)
    # the two tests agree closely on large samples
    w = compare_dependent_correlations(r_a, r_b, r_ab, n)
    assert w.pvalue == pytest.approx(res.pvalue, rel=0.05)
    one_sided = compare_dependent_correlations(r_a, r_b, r_ab, n, alternative="greater")
    assert one_sided.pvalue == pytest.approx(w.pvalue / 2, abs=TOL)


@pytest.mark.parametrize("correlation", ["pearson", "spearman"])
def test_dependent_correlation_test_on_data(correlation):
    rng = np.random.default_rng(11)
    n = 300
    human = rng.normal(size=n)
    good = human + rng.normal(0, 0.5, n)
    bad = human + rng.normal(0, 1.5, n)
    good[5] = np.nan
    keep = ~np.isnan(good)
    res = dependent_correlation_test(human, good, bad, correlation=correlation)
    corr = {"pearson": stats.pearsonr, "spearman": stats.spearmanr}[correlation]
    r_a = corr(good[keep], human[keep]).statistic
    r_b = corr(bad[keep], human[keep]).statistic
    r_ab = corr(good[keep], bad[keep]).statistic
    ref = compare_dependent_correlations(r_a, r_b, r_ab, int(keep.sum()))
    assert res.statistic == pytest.approx(ref.statistic, abs=TOL)
    assert res.n == n - 1 and res.a_better and res.pvalue < 1e-6


def test_dependent_correlation_bad_input_and_undefined():
    with pytest.raises(ValueError, match="r_ab must be a correlation"):
        compare_dependent_correlations(0.5, 0.4, 1.5, 50)
    with pytest.raises(ValueError, match="method='fisher' is not valid"):
        compare_dependent_correlations(0.5, 0.4, 0.3, 50, method="fisher")
    with pytest.raises(ValueError, match="mismatched lengths"):
        dependent_correlation_test([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3])
    with pytest.warns(UndefinedMetricWarning, match="more than 3"):
        assert np.isnan(dependent_correlation_test([1, 2, 3], [1, 3, 2], [2, 1, 3]).statistic)
    with pytest.warns(UndefinedMetricWarning, match="no variance"):
        assert np.isnan(dependent_correlation_test([1, 2, 3, 4, 5], [1, 1, 1, 1, 1], [2, 1, 3, 5, 4]).pvalue)


def test_dependent_correlation_identical_variants_is_nan_with_warning():
    import warnings

    from promptlottery.metrics import compare_dependent_correlations

    for method in ("williams", "steiger"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = compare_dependent_correlations(0.4, 0.4, 1.0, 50, method=method)
        assert np.isnan(res.statistic) and np.isnan(res.pvalue) and caught
