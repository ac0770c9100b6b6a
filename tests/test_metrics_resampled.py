"""Every vectorised bootstrap form equals the loop over resamples (to 1e-9), on data with ties and
missing values: the agreement measures, the correlations, the share of items, Pareto-dominance tau
and the paired test built on them."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    cohen_kappa,
    fleiss_kappa,
    item_mean,
    kendall_tau,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
    overlap,
    paired_bootstrap_test,
    pareto_dominance_tau,
    pearson,
    ratio_tau,
    resample_indices,
    spearman,
)
from promptlottery.metrics._resampled import resample_counts

TOL = 1e-9


def _loop(stat, arrays, idx):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for row in idx:
            out.append(float(stat(*(a[row] for a in arrays))))
    return np.array(out)


def _batch(stat, arrays, idx):
    func, kw = (stat.func, stat.keywords) if isinstance(stat, partial) else (stat, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        out = func.batch(idx, *arrays, **kw)
    assert out is not None, "the batch form declined: it would silently fall back to the loop"
    return np.asarray(out, dtype=float)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    assert np.abs(a[ok] - b[ok]).max(initial=0.0) <= TOL


def _labels(rng, n_items, n_raters, n_labels, missing, agree=0.6):
    """Likert labels 1..n_labels: raters copy an item's truth with probability ``agree``."""
    truth = rng.integers(1, n_labels + 1, n_items)
    noise = rng.integers(1, n_labels + 1, (n_items, n_raters))
    x = np.where(rng.random((n_items, n_raters)) < agree, truth[:, None], noise).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x


def _draws(n, seed=0, n_resamples=200):
    return resample_indices(n, n_resamples, seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "stat",
    [
        partial(mean_pairwise_overlap, labels=[1, 2, 3, 4, 5]),
        mean_pairwise_overlap,
        partial(mean_pairwise_cohen_kappa, labels=[1, 2, 3, 4, 5]),
        mean_pairwise_cohen_kappa,
        partial(mean_pairwise_cohen_kappa, weights="linear", labels=[1, 2, 3, 4, 5]),
        partial(mean_pairwise_cohen_kappa, weights="quadratic", labels=[1, 2, 3, 4, 5]),
        partial(krippendorff_alpha, level="nominal"),
        partial(krippendorff_alpha, level="ordinal"),
        partial(krippendorff_alpha, level="ordinal", labels=[1, 2, 3, 4, 5, 6]),
        partial(krippendorff_alpha, level="interval"),
        partial(krippendorff_alpha, level="interval", labels=[1, 2, 3, 4, 5]),
        partial(krippendorff_alpha, level="ratio"),
    ],
    ids=lambda s: f"{s.func.__name__}{sorted(s.keywords.items())}" if isinstance(s, partial) else s.__name__,
)
def test_matrix_measures_equal_the_loop_with_missing_ratings(stat, seed):
    rng = np.random.default_rng(seed)
    x = _labels(rng, 40, 4, 5, missing=0.25)
    x[3] = [2.0, np.nan, np.nan, np.nan]  # an item rated once: unpairable
    x = x[~np.isnan(x).all(axis=1)]
    idx = _draws(len(x), seed)
    _same(_batch(stat, [x], idx), _loop(stat, [x], idx))


@pytest.mark.parametrize("labels", [None, [1, 2, 3]])
def test_fleiss_kappa_equals_the_loop_including_collapsed_resamples(labels):
    rng = np.random.default_rng(5)
    x = _labels(rng, 12, 5, 3, missing=0.0, agree=0.9)
    x[:8] = 1.0  # most items unanimous on one label: some resamples collapse (undefined)
    stat = partial(fleiss_kappa, labels=labels)
    idx = _draws(len(x), 3, 400)
    loop = _loop(stat, [x], idx)
    assert np.isnan(loop).any() and (~np.isnan(loop)).any()
    _same(_batch(stat, [x], idx), loop)


def test_fleiss_kappa_batch_leaves_incomplete_matrices_to_the_loop_error():
    x = np.array([[1, 2, 2], [1, np.nan, 1], [2, 2, 2]], dtype=float)
    assert fleiss_kappa.batch(_draws(3), x) is None
    with pytest.raises(ValueError, match="rows 1 have missing ratings"):
        bootstrap_ci(fleiss_kappa, x, n_resamples=10)


@pytest.mark.parametrize(
    "stat", [overlap, cohen_kappa, partial(cohen_kappa, weights="linear", labels=[1, 2, 3, 4])]
)
def test_two_rater_measures_equal_the_loop(stat):
    rng = np.random.default_rng(7)
    x = _labels(rng, 30, 2, 4, missing=0.2)
    idx = _draws(30, 4)
    _same(_batch(stat, [x[:, 0], x[:, 1]], idx), _loop(stat, [x[:, 0], x[:, 1]], idx))


def test_weighted_kappa_without_a_scale_is_left_to_the_loop():
    a, b = np.array([1, 2, 3, 3]), np.array([1, 3, 3, 2])
    assert cohen_kappa.batch(_draws(4), a, b, weights="linear") is None
    fast = bootstrap_ci(partial(cohen_kappa, weights="linear"), a, b, n_resamples=30)
    slow = bootstrap_ci(partial(cohen_kappa, weights="linear"), a, b, n_resamples=30, vectorized=False)
    np.testing.assert_array_equal(fast.distribution, slow.distribution)


@pytest.mark.parametrize("stat", [pearson, spearman, kendall_tau])
def test_correlations_equal_the_loop_with_missing_values_and_ties(stat):
    rng = np.random.default_rng(11)
    x = rng.integers(1, 6, 25).astype(float)
    y = np.round(x + rng.normal(0, 1.5, 25))
    x[[2, 9]] = np.nan
    y[[4, 9, 17]] = np.nan
    idx = _draws(25, 8, 300)
    _same(_batch(stat, [x, y], idx), _loop(stat, [x, y], idx))


def test_correlations_are_undefined_on_resamples_with_a_constant_side():
    x = np.array([1.0, 1.0, 1.0, 2.0, np.nan])
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    idx = _draws(5, 1, 300)
    for stat in (pearson, spearman):
        loop = _loop(stat, [x, y], idx)
        assert np.isnan(loop).any()
        _same(_batch(stat, [x, y], idx), loop)


def test_item_mean_is_the_share_of_items():
    ind = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    assert item_mean(ind) == pytest.approx(4 / 6)
    idx = _draws(6, 2)
    _same(_batch(item_mean, [ind], idx), _loop(np.mean, [ind], idx))


def test_pareto_dominance_tau_equals_the_loop():
    rng = np.random.default_rng(3)
    human = rng.integers(1, 5, 30).astype(float)
    analytic = np.clip(human[:, None] + rng.integers(-1, 2, (30, 3)), 1, 4).astype(float)
    human[5] = np.nan
    analytic[7, 1] = np.nan
    idx = _draws(30, 6, 200)
    _same(
        _batch(pareto_dominance_tau, [human, analytic], idx),
        _loop(pareto_dominance_tau, [human, analytic], idx),
    )


def test_ratio_tau_equals_the_loop():
    rng = np.random.default_rng(8)
    human = rng.integers(1, 5, 30).astype(float)
    answers = (rng.random((30, 4)) < human[:, None] / 5).astype(float)
    answers[3, :3] = np.nan  # one answer left: its share is 0 or 1
    answers[6, 2] = np.nan
    human[9] = np.nan
    idx = _draws(30, 2, 200)
    _same(_batch(ratio_tau, [human, answers], idx), _loop(ratio_tau, [human, answers], idx))


@pytest.mark.parametrize("stat", [kendall_tau, pareto_dominance_tau])
def test_paired_test_vectorised_equals_loop(stat):
    rng = np.random.default_rng(9)
    human = rng.integers(1, 6, 40).astype(float)
    a = np.clip(human[:, None] + rng.integers(-1, 2, (40, 2)), 1, 5).astype(float)
    b = rng.integers(1, 6, (40, 2)).astype(float)
    if stat is kendall_tau:
        a, b = a[:, 0], b[:, 0]
    fast = paired_bootstrap_test(stat, a, b, human, n_resamples=300, n_comparisons=3, seed=1)
    slow = paired_bootstrap_test(
        stat, a, b, human, n_resamples=300, n_comparisons=3, seed=1, vectorized=False
    )
    _same(fast.distribution, slow.distribution)
    assert abs(fast.low - slow.low) <= TOL and abs(fast.high - slow.high) <= TOL
    assert fast.significant == slow.significant


def test_resample_counts_count_the_draws():
    idx = np.array([[0, 0, 2], [1, 2, 2]])
    assert resample_counts(idx, 3).tolist() == [[2.0, 0.0, 1.0], [0.0, 1.0, 2.0]]


def test_bootstrap_ci_batch_and_loop_give_the_same_interval():
    rng = np.random.default_rng(4)
    x = _labels(rng, 50, 5, 5, missing=0.1)
    stat = partial(krippendorff_alpha, level="interval")
    fast = bootstrap_ci(stat, x, n_resamples=150, seed=3)
    slow = bootstrap_ci(stat, x, n_resamples=150, seed=3, vectorized=False)
    _same(fast.distribution, slow.distribution)
    assert abs(fast.low - slow.low) <= TOL and abs(fast.high - slow.high) <= TOL


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_alpha_with_many_distinct_values_equals_the_package(level):
    import krippendorff

    rng = np.random.default_rng(12)
    x = np.round(rng.uniform(1, 5, 300)[:, None] + rng.normal(0, 0.3, (300, 5)), 2)
    x[rng.random(x.shape) < 0.1] = np.nan
    x = x[~np.isnan(x).all(axis=1)]
    ours = krippendorff_alpha(x, level=level)  # items x values^2 too large: the per-item route
    assert len(np.unique(x[~np.isnan(x)])) > 200
    assert ours == pytest.approx(krippendorff.alpha(x.T, level_of_measurement=level), abs=TOL)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_is_sklearns(weights):
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(13)
    for _ in range(20):
        a, b = rng.integers(0, 5, 30), rng.integers(0, 5, 30)
        b[:15] = a[:15]
        ours = cohen_kappa(a, b, weights=weights, labels=[0, 1, 2, 3, 4])
        assert ours == pytest.approx(
            cohen_kappa_score(a, b, labels=[0, 1, 2, 3, 4], weights=weights), abs=1e-12
        )
