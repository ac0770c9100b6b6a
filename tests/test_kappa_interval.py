"""The studentized (bootstrap-t) interval of Fleiss' kappa (``metrics.kappa_interval``), checked
against its definition written out with loops: each resample expanded into its rows, Fleiss' kappa
from Fleiss (1971)'s formula, the jackknife leaving out one drawn unit at a time."""

from __future__ import annotations

import numpy as np
import pytest

from promptlottery.analysis.lottery.agreement_measures import agreement_measures
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.errors import ConfigError
from promptlottery.metrics import bootstrap_ci, fleiss_kappa
from promptlottery.metrics.kappa_interval import fleiss_interval, fleiss_studentized, item_bootstrap_t
from tests.test_known_answers import fleiss

CODES = np.array([[0, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 0], [2, 2, 1], [2, 0, 2]])
#: four explicit resamples: copies of each item
W = np.array(
    [
        [1, 1, 1, 1, 1, 1],
        [2, 0, 1, 1, 0, 2],
        [0, 3, 1, 0, 1, 1],
        [1, 1, 2, 2, 0, 0],
    ],
    dtype=float,
)


def _jackknife_se(rows: list[np.ndarray]) -> float:
    """sqrt((m - 1) / m * sum (kappa_(-k) - mean)^2), one drawn unit (a block of rows) left out at a time."""
    loo = [fleiss(np.vstack(rows[:k] + rows[k + 1 :])) for k in range(len(rows))]
    m = len(rows)
    return float(np.sqrt((m - 1) / m * np.sum((np.array(loo) - np.mean(loo)) ** 2)))


def _by_definition(units: list[np.ndarray], w: np.ndarray, level: float):
    """Estimate and bootstrap-t interval of the units (blocks of rows), resample r holding w[r, c]
    copies of unit c: [k - t_(1+level)/2 se, k - t_(1-level)/2 se], t_r = (k_r - k) / se_r."""
    est, se0 = fleiss(np.vstack(units)), _jackknife_se(units)
    t = []
    for row in w:
        drawn = [units[c] for c in range(len(units)) for _ in range(int(row[c]))]
        t.append((fleiss(np.vstack(drawn)) - est) / _jackknife_se(drawn))
    hi_q, lo_q = np.percentile(t, [50 * (1 + level), 50 * (1 - level)])
    return est, est - hi_q * se0, est - lo_q * se0


def test_bootstrap_t_of_fleiss_is_its_definition():
    est, lo, hi = _by_definition([CODES[i : i + 1] for i in range(len(CODES))], W, 0.5)
    res = fleiss_studentized(CODES, 3, W, level=0.5)
    assert res.estimate == pytest.approx(est) == pytest.approx(fleiss_kappa(CODES))
    assert (res.low, res.high) == (pytest.approx(lo), pytest.approx(hi)) and res.n_undefined == 0
    np.testing.assert_allclose(res.distribution[0], est)  # the first resample is the data itself


def test_bootstrap_t_with_clusters_leaves_out_one_cluster_at_a_time():
    units = np.array([0, 0, 1, 2, 2, 3])
    blocks = [CODES[units == c] for c in range(4)]
    w = np.array([[1, 1, 1, 1], [2, 0, 1, 1], [0, 1, 2, 1], [1, 2, 0, 1]], dtype=float)
    est, lo, hi = _by_definition(blocks, w, 0.5)
    res = fleiss_studentized(CODES, 3, w, level=0.5, units=units)
    assert (res.estimate, res.low, res.high) == (pytest.approx(est), pytest.approx(lo), pytest.approx(hi))


def test_unanimous_items_give_a_point_interval():
    # every item unanimous: kappa 1 on the data, on every resample and with any item left out
    codes = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [0, 0, 0]])
    res = item_bootstrap_t(codes, 3, n_resamples=50, seed=0, level=0.95)
    assert (res.estimate, res.low, res.high) == (1.0, 1.0, 1.0)


def test_the_stage_option_picks_the_interval_and_warns_below_the_measured_size():
    values = CODES.astype(float) + 1  # scale scores 1, 2, 3
    stud = agreement_measures(values, [1.0, 2.0, 3.0], n_resamples=200, seed=3)["fleiss_kappa"]
    want = item_bootstrap_t(CODES, 3, n_resamples=200, seed=3, level=0.95)
    # the bootstrap-t's upper end (1.184 here) is cut at kappa's maximum 1
    assert (stud.low, stud.high) == (pytest.approx(want.low), pytest.approx(min(want.high, 1.0)))
    assert "studentized interval on 6 items: its coverage was measured near nominal from 8" in stud.note
    perc = agreement_measures(values, [1.0, 2.0, 3.0], n_resamples=200, seed=3, kappa_interval="percentile")[
        "fleiss_kappa"
    ]
    boot = bootstrap_ci(lambda m: fleiss_kappa(m, labels=[1.0, 2.0, 3.0]), values, n_resamples=200, seed=3)
    assert (perc.low, perc.high) == (pytest.approx(boot.low), pytest.approx(boot.high))
    assert "percentile interval on 6 items" in perc.note and "from 128 items" in perc.note
    # the replicates (for the pooled intervals) do not depend on the interval kind
    np.testing.assert_array_equal(stud.distribution, perc.distribution)


def test_clusters_of_one_item_each_resample_as_the_items_do():
    # a cluster per item: the cluster draws are the item draws, the units the items
    args = dict(percentile=(-1.0, 1.0), n_resamples=200, seed=3, level=0.95)
    by_items = fleiss_interval(CODES, 3, "studentized", **args)
    by_clusters = fleiss_interval(CODES, 3, "studentized", clusters=list("abcdef"), noun="pairs", **args)
    want = item_bootstrap_t(CODES, 3, n_resamples=200, seed=3, level=0.95)
    assert by_items[:2] == by_clusters[:2] == (want.low, min(want.high, 1.0))
    assert "studentized interval on 6 pairs" in by_clusters[2][-1]


def test_clustered_studentized_interval_drops_the_clusters_jackknife_units():
    # items 0-1 and 2-3 drawn together: the jackknife leaves out a cluster, as fleiss_studentized
    # with those units over the cluster draws' copies
    from promptlottery.metrics.cluster_bootstrap import cluster_resample

    clusters = ["q1", "q1", "q2", "q2", "q3", "q4"]
    low, high, _ = fleiss_interval(
        CODES, 3, "studentized", percentile=(0.0, 0.0), n_resamples=300, seed=1, level=0.9, clusters=clusters
    )
    draws, _ = cluster_resample(clusters, 300, seed=1)
    w = np.stack([np.bincount(d, minlength=4) for d in draws]).astype(float)
    want = fleiss_studentized(CODES, 3, w, level=0.9, units=np.array([0, 0, 1, 1, 2, 3]))
    assert (low, high) == (want.low, min(want.high, 1.0))


def test_the_percentile_interval_is_the_one_given():
    low, high, notes = fleiss_interval(
        CODES, 3, "percentile", percentile=(0.1, 0.4), n_resamples=10, seed=0, level=0.95
    )
    assert (low, high) == (0.1, 0.4)
    assert notes == [
        "percentile interval on 6 items: its coverage was measured near nominal from 128 items only "
        "(docs/analysis.md)"
    ]


def test_a_bad_kappa_interval_is_one_line():
    with pytest.raises(
        ConfigError, match=r"analysis.kappa_interval='bca': must be one of studentized, percentile"
    ):
        LotteryOptions.from_dict({"kappa_interval": "bca"})


def test_studentized_upper_end_is_cut_at_kappas_maximum_with_a_note():
    """Bootstrap-t is not range-respecting: on these 10 items x 5 judges (binary) its upper end was
    1.557; Fleiss' kappa cannot exceed 1, so the interval ends at 1 and the note says so."""
    from promptlottery.metrics.kappa_interval import fleiss_interval

    codes = np.array(
        [[0, 1, 0, 0, 1], [0, 0, 1, 1, 0], [0, 1, 1, 1, 1], [0, 0, 1, 0, 0], [1, 1, 1, 1, 0],
         [1, 1, 1, 0, 1], [1, 1, 1, 1, 1], [1, 0, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 0, 1]]
    )  # fmt: skip
    low, high, notes = fleiss_interval(
        codes, 2, "studentized", percentile=(0.0, 0.0), n_resamples=200, seed=0, level=0.95
    )
    assert high == 1.0 and low < high
    assert any("upper end 1.557 cut at kappa's maximum 1" in n for n in notes), notes
