"""promptlottery.metrics agreement measures against their reference implementations."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from promptlottery.metrics import (
    UndefinedMetricWarning,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
    overlap,
)

TOL = 1e-9

# Fleiss' kappa worked example (Fleiss 1971 data as reproduced on Wikipedia): 10 items, 14 raters,
# 5 categories; each row gives how many raters chose each category. Published kappa = 0.210.
FLEISS_TABLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers x 12 units with
# missing values. Published: nominal 0.743, ordinal 0.815, interval 0.849, ratio 0.797.
_N = np.nan
KRIPP_OBSERVERS_X_UNITS = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, _N, _N, _N],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _N, 3],
        [_N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _N],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _N],
    ]
)
KRIPP_PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


def _labels_from_counts(table: np.ndarray) -> np.ndarray:
    """Items x raters label matrix with the given per-item category counts (categories 1..k)."""
    return np.array([np.repeat(np.arange(1, table.shape[1] + 1), row) for row in table])


def _random_ratings(rng, n_items, n_raters, n_cat, missing=0.0):
    r = rng.integers(1, n_cat + 1, size=(n_items, n_raters)).astype(float)
    # correlated raters so kappa is not ~0: copy a consensus label with probability 0.6
    consensus = rng.integers(1, n_cat + 1, size=n_items)
    mask = rng.random((n_items, n_raters)) < 0.6
    r[mask] = np.broadcast_to(consensus[:, None], r.shape)[mask]
    if missing:
        r[rng.random(r.shape) < missing] = np.nan
        r[np.isnan(r).all(axis=1), 0] = 1.0  # keep every item rated at least once
    return r


# --------------------------------------------------------------------------- worked examples


def test_fleiss_kappa_worked_example():
    assert fleiss_kappa(_labels_from_counts(FLEISS_TABLE)) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa(_labels_from_counts(FLEISS_TABLE)) == pytest.approx(
        inter_rater.fleiss_kappa(FLEISS_TABLE), abs=TOL
    )


@pytest.mark.parametrize("level", list(KRIPP_PUBLISHED))
def test_krippendorff_alpha_worked_example(level):
    items_x_raters = KRIPP_OBSERVERS_X_UNITS.T  # the orientation of this package
    assert krippendorff_alpha(items_x_raters, level=level) == pytest.approx(KRIPP_PUBLISHED[level], abs=5e-4)


def test_krippendorff_alpha_worked_example_with_string_labels():
    names = ["very low", "low", "mid", "high", "very high"]
    data = np.empty(KRIPP_OBSERVERS_X_UNITS.T.shape, dtype=object)
    for pos, v in np.ndenumerate(KRIPP_OBSERVERS_X_UNITS.T):
        data[pos] = None if np.isnan(v) else names[int(v) - 1]
    assert krippendorff_alpha(data, level="ordinal", labels=names) == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(data, level="nominal") == pytest.approx(0.743, abs=5e-4)


# --------------------------------------------------------------------------- against the libraries


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn_with_missing(seed, weights):
    rng = np.random.default_rng(seed)
    r = _random_ratings(rng, 60, 2, 5, missing=0.1)
    a, b = r[:, 0], r[:, 1]
    keep = ~(np.isnan(a) | np.isnan(b))
    ref = cohen_kappa_score(a[keep], b[keep], weights=weights)
    assert cohen_kappa(a, b, weights=weights) == pytest.approx(ref, abs=TOL)
    # a declared scale with an unused category changes weighted kappa exactly as in sklearn
    scale = [1, 2, 3, 4, 5, 6]
    ref = cohen_kappa_score(a[keep], b[keep], weights=weights, labels=scale)
    assert cohen_kappa(a, b, weights=weights, labels=scale) == pytest.approx(ref, abs=TOL)


def test_cohen_kappa_string_labels_and_pandas():
    a = pd.Series(["yes", "no", "yes", None, "yes", "no"])
    b = pd.Series(["yes", "no", "no", "yes", "yes", "yes"])
    ref = cohen_kappa_score(["yes", "no", "yes", "yes", "no"], ["yes", "no", "no", "yes", "yes"])
    assert cohen_kappa(a, b) == pytest.approx(ref, abs=TOL)
    assert cohen_kappa(a, b, labels=["no", "yes"]) == pytest.approx(ref, abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_mean_pairwise_cohen_kappa_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    r = _random_ratings(rng, 40, 4, 4, missing=0.1)
    vals = []
    for j, k in itertools.combinations(range(4), 2):
        keep = ~(np.isnan(r[:, j]) | np.isnan(r[:, k]))
        vals.append(cohen_kappa_score(r[keep, j], r[keep, k], weights="linear", labels=[1, 2, 3, 4]))
    got = mean_pairwise_cohen_kappa(r, weights="linear", labels=[1, 2, 3, 4])
    assert got == pytest.approx(np.mean(vals), abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_overlap_and_mean_pairwise_overlap(seed):
    rng = np.random.default_rng(seed)
    r = _random_ratings(rng, 50, 3, 3, missing=0.15)
    keep = ~(np.isnan(r[:, 0]) | np.isnan(r[:, 1]))
    assert overlap(r[:, 0], r[:, 1]) == pytest.approx(np.mean(r[keep, 0] == r[keep, 1]), abs=TOL)
    vals = []
    for j, k in itertools.combinations(range(3), 2):
        keep = ~(np.isnan(r[:, j]) | np.isnan(r[:, k]))
        vals.append(np.mean(r[keep, j] == r[keep, k]))
    assert mean_pairwise_overlap(r) == pytest.approx(np.mean(vals), abs=TOL)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_kappa_matches_statsmodels(seed):
    rng = np.random.default_rng(seed)
    r = _random_ratings(rng, 30, 6, 4)
    table, _ = inter_rater.aggregate_raters(r)
    assert fleiss_kappa(r) == pytest.approx(inter_rater.fleiss_kappa(table), abs=TOL)
    # unused declared categories do not change Fleiss' kappa
    assert fleiss_kappa(r, labels=[1, 2, 3, 4, 5]) == pytest.approx(inter_rater.fleiss_kappa(table), abs=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_package_with_missing(seed, level):
    rng = np.random.default_rng(seed)
    r = _random_ratings(rng, 40, 5, 5, missing=0.25)
    ref = krippendorff.alpha(reliability_data=r.T, level_of_measurement=level)
    assert krippendorff_alpha(r, level=level) == pytest.approx(ref, abs=TOL)


def test_krippendorff_alpha_declared_scale_matches_value_domain():
    rng = np.random.default_rng(7)
    r = _random_ratings(rng, 30, 3, 4, missing=0.2)
    for level in ("ordinal", "interval"):
        ref = krippendorff.alpha(
            reliability_data=r.T, level_of_measurement=level, value_domain=[1, 2, 3, 4, 5]
        )
        assert krippendorff_alpha(r, level=level, labels=[1, 2, 3, 4, 5]) == pytest.approx(ref, abs=TOL)


# --------------------------------------------------------------------------- undefined cases


def test_undefined_cases_give_nan_and_a_warning():
    with pytest.warns(UndefinedMetricWarning, match="undefined"):
        assert np.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))
    with pytest.warns(UndefinedMetricWarning, match="same category"):
        assert np.isnan(fleiss_kappa([[1, 1], [1, 1], [1, 1]]))
    with pytest.warns(UndefinedMetricWarning, match="same value"):
        assert np.isnan(krippendorff_alpha([[2, 2], [2, 2], [3, None]]))
    with pytest.warns(UndefinedMetricWarning, match="two raters"):
        assert np.isnan(krippendorff_alpha([[1, None], [None, 2], [3, None]]))
    with pytest.warns(UndefinedMetricWarning, match="no item"):
        assert np.isnan(overlap([1, None, 3], [None, 2, None]))


def test_mean_pairwise_skips_undefined_pairs_with_a_warning():
    # raters 1 and 2 always say 2: their kappa is undefined (chance agreement is perfect)
    r = [[2, 2, 1], [2, 2, 2], [2, 2, 3], [2, 2, 2], [2, 2, 1]]
    with pytest.warns(UndefinedMetricWarning, match="1 of 3 rater pairs"):
        got = mean_pairwise_cohen_kappa(r)
    expected = cohen_kappa([2, 2, 2, 2, 2], [1, 2, 3, 2, 1])
    assert got == pytest.approx(expected, abs=TOL)


# --------------------------------------------------------------------------- bad input


def test_bad_input_raises_value_error_saying_which():
    with pytest.raises(ValueError, match="mismatched lengths: a has 3, b has 2"):
        cohen_kappa([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="mismatched lengths"):
        overlap([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2 items, got 1"):
        cohen_kappa([1], [1])
    with pytest.raises(ValueError, match="at least 2 items"):
        fleiss_kappa([[1, 2, 3]])
    with pytest.raises(ValueError, match="at least 2 raters"):
        krippendorff_alpha([[1], [2], [3]])
    with pytest.raises(ValueError, match=r"all-missing row.*rows 1"):
        krippendorff_alpha([[1, 2], [None, None], [1, 1]])
    with pytest.raises(ValueError, match=r"all-missing row.*rows 0, 2"):
        mean_pairwise_overlap(np.array([[np.nan, np.nan], [1, 2], [np.nan, np.nan]]))
    with pytest.raises(ValueError, match=r"all-missing row"):
        fleiss_kappa([[1, 2], [None, None], [1, 1]])
    with pytest.raises(ValueError, match=r"value 7.0, which is not in the declared labels \[1, 2, 3\]"):
        cohen_kappa([1, 2, 7], [1, 2, 3], labels=[1, 2, 3])
    with pytest.raises(ValueError, match="'maybe', which is not in the declared labels"):
        fleiss_kappa([["yes", "no"], ["maybe", "no"]], labels=["yes", "no"])
    with pytest.raises(ValueError, match="not in the declared labels"):
        krippendorff_alpha([[1, 2], [3, 9]], level="interval", labels=[1, 2, 3])
    with pytest.raises(ValueError, match=r"rows 1 have missing ratings"):
        fleiss_kappa([[1, 2], [1, None], [2, 2]])
    with pytest.raises(ValueError, match="weights='cubic' is not valid"):
        cohen_kappa([1, 2], [1, 2], weights="cubic")
    with pytest.raises(ValueError, match="level='metric' is not valid"):
        krippendorff_alpha([[1, 2], [2, 2]], level="metric")
    with pytest.raises(ValueError, match="must be numeric"):
        krippendorff_alpha([["a", "b"], ["b", "b"]], level="interval")
    with pytest.raises(ValueError, match="duplicates"):
        overlap([1, 2], [1, 2], labels=[1, 2, 2])
    with pytest.raises(TypeError):
        cohen_kappa([1, 2], [1, 2], "linear")  # options are keyword-only
