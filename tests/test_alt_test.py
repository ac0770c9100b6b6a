"""The alt-test (Calderon, Reichart & Dror, ACL 2025, §3) on a hand-computed case.

Recomputed once against the authors' own ``alt_test`` (github nitaytech/AltTest, the notebook's
function) on their nine example data sets: 52 (data set, LLM) pairs, winning rate and advantage
probability identical (max |difference| 0); the comparison script lives outside the repository.
"""

import math

import numpy as np
import pytest
from scipy import stats

from promptlottery.metrics._validation import UndefinedMetricWarning
from promptlottery.metrics.alt_test import EPSILON, alt_test, benjamini_yekutieli


def _hand_case():
    # 30 items, annotators A, B, C. Items 0-4: all humans 1, judge 0 (the human wins, d = +1 for
    # every held-out annotator). Items 5-19: all 1, judge 1 (ties, d = 0). Items 20-24: A = B = 1,
    # C = 0, judge 1 (held out A or B: tie; held out C: the judge wins, d = -1). Items 25-29:
    # A = B = 1, C = 0, judge 0 (ties for every held-out annotator).
    h = np.ones((30, 3))
    h[20:30, 2] = 0
    f = np.ones(30)
    f[0:5] = 0
    f[25:30] = 0
    return f, h


def _p(d, eps):
    d = np.asarray(d, float)
    t = (d.mean() - eps) / (d.std(ddof=1) / math.sqrt(d.size))
    return stats.t.cdf(t, d.size - 1)


def test_hand_case_follows_the_definition():
    f, h = _hand_case()
    r = alt_test(f, h, epsilon=0.2)
    d_ab = [1] * 5 + [0] * 25  # mean 1/6
    d_c = [1] * 5 + [0] * 15 + [-1] * 5 + [0] * 5  # mean 0
    # by hand: sd(d_ab) = sqrt((5 (5/6)^2 + 25 (1/6)^2) / 29) = 0.37905, t = (1/6 - 0.2) / (0.37905 / sqrt 30)
    assert _p(d_ab, 0.2) == pytest.approx(stats.t.cdf(-0.48168, 29), abs=1e-4)
    assert r.per_annotator[0]["p_value"] == pytest.approx(_p(d_ab, 0.2), rel=1e-12)
    assert r.per_annotator[2]["p_value"] == pytest.approx(_p(d_c, 0.2), rel=1e-12)
    assert r.per_annotator[2]["p_value"] == pytest.approx(0.0361, abs=5e-4)  # t = -1.86548, 29 df
    # BY thresholds k/3 * 0.05 / (1 + 1/2 + 1/3): 0.00909, 0.01818, 0.02727; the smallest p is 0.036
    assert r.winning_rate == 0.0 and not r.passed
    # rho^f: A, B: 25/30 (lose items 0-4), C: 25/30 (lose 0-4, win 20-24, tie the rest)
    assert r.advantage_probability == pytest.approx(25 / 30)
    assert [r.per_annotator[j]["rho_h"] for j in range(3)] == pytest.approx([1.0, 1.0, 25 / 30])
    assert (r.n_items, r.n_annotators) == (30, 3)


def test_larger_epsilon_lets_the_judge_win():
    f, h = _hand_case()
    r = alt_test(f, h, epsilon=0.5)  # t = (1/6 - 1/2) / 0.0692 = -4.82 and -0.5 / 0.1072 = -4.66
    assert r.winning_rate == 1.0 and r.passed


def test_neg_rmse_alignment():
    # item: humans (1, 2, 4), judge 2. Held out the 4: remaining (1, 2): S_h = -sqrt((9 + 4) / 2),
    # S_f = -sqrt((1 + 0) / 2): the judge wins. Held out the 1: remaining (2, 4): S_h = -sqrt(5 / 2),
    # S_f = -sqrt(4 / 2): the judge wins. Held out the 2: a tie (the judge says 2 as well).
    h = np.array([[1.0, 2.0, 4.0]] * 30)
    r = alt_test(np.full(30, 2.0), h, scoring="neg_rmse", epsilon=0.1)
    assert [r.per_annotator[j]["rho_h"] for j in range(3)] == [0.0, 1.0, 0.0]
    assert r.advantage_probability == 1.0 and r.winning_rate == 1.0


def test_benjamini_yekutieli_by_hand():
    # m = 3: thresholds 0.00909, 0.01818, 0.02727 (0.0095 misses the first); m = 4, H_4 = 25/12, thresholds k/4 * 0.05 * 12/25 = 0.006, 0.012, 0.018, 0.024
    p = [0.005, 0.013, 0.017, 0.5]
    assert benjamini_yekutieli(p, q=0.05).tolist() == [True, True, True, False]
    assert benjamini_yekutieli([0.0095, 0.5, float("nan")], q=0.05).tolist() == [False, False, False]


@pytest.mark.filterwarnings("ignore::promptlottery.metrics._validation.UndefinedMetricWarning")
def test_sparse_annotators_and_items_are_left_out():
    f, h = _hand_case()
    h[:, 1] = np.nan  # annotator B labels nothing
    h[0, 2] = np.nan  # item 0 keeps one label only and is dropped
    assert alt_test(f, h, epsilon=0.2).n_annotators == 0  # 29 items each < 30 (warns)
    r = alt_test(f, h, epsilon=0.2, min_items_per_human=29)
    assert r.n_annotators == 2 and r.n_items == 29 and 1 not in r.per_annotator
    with pytest.warns(UndefinedMetricWarning, match="no annotator"):
        r = alt_test(f[:10], h[:10])
    assert math.isnan(r.winning_rate) and not r.passed


def test_bad_input():
    f, h = _hand_case()
    with pytest.raises(ValueError, match="judge has 29 items"):
        alt_test(f[:29], h)
    with pytest.raises(ValueError, match="scoring="):
        alt_test(f, h, scoring="f1")
    with pytest.raises(ValueError, match="epsilon"):
        alt_test(f, h, epsilon=1.5)
    assert EPSILON == {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}
