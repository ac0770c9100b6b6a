"""Bradley-Terry rankings per wording from a sparse pairwise grid (metrics/sparse_bt.py) and the rank
changes between wordings, through the sparse estimates and the pairwise budget simulator. Every
expected value is derived by hand in the comments, or computed by a different implementation
(scikit-learn's logistic regression in ``preference_ranks.bradley_terry``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from promptlottery.metrics.preference_ranks import bradley_terry
from promptlottery.metrics.sparse_bt import bt_batch, bt_parts, bt_rank_changes, fit_weighted_bt
from promptlottery.metrics.sparse_pairwise import pairwise_plan
from promptlottery.modes.pairwise import ORDERS

#: a round robin of 3 systems, 3 games per system pair: x beats y 2-1, y beats z 2-1, x beats z 2-1
ROUND_ROBIN = [("x", "y", ["1", "1", "2"]), ("y", "z", ["1", "1", "2"]), ("x", "z", ["1", "1", "2"])]


def _games(spec):
    s1, s2, v = [], [], []
    for a, b, verdicts in spec:
        s1 += [a] * len(verdicts)
        s2 += [b] * len(verdicts)
        v += verdicts
    return s1, s2, v


def _points(verdicts):
    return np.array([{"1": 1.0, "2": 0.0, "tie": 0.5}[v] for v in verdicts])


def test_the_3_system_round_robin_by_hand():
    """Wins: x 4, y 3, z 2 of 6 each. The data are symmetric under (x <-> z, b -> -b), so the MLE has
    b_y = 0 and b_x = -b_z = d; x's score equation (expected wins = wins) is 3 s(d) + 3 s(2d) = 4,
    solved here by bisection. The ranking is x > y > z."""
    d = brentq(lambda t: 3 * expit(t) + 3 * expit(2 * t) - 4, 0.0, 5.0)
    s1, s2, v = _games(ROUND_ROBIN)
    pts = _points(v)[:, None]
    b = bt_batch(bt_parts(pts, np.ones_like(pts), s1, s2), np.ones((1, 9)), C=1e9)[0, :, 0]
    assert b.tolist() == pytest.approx([d, 0.0, -d], abs=1e-6)  # systems sorted: x, y, z
    # the same games seen with probability 1/2 each, twice as many in the full grid: the weights 2
    # restore the full grid's weighted points, so the fit is the same
    pts2 = np.concatenate([pts, pts])
    prob = np.full_like(pts2, 0.5)
    seen = np.where(np.arange(18)[:, None] < 9, pts2, np.nan)  # half the games observed
    b2 = bt_batch(bt_parts(seen, prob, s1 + s1, s2 + s2), np.ones((1, 18)), C=1e9)[0, :, 0]
    assert b2.tolist() == pytest.approx(b.tolist(), abs=1e-6)


def test_unit_weights_give_scikit_learns_fit():
    """On a full plan the fit is preference_ranks.bradley_terry (LogisticRegression(C=100) on each game
    and its mirror): a different implementation of the same penalised likelihood."""
    rng = np.random.default_rng(1)
    names = ["a", "b", "c", "d"]
    s1 = list(rng.choice(names, 50))
    s2 = [rng.choice([n for n in names if n != a]) for a in s1]
    v = list(rng.choice(["1", "2", "tie"], 50, p=[0.5, 0.3, 0.2]))
    pts = _points(v)[:, None]
    mine = bt_batch(bt_parts(pts, np.ones_like(pts), s1, s2), np.ones((1, 50)))[0, :, 0]
    assert mine.tolist() == pytest.approx(bradley_terry(s1, s2, v).to_numpy().tolist(), abs=1e-6)
    # a system that wins every game stays finite, as scikit-learn's does
    allwin = ["1"] * 50
    mine = bt_batch(bt_parts(np.ones((50, 1)), np.ones((50, 1)), s1, s2), np.ones((1, 50)))[0, :, 0]
    assert mine.tolist() == pytest.approx(bradley_terry(s1, s2, allwin).to_numpy().tolist(), abs=1e-6)


def test_rank_changes_between_two_wordings_by_hand():
    """P1: the round robin (x > y > z); P2: the same with x and y swapped (y > x > z, wins 4, 3, 2).
    Over the system pairs (x, y) discordant, (x, z) and (y, z) concordant: tau-b = (2 - 1) / 3 = 1/3,
    flip share 1/3; x and y change rank, z not: rank-change share 2/3."""
    s1, s2, v1 = _games(ROUND_ROBIN)
    # P2: y beats x 2-1 (x is system_1 of those pairs), y beats z 2-1, x beats z 2-1
    v2 = ["2", "2", "1"] + ["1", "1", "2"] + ["1", "1", "2"]
    pts = np.column_stack([_points(v1), _points(v2)])
    x = bt_batch(bt_parts(pts, np.ones_like(pts), s1, s2), np.ones((1, 9)))
    assert np.argsort(-x[0, :, 0]).tolist() == [0, 1, 2] and np.argsort(-x[0, :, 1]).tolist() == [1, 0, 2]
    assert bt_rank_changes(x, [0, 1, 2])[0].tolist() == pytest.approx([1 / 3, 1 / 3, 2 / 3])


def _judged(plan, wordings, order, values):
    from tests.test_sparse_pairwise import _judged as judged

    return judged(plan, wordings, order, values)


def test_known_answers_through_the_sparse_estimates():
    """24 games (4 systems, each pair of systems 4 times), 3 wordings, half the calls, P1 the anchor.
    The judge that always prefers the answer shown first: every two-order verdict is inconsistent, a
    tie, so every strength is 0 in every resample, every system ranks 1, no rank changes ([0, 0]) and
    tau-b is undefined (all tied). The oracle (the human preference in both orders under every wording)
    under an item subsample (every sampled pair judged under every wording, so every wording sees the
    same games with the same weights): the wordings' rankings are identical in every resample, tau 1
    and no rank change, [1, 1] and [0, 0]; on the full plan each wording's strengths are scikit-learn's
    fit to the human preferences."""
    from promptlottery.analysis.budget.pairwise.report import estimate_pairwise_sparse

    names = ["m1", "m2", "m3", "m4"]
    s1, s2 = zip(*[(a, b) for k, a in enumerate(names) for b in names[k + 1 :]] * 4)
    s1, s2 = list(s1), list(s2)
    n, wordings = len(s1), ["P1", "P2", "P3"]
    pairs = [f"q{k:02d}" for k in range(n)]
    human = list(np.random.default_rng(4).choice(["1", "2"], n))
    common = dict(n_resamples=100, level=0.95, seed=0, human=human, system_1=s1, system_2=s2)
    plan = pairwise_plan(pairs, wordings, orders=ORDERS, budget=0.5, full_share=0.25, anchor="P1")
    est = estimate_pairwise_sparse(
        _judged(plan, wordings, "12", ["1"] * n), _judged(plan, wordings, "21", ["2"] * n), plan, wordings,
        **common,
    )  # fmt: skip
    bt = est[est["statistic"] == "bradley_terry"]
    # the anchor P1 is judged in both orders on every pair: every system has its games there; under P2
    # and P3 a system whose pairs were never judged in both orders has no strength (NaN), never another
    values = bt[["estimate", "lo", "hi"]].to_numpy()
    assert len(bt) == 3 * 4 and (values[np.isfinite(values)] == 0.0).all()
    assert bt.loc[bt["wording"] == "P1", "estimate"].tolist() == [0.0] * 4
    assert (bt["rank"].dropna() == 1).all()
    row = est.set_index("statistic").loc["bt_rank_change_share"]
    assert (row["estimate"], row["lo"], row["hi"]) == (0.0, 0.0, 0.0)
    assert np.isnan(est.set_index("statistic").loc["bt_kendall_tau", "estimate"])

    plan = pairwise_plan(pairs, wordings, orders=ORDERS, budget=0.5, full_share=0.5)
    assert plan.mask.all(axis=1).sum() == n // 2 and (plan.mask.all(axis=1) | ~plan.mask.any(axis=1)).all()
    est = estimate_pairwise_sparse(
        _judged(plan, wordings, "12", human), _judged(plan, wordings, "21", human), plan, wordings, **common
    ).set_index("statistic")
    assert tuple(est.loc["bt_kendall_tau", ["estimate", "lo", "hi"]]) == (1.0, 1.0, 1.0)
    assert tuple(est.loc["bt_rank_change_share", ["estimate", "lo", "hi"]]) == (0.0, 0.0, 0.0)

    full = pairwise_plan(pairs, wordings, orders=ORDERS, budget=1.0)
    h = np.array(human, dtype=object)
    est = estimate_pairwise_sparse(
        np.tile(h[:, None], 3), np.tile(h[:, None], 3), full, wordings, **common
    )  # fmt: skip
    want = bradley_terry(s1, s2, human)
    for w in wordings:
        got = est[(est["statistic"] == "bradley_terry") & (est["wording"] == w)].set_index("system")
        assert got.loc[names, "estimate"].tolist() == pytest.approx(want[names].tolist(), abs=1e-6)
        ranks = 1 + (want[names].to_numpy()[None, :] > want[names].to_numpy()[:, None] + 1e-6).sum(axis=1)
        assert got.loc[names, "rank"].tolist() == ranks.tolist()


def test_a_fixed_baseline_plays_but_is_not_ranked():
    """Every model against one baseline (MT-Bench's pairwise-baseline mode): each model's games are
    against the baseline only, so the likelihood separates and a model's strength minus the
    baseline's is log(wins / losses) (C large). m1 wins 3 of 4, m2 2 of 4, m3 1 of 4: ranks 1, 2, 3;
    the baseline has no bradley_terry row and is left out of the rank changes."""
    from promptlottery.analysis.budget.pairwise.simulation import bt_estimates

    s1 = ["m1"] * 4 + ["m2"] * 4 + ["m3"] * 4
    s2 = ["base"] * 12
    v = ["1", "1", "1", "2", "1", "1", "2", "2", "1", "2", "2", "2"]
    pts = np.column_stack([_points(v), _points(v)])
    out = bt_estimates(pts, np.ones_like(pts), s1, s2, ["P1", "P2"], np.ones((1, 12)))
    assert not any("base" in k for k in out)
    m = {k.split("/")[-1]: float(v[0]) for k, v in out.items() if k.startswith("bradley_terry/P1/")}
    # with C = 100 the ridge pulls a little: the differences are close to log(3), log(1), log(1/3)
    b_base = -(m["m1"] + m["m2"] + m["m3"])  # the strengths are centred over the 4 systems
    assert [m["m1"] - b_base, m["m2"] - b_base, m["m3"] - b_base] == pytest.approx(
        [np.log(3), 0.0, -np.log(3)], abs=0.02
    )
    assert float(out["bt_kendall_tau"][0]) == 1.0 and float(out["bt_rank_change_share"][0]) == 0.0


def test_the_simulator_rows_for_the_oracle_under_an_item_subsample():
    """On a full grid, the item-subsample design gives every wording the same games: the oracle's
    rankings agree in every plan and resample, so tau's mean estimate is 1 and its intervals cover."""
    from promptlottery.analysis.budget.pairwise.simulation import simulate_pairwise_budgets

    names = ["m1", "m2", "m3"]
    s1, s2 = zip(*[(a, b) for k, a in enumerate(names) for b in names[k + 1 :]] * 4)
    n = len(s1)
    human = list(np.random.default_rng(2).choice(["1", "2"], n))
    h = np.array(human, dtype=object)
    t = simulate_pairwise_budgets(
        np.tile(h[:, None], 3), np.tile(h[:, None], 3), human, list(s1), list(s2),
        pairs=[f"q{k}" for k in range(n)], wordings=["P1", "P2", "P3"], reference="P1", budgets=[0.5],
        designs=["items"], n_sim=5, n_resamples=50, orders=ORDERS,
    ).set_index("statistic")  # fmt: skip
    row = t.loc["bt_kendall_tau"]
    assert (row["full"], row["mean_estimate"], row["coverage"]) == (1.0, 1.0, 1.0)
    assert t.loc["bt_rank_change_share", "mean_estimate"] == 0.0
    assert {f"bradley_terry/P2/{s}" for s in names} <= set(t.index)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="same pairs x wordings"):
        bt_parts(np.ones((2, 1)), np.ones((2, 2)), ["a", "b"], ["b", "a"])
    with pytest.raises(ValueError, match="one system per pair"):
        bt_parts(np.ones((2, 1)), np.ones((2, 1)), ["a"], ["b", "a"])
    with pytest.raises(ValueError, match="against itself"):
        bt_parts(np.ones((1, 1)), np.ones((1, 1)), ["a"], ["a"])
    with pytest.raises(ValueError, match="inclusion probability 0"):
        bt_parts(np.ones((1, 1)), np.zeros((1, 1)), ["a"], ["b"])
    with pytest.raises(ValueError, match="non-negative"):
        fit_weighted_bt(-np.ones((1, 2, 2)))
    with pytest.raises(ValueError, match="C must be"):
        fit_weighted_bt(np.ones((1, 2, 2)), C=0)
    with pytest.raises(ValueError, match="resamples, systems, wordings"):
        bt_rank_changes(np.ones((2, 2)), [0, 1])
