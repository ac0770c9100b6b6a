"""promptlottery.metrics.preference, preference_humans, preference_ranks and the cluster bootstrap:
definitions checked on cases worked out by hand (the arithmetic is in the comments), never against
the code's own output."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    cluster_resample,
    cluster_resample_counts,
    clustered_bootstrap_ci,
    clustered_ratio_ci,
    fleiss_kappa,
)
from promptlottery.metrics import preference as pm
from promptlottery.metrics import preference_humans as ph
from promptlottery.metrics import preference_ranks as pr
from promptlottery.metrics._resampled import fleiss_kappa_resampled

# the toy of issue 25 at the array level, wording P1: verdicts of orders 12 / 21 in the pair's terms
P1_FIRST = ["1", "1", "tie", "1"]
P1_SECOND = ["1", "2", "tie", "1"]
HUMAN = ["1", "2", "tie", "1"]


def test_order_resolved_and_two_order_verdict():
    # q1 1=1 -> 1; q2 1 vs 2 -> inconsistent; q3 tie=tie -> tie; q4 1=1 -> 1
    resolved = pm.order_resolved(P1_FIRST, P1_SECOND)
    assert resolved.tolist() == ["1", "inconsistent", "tie", "1"]
    # inconsistent counts as a tie where a two-order verdict is needed (FastChat show_result.py)
    assert pm.two_order_verdict(resolved).tolist() == ["1", "tie", "tie", "1"]


def test_order_averaged_by_hand():
    # q2: order 12 says (0.6, 0.4, 0), order 21 says (0.2, 0.8, 0): mean (0.4, 0.6, 0) -> "2" although
    # each order alone prefers the answer it shows first
    p12 = [[0.7, 0.3, 0.0], [0.6, 0.4, 0.0], [0.3, 0.2, 0.5], [0.8, 0.2, float("nan")]]
    p21 = [[0.6, 0.4, 0.0], [0.2, 0.8, 0.0], [0.2, 0.3, 0.5], [0.2, 0.8, float("nan")]]
    # q1 (0.65, 0.35) -> 1; q3 (0.25, 0.25, 0.5) -> tie; q4 (0.5, 0.5, NaN = 0): 1 and 2 share the top -> tie
    assert pm.order_averaged(p12, p21).tolist() == ["1", "2", "tie", "tie"]
    # no probabilities in one order: missing
    assert pm.order_averaged([[np.nan, np.nan, np.nan]], [[0.5, 0.5, 0]]).tolist() == [None]


def test_position_measures_by_hand():
    # consistent: q1, q3, q4 -> 3/4
    assert pm.position_consistency(P1_FIRST, P1_SECOND) == 0.75
    # first shown wins: order 12 verdict "1" (q1, q2, q4), order 21 verdict "2" (q2); q1 and q4 in
    # order 21 prefer the answer shown second; q3's two ties left out -> 4 of 6 untied verdicts
    assert pm.first_position_rate(P1_FIRST, P1_SECOND) == pytest.approx(4 / 6)


def test_always_a_judge():
    """A judge that always answers "A": "A" is response_a in order 12 and response_b in order 21."""
    first, second = ["1"] * 5, ["2"] * 5
    assert pm.position_consistency(first, second) == 0.0
    assert pm.first_position_rate(first, second) == 1.0


def test_human_agreement_by_hand():
    judge = pm.two_order_verdict(pm.order_resolved(P1_FIRST, P1_SECOND))  # 1, tie, tie, 1
    # human ties excluded: q1 1=1, q2 tie != 2, q4 1=1 -> 2/3
    assert ph.preference_agreement(judge, HUMAN) == pytest.approx(2 / 3)
    # ties a class: q1, q3 (tie = tie), q4 right -> 3/4
    assert ph.preference_agreement(judge, HUMAN, ties="class") == 0.75
    # FastChat w/o tie: q2 (judge tie) and q3 (human tie) skipped: q1, q4 right -> 2/2
    assert ph.preference_agreement(judge, HUMAN, ties="exclude_both") == 1.0
    # an inconsistent verdict passed as such reads as a tie
    assert ph.preference_agreement(["inconsistent"], ["tie"], ties="class") == 1.0


def test_autoj_and_judgebench_rules_by_hand():
    # five pairs, (order 12, order 21) in the pair's terms against the gold:
    #   p1 (1, tie) gold 1: Auto-J no (not both);   JudgeBench +1 + 0 = 1 -> right ("(correct, tie)")
    #   p2 (tie, 1) gold 1: Auto-J no;              JudgeBench 0 + 1 -> right
    #   p3 (1, 2)   gold 1: Auto-J no;              JudgeBench +1 - 1 = 0 -> not right
    #   p4 (2, 2)   gold 2: Auto-J right;           JudgeBench +2 -> right
    #   p5 (tie, tie) gold tie: Auto-J right (3-class gold); JudgeBench: no tie labels, left out
    #   p6 (None, 1) gold 1: Auto-J no (a missing exchanged prediction is not "both correct", still in total);
    #                        JudgeBench 0 + 1 -> right (a null decision stays in n_pairs)
    first = ["1", "tie", "1", "2", "tie", None]
    second = ["tie", "1", "2", "2", "tie", "1"]
    gold = ["1", "1", "1", "2", "tie", "1"]
    assert ph.autoj_agreement(first, second, gold) == pytest.approx(2 / 6)
    assert ph.judgebench_agreement(first, second, gold) == pytest.approx(4 / 5)
    # FastChat's w/o tie on the same pairs reads the order-resolved verdict: only p4 is consistent and untied
    resolved = pm.order_resolved(first, second)
    assert ph.preference_agreement(resolved, gold, ties="exclude_both") == 1.0


def test_rater_agreements_by_hand():
    raters = [["1", "1", "2"], ["2", "2", "2"], ["tie", "tie", "1"], ["1", "tie", "1"]]
    # w/o tie: q1 (1,1) agree, (1,2) x2 not -> 1/3; q2 3/3; q3 every pair has a tie -> 0/0;
    # q4 only (1,1) -> 1/1; pooled 5/7
    assert ph.rater_agreement(raters, ties="exclude") == pytest.approx(5 / 7)
    # w/ tie: q1 1/3, q2 3/3, q3 (tie,tie) 1/3, q4 (1,1) 1/3 -> 6/12
    assert ph.rater_agreement(raters, ties="class") == 0.5
    judge = ["1", "tie", "tie", "1"]
    # w/o tie: q1 "1" vs 1,1,2 -> 2/3; q2, q3 judge tie skipped; q4 "1" vs 1,1 (tie vote skipped) -> 2/2; 4/5
    assert ph.judge_rater_agreement(judge, raters, ties="exclude") == pytest.approx(0.8)
    # w/ tie: q1 2/3, q2 tie vs 2,2,2 0/3, q3 tie vs tie,tie,1 2/3, q4 2/3 -> 6/12
    assert ph.judge_rater_agreement(judge, raters, ties="class") == 0.5


def test_win_rates_and_bradley_terry_on_a_known_ranking():
    # x beats y 3 of 4, y beats z 3 of 4, x beats z 4 of 4, and one x-y tie
    s1 = ["x"] * 4 + ["y"] * 4 + ["x"] * 4 + ["x"]
    s2 = ["y"] * 4 + ["z"] * 4 + ["z"] * 4 + ["y"]
    v = ["1", "1", "1", "2"] + ["1", "1", "1", "2"] + ["1"] * 4 + ["tie"]
    wr = pr.win_rates(s1, s2, v)
    # x: 3 + 4 + 0.5 points of 9 games; y: 1 + 3 + 0.5 of 9; z: 1 of 8
    assert wr["x"] == pytest.approx(7.5 / 9)
    assert wr["y"] == pytest.approx(4.5 / 9)
    assert wr["z"] == pytest.approx(1 / 8)
    bt = pr.bradley_terry(s1, s2, v)
    assert list(bt.sort_values(ascending=False).index) == ["x", "y", "z"]
    assert bt.mean() == pytest.approx(0.0, abs=1e-9)
    # two systems, 3 wins to 1 loss: the MLE strength gap is log(3); a tie is half a win, half a loss:
    # 3.5 wins to 1.5 losses -> log(3.5 / 1.5)
    two = pr.bradley_terry(["a"] * 4, ["b"] * 4, ["1", "1", "1", "2"], C=1e8)
    assert two["a"] - two["b"] == pytest.approx(math.log(3), abs=1e-4)
    tie = pr.bradley_terry(["a"] * 5, ["b"] * 5, ["1", "1", "1", "2", "tie"], C=1e8)
    assert tie["a"] - tie["b"] == pytest.approx(math.log(3.5 / 1.5), abs=1e-4)


def test_resampled_win_rates_count_each_game_by_its_copies():
    # games x-y (x wins), x-z (tie), y-z (z wins), one wording; the second wording has no verdict on x-z
    pts = np.array([[1.0, 0.0], [0.5, np.nan], [0.0, 1.0]])
    codes = np.array([[0, 1], [0, 2], [1, 2]])
    w = np.array([[1, 1, 1], [2, 0, 1]])  # the identity draw, then x-y twice, x-z left out, y-z once
    out = pr.win_rates_resampled(w, pts, codes, 3)
    # draw 1, wording 1: x (1 + 0.5) / 2, y 0 / 2, z (0.5 + 1) / 2; wording 2: x 0 / 1, y (1 + 1) / 2, z 0 / 1
    assert out[0].tolist() == [[0.75, 0.0], [0.0, 1.0], [0.75, 0.0]]
    # draw 2, wording 1: x 2 / 2, y 0 / 3, z 1 / 1; wording 2: x 0 / 2, y (2 + 1) / 3, z 0 / 1
    assert out[1].tolist() == [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    # a system without a game under a draw: NaN
    assert np.isnan(pr.win_rates_resampled(np.array([[1, 0, 0]]), pts, codes, 3)[0, 2]).all()


def test_resampled_win_rates_on_the_identity_draw_equal_win_rates():
    rng = np.random.default_rng(3)
    names = ["a", "b", "c", "d"]
    games = [rng.choice(4, size=2, replace=False) for _ in range(40)]
    verdicts = rng.choice(["1", "2", "tie"], size=40)
    points = np.array([[{"1": 1.0, "2": 0.0, "tie": 0.5}[v]] for v in verdicts])
    got = pr.win_rates_resampled(np.ones((1, 40)), points, np.array(games), 4)[0, :, 0]
    want = pr.win_rates([names[g[0]] for g in games], [names[g[1]] for g in games], verdicts)
    assert got.tolist() == want.reindex(names).tolist()  # exactly: sums of halves


def test_rank_flips_by_hand():
    # scores of x, y, z under three wordings (the toy's win rates)
    s = np.array([[5 / 6, 1 / 3, 1 / 2], [1 / 6, 1 / 2, 1 / 6], [1 / 2, 3 / 4, 1.0]])
    # pair signs (x,y), (x,z), (y,z): P1 + + -, P2 - - -, P3 + - -
    # tau: P1-P2 (-1 -1 +1)/3 = -1/3, P1-P3 (+1 -1 +1)/3 = 1/3, P2-P3 (-1 +1 +1)/3 = 1/3: mean 1/9
    # flips: 2/3, 1/3, 1/3 -> 4/9; ranks P1 (1,3,2), P2 (3,2,1), P3 (2,3,1): changes 3/3, 2/3, 2/3 -> 7/9
    out = pr.rank_flips(s)
    assert out["kendall_tau"] == pytest.approx(1 / 9)
    assert out["flip_share"] == pytest.approx(4 / 9)
    assert out["rank_change_share"] == pytest.approx(7 / 9)


def test_rank_flips_resampled_equals_the_loop():
    rng = np.random.default_rng(3)
    x = np.round(rng.uniform(size=(40, 6, 4)), 1)  # ties on purpose
    x[rng.random(x.shape) < 0.1] = np.nan
    batch = pr.rank_flips_resampled(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop = np.array([list(pr.rank_flips(m).values()) for m in x])
    np.testing.assert_allclose(batch, loop, atol=1e-12, equal_nan=True)


def test_bad_preferences():
    with pytest.raises(ValueError, match=r"first\[1\] = 'A' is not a preference"):
        pm.position_consistency(["1", "A"], ["1", "2"])
    with pytest.raises(ValueError, match="ties='x' is not valid"):
        ph.preference_agreement(["1"], ["1"], ties="x")
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(pm.position_consistency(["1", None], [None, "2"]))


# --------------------------------------------------------------------------- the cluster bootstrap


def test_singleton_clusters_draw_what_the_item_bootstrap_draws():
    x = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    a = bootstrap_ci(np.mean, x, n_resamples=300, seed=4, vectorized=False)
    b = clustered_bootstrap_ci(np.mean, x, n_resamples=300, seed=4)
    np.testing.assert_array_equal(a.distribution, b.distribution)
    assert (a.low, a.high) == (b.low, b.high)


def test_cluster_draws_keep_clusters_together():
    clusters = ["a", "a", "a", "b", "c", "c"]
    draws, members = cluster_resample(clusters, 50, seed=1)
    assert draws.shape == (50, 3)  # as many clusters drawn as there are
    assert [m.tolist() for m in members] == [[0, 1, 2], [3], [4, 5]]
    w = cluster_resample_counts(clusters, 50, seed=1)
    # the items of one cluster are drawn the same number of times, and 3 clusters are drawn per resample
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 1] == w[:, 2]).all() and (w[:, 4] == w[:, 5]).all()
    np.testing.assert_array_equal(w[:, [0, 3, 4]].sum(axis=1), 3)


def test_clustered_ratio_equals_the_clustered_loop():
    rng = np.random.default_rng(0)
    den = rng.integers(0, 3, 30).astype(float)
    num = np.minimum(den, rng.integers(0, 3, 30))
    clusters = rng.integers(0, 9, 30)
    r = clustered_ratio_ci(num, den, clusters=clusters, n_resamples=200, seed=2)

    def ratio(n, d):
        return n.sum() / d.sum() if d.sum() else np.nan

    loop = clustered_bootstrap_ci(ratio, num, den, clusters=clusters, n_resamples=200, seed=2)
    np.testing.assert_allclose(r.distribution, loop.distribution, equal_nan=True)
    assert r.estimate == num.sum() / den.sum()


def test_clustering_widens_the_interval_of_correlated_items():
    # two instructions, each with 10 pairs judged alike: 10 wins, then 10 losses
    x = np.array([1.0] * 10 + [0.0] * 10)
    clusters = ["i1"] * 10 + ["i2"] * 10
    by_item = bootstrap_ci(np.mean, x, n_resamples=500, seed=0, vectorized=False)
    by_cluster = clustered_ratio_ci(x, np.ones(20), clusters=clusters, n_resamples=500, seed=0)
    # a cluster resample is 0, 0.5 or 1: the 95% interval spans [0, 1]
    assert set(np.unique(by_cluster.distribution)) <= {0.0, 0.5, 1.0}
    assert (by_cluster.low, by_cluster.high) == (0.0, 1.0)
    assert by_item.high - by_item.low < 0.6


def test_fleiss_resampled_with_cluster_counts_equals_the_loop():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 3, (25, 4))
    clusters = rng.integers(0, 8, 25)
    w = cluster_resample_counts(clusters, 100, seed=3)
    batch = fleiss_kappa_resampled(w, codes, 3)
    loop = clustered_bootstrap_ci(
        lambda m: fleiss_kappa(m, labels=[0, 1, 2]), codes, clusters=clusters, n_resamples=100, seed=3
    )
    np.testing.assert_allclose(batch, loop.distribution, atol=1e-12, equal_nan=True)
