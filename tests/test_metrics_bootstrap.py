"""promptlottery.metrics bootstrap: resampling, the vectorised statistics, the paired test."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy import stats

from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    fleiss_kappa,
    kendall_tau,
    paired_bootstrap_test,
    pareto_dominance_tau,
    pearson,
    resample_indices,
    spearman,
)
from promptlottery.metrics._fast_kendall import kendall_tau_resampled

TOL = 1e-9


def _data(kind, n, seed):
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        x = rng.normal(size=n)
        y = x + rng.normal(size=n)
    elif kind == "rounded":  # ties everywhere, runs of 1-5 items
        x = np.round(rng.normal(size=n), 1)
        y = np.round(x + rng.normal(size=n), 1)
    elif kind == "likert":
        x = rng.integers(1, 6, n).astype(float)
        y = np.clip(x + rng.integers(-1, 2, n), 1, 5)
    elif kind == "mixed":  # continuous judge score vs. tied human means
        y = np.round(rng.uniform(0, 5, n) * 5) / 5
        x = np.round(np.clip(y + rng.normal(0, 1, n), 0, 5), 2)
    elif kind == "fewties":  # nearly all distinct, a few tied pairs and one long run
        x = rng.normal(size=n)
        y = x + rng.normal(size=n)
        x[:8], y[10:14], x[-20:] = x[8:16], y[20:24], 9.0
    elif kind == "nan":
        x = np.round(rng.normal(size=n), 1)
        y = np.clip(np.round(x + rng.normal(size=n)), -2, 2)
        x[rng.random(n) < 0.15] = np.nan
        y[rng.random(n) < 0.15] = np.nan
    return x, y


def _scipy_taus(x, y, idx, variant="b"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for row in idx:
            xs, ys = x[row], y[row]
            keep = ~(np.isnan(xs) | np.isnan(ys))
            out.append(stats.kendalltau(xs[keep], ys[keep], variant=variant).statistic)
    return np.array(out)


# --------------------------------------------------------------------------- vectorised Kendall tau


@pytest.mark.parametrize("kind", ["continuous", "rounded", "likert", "mixed", "fewties", "nan"])
@pytest.mark.parametrize("variant", ["b", "c"])
@pytest.mark.parametrize("block_size", [None, 1, 4, 37])
def test_resampled_kendall_equals_scipy_on_each_resample(kind, variant, block_size):
    x, y = _data(kind, 300, seed=sum(map(ord, kind)) + (block_size or 0))
    idx = resample_indices(300, 12, seed=5)
    fast = kendall_tau_resampled(x, y, idx, variant=variant, block_size=block_size)
    ref = _scipy_taus(x, y, idx, variant)
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(ref))
    np.testing.assert_allclose(fast, ref, rtol=0, atol=TOL)


def test_resampled_kendall_small_and_degenerate_resamples():
    x = np.array([1.0, 2.0, 3.0, np.nan])
    y = np.array([1.0, 1.0, 2.0, 5.0])
    idx = np.array([[0, 0, 0, 0], [0, 1, 1, 3], [0, 1, 2, 3], [3, 3, 3, 3], [2, 0, 1, 2]])
    np.testing.assert_allclose(kendall_tau_resampled(x, y, idx), _scipy_taus(x, y, idx), atol=TOL)


def test_resampled_kendall_large_n_takes_the_float64_route():
    x, y = _data("rounded", 9000, seed=2)  # n > 8192: products are no longer exact in float32
    idx = resample_indices(9000, 2, seed=1)
    np.testing.assert_allclose(kendall_tau_resampled(x, y, idx), _scipy_taus(x, y, idx), rtol=0, atol=TOL)


def test_resampled_kendall_chunking_does_not_change_results():
    x, y = _data("mixed", 200, seed=4)
    idx = resample_indices(200, 30, seed=2)
    whole = kendall_tau_resampled(x, y, idx)
    chunked = kendall_tau_resampled(x, y, idx, max_chunk_elements=500)
    np.testing.assert_array_equal(whole, chunked)


# --------------------------------------------------------------------------- bootstrap_ci


def test_resample_indices_is_the_documented_draw():
    idx = resample_indices(50, 7, seed=3)
    np.testing.assert_array_equal(idx, np.random.default_rng(3).integers(0, 50, size=(7, 50)))
    assert idx.shape == (7, 50) and idx.min() >= 0 and idx.max() < 50


@pytest.mark.parametrize("kind", ["rounded", "nan"])
def test_bootstrap_ci_kendall_equals_the_scipy_loop(kind):
    x, y = _data(kind, 150, seed=8)
    idx = resample_indices(150, 200, seed=4)
    res = bootstrap_ci(kendall_tau, x, y, n_resamples=200, seed=4)
    ref = _scipy_taus(x, y, idx)
    np.testing.assert_allclose(res.distribution, ref, rtol=0, atol=TOL)
    keep = ~(np.isnan(x) | np.isnan(y))
    assert res.estimate == pytest.approx(stats.kendalltau(x[keep], y[keep]).statistic, abs=TOL)
    low, high = np.percentile(ref[~np.isnan(ref)], [2.5, 97.5])
    assert res.low == pytest.approx(low, abs=TOL) and res.high == pytest.approx(high, abs=TOL)
    assert res.level == 0.95 and res.n_resamples == 200
    # the same resamples passed explicitly give the same interval
    same = bootstrap_ci(kendall_tau, x, y, indices=idx)
    assert (same.low, same.high) == (res.low, res.high)


@pytest.mark.parametrize(
    "stat",
    [kendall_tau, functools.partial(kendall_tau, variant="c"), pearson, spearman],
    # names, not reprs: a repr holds the function's address, which differs between pytest-xdist workers
    ids=["kendall_tau", "kendall_tau_c", "pearson", "spearman"],
)
def test_bootstrap_vectorised_equals_loop(stat):
    x, y = _data("rounded", 120, seed=1)
    fast = bootstrap_ci(stat, x, y, n_resamples=60, seed=2, level=0.9)
    slow = bootstrap_ci(stat, x, y, n_resamples=60, seed=2, level=0.9, vectorized=False)
    np.testing.assert_allclose(fast.distribution, slow.distribution, rtol=0, atol=TOL)
    assert fast.low == pytest.approx(slow.low, abs=TOL) and fast.high == pytest.approx(slow.high, abs=TOL)


def test_bootstrap_ci_with_missing_values_uses_loop_where_needed():
    x, y = _data("nan", 80, seed=3)
    fast = bootstrap_ci(pearson, x, y, n_resamples=40, seed=1)
    slow = bootstrap_ci(pearson, x, y, n_resamples=40, seed=1, vectorized=False)
    np.testing.assert_allclose(fast.distribution, slow.distribution, atol=TOL)


def test_bootstrap_ci_resamples_matrix_rows_and_arbitrary_callables():
    rng = np.random.default_rng(0)
    ratings = rng.integers(1, 4, size=(40, 5))
    res = bootstrap_ci(fleiss_kappa, ratings, n_resamples=50, seed=0)
    idx = resample_indices(40, 50, seed=0)
    np.testing.assert_allclose(res.distribution, [fleiss_kappa(ratings[i]) for i in idx], atol=TOL)
    mean_diff = bootstrap_ci(lambda a, b: float(np.mean(a - b)), [1.0, 2, 3, 4], [0.0, 2, 2, 5], seed=0)
    assert mean_diff.estimate == pytest.approx(0.25)


def test_bootstrap_ci_undefined_resamples_are_left_out_with_a_warning():
    x = np.array([1.0, 1, 1, 1, 1, 1, 1, 2])  # many resamples miss the single 2: tau undefined
    y = np.arange(8.0)
    with pytest.warns(UndefinedMetricWarning, match="undefined on"):
        res = bootstrap_ci(kendall_tau, x, y, n_resamples=100, seed=0)
    assert 0 < res.n_undefined < 100
    assert np.isfinite(res.low) and np.isfinite(res.high)


def test_bootstrap_ci_bad_input():
    with pytest.raises(ValueError, match="mismatched lengths: arrays\\[0\\] has 3, arrays\\[1\\] has 2"):
        bootstrap_ci(kendall_tau, [1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2 items, got 1"):
        bootstrap_ci(kendall_tau, [1], [1])
    with pytest.raises(ValueError, match="level must be a number strictly between 0 and 1"):
        bootstrap_ci(kendall_tau, [1, 2], [1, 2], level=95)
    with pytest.raises(ValueError, match="n_resamples must be an integer >= 1"):
        bootstrap_ci(kendall_tau, [1, 2], [1, 2], n_resamples=0)
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 3\)"):
        bootstrap_ci(kendall_tau, [1, 2, 3], [1, 2, 3], indices=[[0, 1, 3]])
    with pytest.raises(ValueError, match="seed must be"):
        bootstrap_ci(kendall_tau, [1, 2], [1, 2], seed="abc")
    with pytest.raises(ValueError, match="stat must be callable"):
        bootstrap_ci("kendall", [1, 2], [1, 2])
    with pytest.raises(ValueError, match="at least one array"):
        bootstrap_ci(kendall_tau)


# --------------------------------------------------------------------------- paired bootstrap test


def _rank_probe(order):
    """Data for which resample r (all copies of item r) gives the difference order[r] exactly."""
    n = len(order)
    idx = np.repeat(np.arange(n)[:, None], 4, axis=1)
    human = np.zeros(n)
    return idx, np.asarray(order, dtype=float), np.zeros(n), human


def _first(human, cond):
    return float(cond[0])


def test_paired_bootstrap_uses_the_papers_order_statistics():
    rng = np.random.default_rng(0)
    order = rng.permutation(1000)  # differences 0..999 in a random order: sorted value at rank k is k-1
    idx, a, b, h = _rank_probe(order)
    one = paired_bootstrap_test(_first, a, b, h, indices=idx)
    assert (one.low, one.high) == (24.0, 974.0)  # the 25th and 975th sorted values
    three = paired_bootstrap_test(_first, a, b, h, indices=idx, n_comparisons=3)
    assert (three.low, three.high) == ((7 + 8) / 2, (990 + 991) / 2)  # means of 8th/9th, 991st/992nd
    assert one.significant and three.significant  # 0 lies below both intervals
    shifted = paired_bootstrap_test(_first, a - 500, b, h, indices=idx)
    assert (shifted.low, shifted.high) == (-476.0, 474.0) and not shifted.significant


def test_paired_bootstrap_matches_a_direct_implementation():
    rng = np.random.default_rng(5)
    n = 120
    human = np.round(rng.uniform(1, 5, n) * 2) / 2
    good = np.clip(np.round(human + rng.normal(0, 0.7, n)), 1, 5)
    bad = np.clip(np.round(human + rng.normal(0, 1.6, n)), 1, 5)
    res = paired_bootstrap_test(kendall_tau, good, bad, human, seed=9)
    idx = resample_indices(n, 1000, seed=9)
    diffs = np.sort(_scipy_taus(human, good, idx) - _scipy_taus(human, bad, idx))
    assert res.low == pytest.approx(diffs[24], abs=TOL) and res.high == pytest.approx(diffs[974], abs=TOL)
    assert res.difference == pytest.approx(kendall_tau(human, good) - kendall_tau(human, bad), abs=TOL)
    assert res.significant == (res.low > 0 or res.high < 0)
    bonf = paired_bootstrap_test(kendall_tau, good, bad, human, seed=9, n_comparisons=3)
    assert bonf.low == pytest.approx((diffs[7] + diffs[8]) / 2, abs=TOL)
    assert bonf.high == pytest.approx((diffs[990] + diffs[991]) / 2, abs=TOL)


def test_paired_bootstrap_with_pareto_dominance_matrices():
    rng = np.random.default_rng(2)
    n = 30
    human = rng.integers(1, 6, n).astype(float)
    a = np.clip(human[:, None] + rng.integers(-1, 2, (n, 3)), 1, 5)
    b = rng.integers(1, 6, (n, 3)).astype(float)
    res = paired_bootstrap_test(pareto_dominance_tau, a, b, human, n_resamples=100, seed=0)
    idx = resample_indices(n, 100, seed=0)
    ref = [pareto_dominance_tau(human[i], a[i]) - pareto_dominance_tau(human[i], b[i]) for i in idx]
    np.testing.assert_allclose(res.distribution, ref, atol=TOL)


def test_paired_bootstrap_bad_input():
    with pytest.raises(ValueError, match="mismatched lengths: cond_a has 3, cond_b has 3, human has 2"):
        paired_bootstrap_test(kendall_tau, [1, 2, 3], [1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="n_comparisons must be an integer >= 1"):
        paired_bootstrap_test(kendall_tau, [1, 2, 3], [3, 2, 1], [1, 2, 3], n_comparisons=0)
    with pytest.raises(ValueError, match="too few defined resamples"), pytest.warns(UndefinedMetricWarning):
        paired_bootstrap_test(kendall_tau, [1, 2, 3], [3, 2, 1], [1, 2, 3], n_resamples=10)
