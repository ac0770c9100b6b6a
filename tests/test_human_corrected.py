"""PPI++ for a mean (Angelopoulos, Duchi & Zrnic 2023, §2, Example 1) and Rogan-Gladen (1978) by hand.

The PPI++ numbers are recomputed with ``ppi-python``'s own ``ppi_mean_pointestimate`` and
``ppi_mean_ci`` where it is installed (``pip install ppi-python``: it pulls numba, so it is not a
dependency of the project; the test is skipped without it).
"""

import math

import numpy as np
import pytest

from promptlottery.metrics._validation import UndefinedMetricWarning
from promptlottery.metrics.human_corrected import human_only_mean, judge_only_mean, ppi_mean, rogan_gladen

# labelled: Y = (1, 0, 1, 1), f = (1, 0, 0, 1); unlabelled f~ = (1, 1, 0, 0, 1, 1)
Y, F, FU = [1, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0, 1, 1]


def test_ppi_lambda_star_by_hand():
    # Cov(Y, f) with 1/n: mean(Y) = 3/4, mean(f) = 1/2: products (1/4)(1/2), (-3/4)(-1/2), (1/4)(-1/2),
    # (1/4)(1/2) -> (1/8 + 3/8 - 1/8 + 1/8) / 4 = 1/8. Var(f) over the 10 judge scores, 1/(n+N-1):
    # six 1s and four 0s: 10 * 0.24 / 9 = 4/15. lambda* = (1/8) / ((1 + 4/6) * 4/15) = 0.28125.
    r = ppi_mean(Y, F, FU, level=0.9)
    assert r.lam == pytest.approx(0.28125)
    # theta = lambda mean(f~) + mean(Y - lambda f) = 0.28125 * 2/3 + (3 - 0.28125 * 2) / 4
    assert r.estimate == pytest.approx(0.28125 * 2 / 3 + (3 - 0.5625) / 4)
    se = math.sqrt(0.28125**2 * (2 / 9) / 6 + np.var(np.array(Y) - 0.28125 * np.array(F)) / 4)
    assert r.high - r.estimate == pytest.approx(1.6448536 * se, rel=1e-6)
    assert (r.n_labelled, r.n_unlabelled) == (4, 6)


def test_lambda_zero_is_the_human_mean_and_one_is_plain_ppi():
    assert ppi_mean(Y, F, FU, lam=0.0).estimate == human_only_mean(Y).estimate == 0.75
    assert ppi_mean(Y, F, FU, lam=1.0).estimate == pytest.approx(4 / 6 + 1 / 4)
    h = human_only_mean(Y, level=0.9)  # sd (1/n) = sqrt(3/16), se = sqrt(3/16) / 2
    assert h.high - h.estimate == pytest.approx(1.6448536 * math.sqrt(3 / 16) / 2, rel=1e-6)
    assert judge_only_mean(F + FU).estimate == pytest.approx(0.6)


def test_ppi_against_ppi_python():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(3)
    for n, big_n in ((25, 400), (100, 1000)):
        y = rng.integers(1, 6, n).astype(float)
        f = np.clip(y + rng.normal(0.5, 1.0, n), 1, 5)
        fu = np.clip(rng.integers(1, 6, big_n) + rng.normal(0.5, 1.0, big_n), 1, 5)
        ours = ppi_mean(y, f, fu, level=0.9)
        est = ppi_py.ppi_mean_pointestimate(y, f, fu)
        low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1)
        assert ours.estimate == pytest.approx(float(np.squeeze(est)), abs=1e-12)
        assert (ours.low, ours.high) == pytest.approx(
            (float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-12
        )


def test_rogan_gladen_by_hand():
    # Se = 4/5, Sp = 4/5; p = 11/20: (0.55 + 0.8 - 1) / (0.8 + 0.8 - 1) = 0.35 / 0.6
    y = [1] * 5 + [0] * 5
    f = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    r = rogan_gladen(y, f, [1] * 6 + [0] * 4, n_resamples=500)
    assert r.estimate == pytest.approx(0.35 / 0.6)
    assert 0 <= r.low <= r.estimate <= r.high <= 1
    # a perfect judge: Se = Sp = 1, the corrected share is the judge's share
    assert rogan_gladen(y, y, [1, 0, 0, 0]).estimate == pytest.approx(6 / 14)


def test_rogan_gladen_undefined_and_bad_input():
    with pytest.warns(UndefinedMetricWarning, match="<= 1"):
        assert math.isnan(rogan_gladen([1, 1, 0, 0], [0, 1, 1, 0], [1, 0]).estimate)
    with pytest.warns(UndefinedMetricWarning, match="both human classes"):
        assert math.isnan(rogan_gladen([1, 1], [1, 0], [1, 0]).estimate)
    with pytest.raises(ValueError, match="0/1 verdicts"):
        rogan_gladen([1, 2], [1, 0], [1, 0])
    with pytest.raises(ValueError, match="missing value at item 1"):
        ppi_mean([1, float("nan")], [1, 0], [1, 0])
    with pytest.raises(ValueError, match="y has 2 items but yhat has 3"):
        ppi_mean([1, 0], [1, 0, 1], [1, 0])
