"""Length bias by hand: the within-label slope and AlpacaEval 2's length-controlled win rate.

AlpacaEval's own fitting function (``fit_LogisticRegressionCV`` of alpaca_eval/metrics/glm_winrate.py,
run outside the repository on the hand case below with the ``length_controlled_minimal`` design
``tanh(std_delta_len) + 1``) gives 0.710096 at C = 1e6 (no CV) against 0.710102 here (unpenalised
maximum likelihood), 0.70884 at its C = 100 and 0.6703 with its default 5-fold CV, whose L1 penalty
shrinks both terms on 20 pairs; on 200 simulated pairs 0.501883 against 0.501882 (C = 1e6).
"""

import math

import numpy as np
import pytest

from promptlottery.metrics._validation import UndefinedMetricWarning
from promptlottery.metrics.length_bias import length_controlled_win_rate, length_slope


def _logit(p):
    return math.log(p / (1 - p))


def test_lc_win_rate_saturated_two_groups_by_hand():
    # delta = len(baseline) - len(model) is +10 for ten pairs and -10 for ten: sd = 10 * sqrt(20/19),
    # tanh(delta / sd) = +-a. Two covariate values: the GLM reproduces both group shares (0.4 and 0.9),
    # theta + phi a = logit 0.4 and theta - phi a = logit 0.9.
    pref = [1] * 4 + [0] * 6 + [1] * 9 + [0]
    r = length_controlled_win_rate(pref, [100] * 10 + [110] * 10, [110] * 10 + [100] * 10, n_resamples=200)
    a = math.tanh(10 / (10 * math.sqrt(20 / 19)))
    theta = (_logit(0.4) + _logit(0.9)) / 2
    assert r.estimate == pytest.approx(1 / (1 + math.exp(-theta)), abs=1e-9)  # 0.7101
    assert r.extra["phi"] == pytest.approx((_logit(0.4) - _logit(0.9)) / (2 * a), abs=1e-9)
    assert r.extra["phi"] < 0  # the judge favours the longer answer
    assert r.extra["win_rate"] == 0.65 and r.n == 20
    assert r.low <= r.estimate <= r.high


def test_lc_win_rate_without_length_effect_equals_the_raw_rate():
    # the same share (0.6) at both lengths: phi = 0 and the controlled rate is the raw one; ties count 0.5
    pref = [1, 1, 0.5, 0.5, 0] * 2 + [1, 1, 0.5, 0.5, 0] * 2
    r = length_controlled_win_rate(pref, [100] * 10 + [200] * 10, [200] * 10 + [100] * 10, n_resamples=50)
    assert r.estimate == pytest.approx(0.6, abs=1e-9) and r.extra["phi"] == pytest.approx(0.0, abs=1e-9)


def test_lc_win_rate_undefined_and_bad_input():
    with pytest.warns(UndefinedMetricWarning, match="raw win rate is 1.0"):
        assert math.isnan(length_controlled_win_rate([1, 1], [1, 2], [2, 1]).estimate)
    with pytest.raises(ValueError, match="pair 1 has 2.0"):
        length_controlled_win_rate([1, 2], [1, 2], [2, 1])
    with pytest.raises(ValueError, match="one value per pair"):
        length_controlled_win_rate([1, 0], [1], [2, 1])


def test_length_slope_by_hand():
    # label 1: lengths 10, 30 scored 2, 3; label 2: lengths 10, 30 scored 4, 5. sd of (10, 30, 10, 30)
    # is sqrt(400 / 3) = 11.547; within each label, +1 point per 20 characters = +0.5774 per sd.
    r = length_slope([2, 3, 4, 5], [10, 30, 10, 30], [1, 1, 2, 2], n_resamples=200)
    assert r.estimate == pytest.approx(1 / (20 / math.sqrt(400 / 3)))
    # across labels the raw slope would be confounded by the label (longer were not rated better here)
    r0 = length_slope([2, 2, 5, 5], [10, 30, 10, 30], [1, 1, 2, 2], n_resamples=50)
    assert r0.estimate == pytest.approx(0.0)
    assert r.extra["sd_length"] == pytest.approx(math.sqrt(400 / 3))


def test_length_slope_holds_the_label_fixed():
    # the judge follows the human label exactly, and longer responses have higher labels: no bias
    rng = np.random.default_rng(0)
    human = rng.integers(1, 6, 300)
    length = human * 50 + rng.integers(0, 40, 300)
    assert length_slope(human.astype(float), length, human, n_resamples=100).estimate == pytest.approx(
        0.0, abs=1e-12
    )


def test_length_slope_undefined():
    with pytest.warns(UndefinedMetricWarning, match="same length"):
        assert math.isnan(length_slope([1, 2], [5, 5], [1, 1]).estimate)
    with pytest.raises(ValueError, match="one value per item"):
        length_slope([1, 2], [5, 5, 6], [1, 1])
