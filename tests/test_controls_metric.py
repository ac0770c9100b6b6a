"""Signal (shift under meaning-changing controls) against noise (shift under paraphrases), by hand.

Three known judges on binary verdicts, items with human labels h (share p of yes), five paraphrases
and one control of each direction, each rewriting paraphrase 0:

* the meaning-following oracle: every paraphrase says h; stricter says no, more lenient yes,
  reversed 1 - h, criterion dropped yes. Signal = (p + (1 - p) + 1 + (1 - p)) / 4 = (3 - p) / 4,
  noise 0: it follows.
* the constant judge (always yes): shifts 0, 0, |1 - 1| - |0 - 1| = -1, 0: signal -1/4, noise 0:
  deaf and stable.
* the wording-sensitive judge (the oracle with paraphrase 2 mirrored, blind to controls): 4 of the
  10 paraphrase pairs disagree on every item, noise 0.4; controls say h: shifts 0, 0, 0 - 1, 0:
  signal -1/4: deaf and wording-sensitive.
"""

import math

import numpy as np
import pytest

from promptlottery.metrics._validation import UndefinedMetricWarning
from promptlottery.metrics.controls import control_sensitivity, control_shift

DIRS = ["stricter", "more_lenient", "reversed", "criterion_dropped"]


def _h(n=40, p=0.3):
    h = np.zeros(n)
    h[: int(round(n * p))] = 1
    return h


def test_oracle_follows():
    h = _h()
    para = np.repeat(h[:, None], 5, axis=1)
    ctrl = np.stack([np.zeros_like(h), np.ones_like(h), 1 - h, np.ones_like(h)], axis=1)
    r = control_sensitivity(para, ctrl, directions=DIRS)
    assert r.signal == pytest.approx((3 - 0.3) / 4) and r.noise == 0.0
    assert r.ratio == math.inf and r.follows and r.verdict == "follows" and not r.deaf
    assert r.per_direction == pytest.approx(
        {"stricter": 0.3, "more_lenient": 0.7, "reversed": 1.0, "criterion_dropped": 0.7}
    )
    assert r.margin_ci[0] > 0 and (r.n_items, r.n_controls) == (40, 4)


def test_constant_judge_is_deaf_and_stable():
    ones = np.ones((40, 5))
    r = control_sensitivity(ones, np.ones((40, 4)), directions=DIRS)
    assert r.signal == pytest.approx(-0.25) and r.noise == 0.0 and r.ratio == -math.inf
    assert r.deaf and r.verdict == "deaf: stable"
    assert r.margin_ci == (pytest.approx(-0.25), pytest.approx(-0.25))


def test_wording_sensitive_judge_is_deaf_and_noisy():
    h = _h()
    para = np.repeat(h[:, None], 5, axis=1)
    para[:, 2] = 1 - h
    r = control_sensitivity(para, np.repeat(h[:, None], 4, axis=1), directions=DIRS)
    assert r.noise == pytest.approx(0.4) and r.signal == pytest.approx(-0.25)
    assert r.ratio == pytest.approx(-0.625) and r.verdict == "deaf: wording-sensitive"


def test_scale_is_rescaled_and_bases_are_used():
    # 1-5 scale; base paraphrase 1 says 4, paraphrase 0 says 5; the stricter control rewrites 1 and says 2:
    # (4 - 2) / 4 = 0.5; noise |5 - 4| / 4 = 0.25
    r = control_sensitivity([[5, 4]] * 30, [[2]] * 30, directions=["stricter"], bases=[1], scale=(1, 5))
    assert r.signal == pytest.approx(0.5) and r.noise == pytest.approx(0.25) and r.ratio == pytest.approx(2.0)
    assert control_shift([0.25], [1.0], direction="reversed").tolist() == [0.75 - 0.25]


def test_bad_input_and_undefined():
    with pytest.raises(ValueError, match="direction 'looser'"):
        control_sensitivity([[1, 1]], [[0]], directions=["looser"])
    with pytest.raises(ValueError, match="row 0 column 1 holds 7.0, outside the scale"):
        control_sensitivity([[1, 7]], [[0]], directions=["stricter"])
    with pytest.raises(ValueError, match="at least 2 paraphrase columns"):
        control_sensitivity([[1]], [[0]], directions=["stricter"])
    with pytest.warns(UndefinedMetricWarning, match="no item"):
        r = control_sensitivity([[1, np.nan]], [[0]], directions=["stricter"])
    assert r.verdict == "undefined" and r.deaf


def test_pairwise_directions_by_hand():
    # preferences for response 1: base b = (1, 0, 0.5); stricter c = (0.5, 0.5, 0.5) moves toward the tie:
    # |b - 1/2| - |c - 1/2| = (0.5, 0.5, 0); more lenient c = (1, 0, 1) moves away: (0, 0, 0.5);
    # reversed c = (0, 1, 0.5) flips the side: |c - b| - |(1 - c) - b| = (1, 1, 0)
    b = [1.0, 0.0, 0.5]
    assert control_shift(b, [0.5] * 3, direction="stricter", pairwise=True).tolist() == [0.5, 0.5, 0.0]
    assert control_shift(b, [1.0, 0.0, 1.0], direction="more_lenient", pairwise=True).tolist() == [0, 0, 0.5]
    assert control_shift(b, [0.0, 1.0, 0.5], direction="reversed", pairwise=True).tolist() == [1.0, 1.0, 0.0]
    # pointwise, the same stricter control reads as a lower score: b - c = (0.5, -0.5, 0)
    assert control_shift(b, [0.5] * 3, direction="stricter").tolist() == [0.5, -0.5, 0.0]
    # two orders of one pair are one cluster: 10 pairs x 2 rows; signal = mean(0.5, 0.5, 0) over rows
    para = np.array([[1.0, 1.0], [0.0, 0.0], [0.5, 0.5]] * 20)[:40]
    ctrl = np.full((40, 1), 0.5)
    r = control_sensitivity(
        para, ctrl, directions=["stricter"], pairwise=True, clusters=np.repeat(np.arange(20), 2)
    )
    expected = np.mean(np.abs(para[:, 0] - 0.5))
    assert r.signal == pytest.approx(expected) and r.noise == 0.0 and r.verdict == "follows"
