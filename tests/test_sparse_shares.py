"""Sparse-grid shares (metrics/sparse_shares.py, the pairwise parts in metrics/sparse_pairwise.py), the
pairwise budget simulator and adaptive stopping over (wording, order) cells. Every expected value is
computed by hand in the comments, from the Horvitz-Thompson weights 1 / inclusion probability."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.budget.pairwise.simulation import (
    simulate_pairwise_adaptive,
    simulate_pairwise_budgets,
)
from promptlottery.metrics import sparse_pairwise as spp
from promptlottery.metrics.sparse_shares import (
    ht_share,
    pointwise_human_parts,
    share_batch,
    win_rate_batch,
    win_rate_parts,
)
from promptlottery.modes.pairwise import ORDERS

NAN = float("nan")


def test_pointwise_human_agreement_ht_by_hand():
    # item 0 judged under both wordings (prob 1), items 1-3 spread (prob 1/2 per cell)
    labels = [[1, 2], [2, NAN], [2, 2], [3, NAN]]
    human = [1, 1, 2, NAN]  # item 3 has no human label: never eligible
    prob = [[1, 1], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
    parts = pointwise_human_parts(labels, human, prob)
    r = np.ones((1, 4))
    # wording 0: hits item 0 (1/1) and item 2 (1/0.5 = 2), item 1 misses (weight 2): 3 / (1 + 2 + 2) = 0.6
    # wording 1: item 0 misses (1), item 2 hits (2): 2 / 3
    assert share_batch(parts, r)[0].tolist() == pytest.approx([0.6, 2 / 3])
    # pooled: (3 + 2) / (5 + 3) = 5/8
    assert share_batch(parts, r, pooled=True)[0] == pytest.approx(5 / 8)
    # HT over the known eligible items (the 3 with a human label): 3 / 3 and 2 / 3; pooled 5 / 6
    known = np.array([[1, 1], [1, 1], [1, 1], [0, 0]])
    assert share_batch(parts, r, known=known)[0].tolist() == pytest.approx([1.0, 2 / 3])
    assert share_batch(parts, r, known=known, pooled=True)[0] == pytest.approx(5 / 6)
    # a bootstrap row counting item 2 twice and item 1 not at all: wording 0 (1 + 4) / (1 + 4) = 1
    assert share_batch(parts, np.array([[1.0, 0.0, 2.0, 1.0]]))[0, 0] == pytest.approx(1.0)


def test_ht_share_refuses_a_unit_the_plan_could_not_draw():
    with pytest.raises(ValueError, match="probability 0"):
        ht_share([[1]], [[1]], [[0.0]])


def test_pairwise_human_agreement_first_position_and_win_rates_by_hand():
    # pair 0: A (1, 1) -> 1, B (1, 2) -> inconsistent = tie; human 1: A hits (weight 1), B misses (2)
    # pair 1: A one order only (no two-order verdict), B (2, 2) -> 2; human 2: B hits (2)
    first = [["1", "1"], ["2", "2"]]
    second = [["1", "2"], [None, "2"]]
    both = np.array([[1.0, 0.5], [1.0, 0.5]])
    parts = spp.human_agreement_parts(first, second, ["1", "2"], both)
    r = np.ones((1, 2))
    assert share_batch(parts, r)[0].tolist() == pytest.approx([1.0, 0.5])  # A: 1/1; B: 2 / (2 + 2)
    assert share_batch(parts, r, pooled=True)[0] == pytest.approx(3 / 5)  # (1 + 2) / (1 + 4)
    # a human tie is left out ("exclude_human"), or a class of its own ("class")
    tie = spp.human_agreement_parts(first, second, ["tie", "2"], both)
    assert share_batch(tie, r)[0].tolist() == pytest.approx([NAN, 1.0], nan_ok=True)
    tie_class = spp.human_agreement_parts(first, second, ["tie", "2"], both, ties="class")
    # kept: pair 0's A "1" misses the tie (1), its B tie (inconsistent) hits it (2); pair 1's B hits (2)
    assert share_batch(tie_class, r)[0].tolist() == pytest.approx([0.0, 1.0])
    # first position: order 12 "1" (shown first, weight 1) and order 21 "1" (not, weight 2) on pair 0;
    # on pair 1 order 12 is a tie (left out), order 21 "2" (shown first, weight 2): 3 / 5
    fp = spp.first_position_parts([["1"], ["tie"]], [["1"], ["2"]], [[1.0], [0.5]], [[0.5], [0.5]])
    assert share_batch(fp, r, pooled=True)[0] == pytest.approx(3 / 5)
    # win rates, one wording: x-y "1" (x wins, P(both) 1), x-z tie (1/2), y-z "2" (z wins, 1/2)
    # x: (1 + 0.5 * 2) / (1 + 2) = 2/3; y: 0 / 3 = 0; z: (0.5 * 2 + 1 * 2) / (2 + 2) = 3/4
    pts = spp.game_points([["1"], ["tie"], ["2"]], [["1"], ["tie"], ["2"]])
    wp = win_rate_parts(pts, [[1.0], [0.5], [0.5]], ["x", "x", "y"], ["y", "z", "z"])
    assert wp[2] == ["x", "y", "z"]
    assert win_rate_batch(wp, np.ones((1, 3)))[0, :, 0].tolist() == pytest.approx([2 / 3, 0.0, 0.75])


def test_the_pairwise_simulator_is_exact_at_the_full_budget_and_knows_a_position_judge():
    # a judge that always prefers the answer shown first: "1" in order 12, "2" in order 21, every wording
    n, k = 12, 3
    first = np.full((n, k), "1", dtype=object)
    second = np.full((n, k), "2", dtype=object)
    human = ["1", "2"] * (n // 2)
    s1, s2 = ["x", "y", "z"] * 4, ["y", "z", "x"] * 4
    table = simulate_pairwise_budgets(
        first, second, human, s1, s2, pairs=[f"q{i}" for i in range(n)], wordings=["P1", "P2", "P3"],
        reference="P1", budgets=[0.5, 1.0], designs=["items", "spread"], n_sim=4, n_resamples=20,
        orders=ORDERS,
    )  # fmt: skip
    t = table.set_index(["design", "budget", "statistic"])
    # consistency 0, first position 1 and (every verdict inconsistent = tie) every system's win rate 1/2,
    # at every budget and design, intervals included
    for design in ("items", "spread"):
        for budget in (0.5, 1.0):
            assert t.loc[(design, budget, "position_consistency"), "mean_estimate"] == 0.0
            assert t.loc[(design, budget, "first_position_rate"), "mean_estimate"] == 1.0
            assert t.loc[(design, budget, "win_rate/P2/y"), "mean_estimate"] == 0.5
            assert t.loc[(design, budget, "position_consistency"), "coverage"] == 1.0
    # the two-order verdict is a tie on every pair, so no non-tie human preference is matched: 0
    assert t.loc[("items", 0.5, "human_agreement"), "full"] == 0.0
    # the kappa of a constant verdict is undefined: not a row
    assert not any(s == "pairwise_kappa" for _, _, s in t.index)
    # at the full budget the items design judges everything: the estimates are the full values
    full = table[(table["budget"] == 1.0) & (table["design"] == "items")]
    assert (full["rmse"] == 0).all() and (full["calls_share"] == 1.0).all()


def test_pairwise_adaptive_stopping_by_hand():
    # two wordings -> 4 cells per pair, in the order given (0, 1, 2, 3); Beta at confidence 0.85
    # pair A: 1 1 1 1: after two "1" votes P = 1 - 0.5^3 = 0.875 >= 0.85: 2 calls
    # pair B: 1 2 1 1: P after 1, 2, 3, 4 votes: 0.75, 0.5, 11/16, I_.5(2, 4) = 13/16 < 0.85: exhausted (4)
    # pair C: 2 2 1 1: like A after two votes: 2 calls, plurality "2"; 2 vs 2 in full: no cluster
    first = [["1", "1"], ["1", "1"], ["2", "1"]]
    second = [["1", "1"], ["2", "1"], ["2", "1"]]
    orders = np.tile(np.arange(4), (3, 1))
    rec = simulate_pairwise_adaptive(first, second, rule="beta", confidence=0.85, orders=orders)
    assert rec["mean_calls"] == pytest.approx(8 / 3)
    assert rec["saving"] == pytest.approx(1 - (8 / 3) / 4)
    # clusters (3 of 4 votes): A and B, both "1", both recovered
    assert (rec["items_with_cluster"], rec["recovered"]) == (2, 1.0)
    # the paper's rule at ceil(5 / 2) = 3 votes: A 3 calls, B 4 (1 2 1 then 1), C 4: 11 / 3
    rec = simulate_pairwise_adaptive(first, second, rule="paper_3of5", orders=orders)
    assert rec["mean_calls"] == pytest.approx(11 / 3)
    # a pair with a missing verdict is left out and counted
    rec = simulate_pairwise_adaptive([["1", None], ["1", "1"]], [["1", "1"], ["1", "1"]], rule="beta",
                                     confidence=0.85, n_sim=2)  # fmt: skip
    assert (rec["n_left_out"], rec["n_items"], rec["mean_calls"]) == (1, 1, 2.0)
    with pytest.raises(ValueError, match="no pair has a verdict"):
        simulate_pairwise_adaptive([["1", None]], [["1", "1"]], n_sim=2)


def test_a_full_pairwise_grid_through_the_budget_stage(tmp_path):
    """+analysis=budget on a full pairwise sweep of the fake judge that always prefers the answer shown
    first: position consistency 0 and first-position rate 1 at every design and budget (the intervals
    too: coverage 1), the adaptive table beside it, and the figure written; the wording model's
    agreement 0 under every wording."""
    from promptlottery.stages import run_stage
    from tests.conftest import compose

    base = ["backbone=fake", "backbone.backend.behaviour=always_first", "+experiment=llmbar_natural_pairwise",
            "dataset.limit=10", "stage=judge"]  # fmt: skip
    for n, v in enumerate(["P1", "P2", "P3"]):
        cfg = compose([*base, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / "sweep" / f"{n}_{v}")["status"] == "ok"
    cfg = compose(["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.n_sim=3",
                   "analysis.n_resamples=10", "analysis.budgets=[0.5]", "analysis.confidences=[0.9]"],
                  tmp_path=tmp_path)  # fmt: skip
    rec = run_stage(cfg, tmp_path / "budget")
    assert rec["status"] == "ok"
    fam = pd.read_csv(tmp_path / "budget" / "tables" / "budget_pairwise_families.csv")
    by = fam.set_index(["design", "statistic"])
    for design in ("items", "spread", "anchor"):
        assert by.loc[(design, "position_consistency"), "mean_estimate"] == 0.0
        assert by.loc[(design, "first_position_rate"), "mean_estimate"] == 1.0
        assert by.loc[(design, "first_position_rate"), "coverage"] == 1.0
    adaptive = pd.read_csv(tmp_path / "budget" / "tables" / "adaptive_pairwise.csv")
    # 3 wordings x 2 orders: the votes alternate 1, 2 by order; the cluster rule needs 4 of 6: none has it
    assert set(adaptive["rule"]) == {"paper_3of5", "beta", "dirichlet"}
    assert (adaptive["n_cells"] == 6).all() and (adaptive["items_with_cluster"] == 0).all()
    assert (tmp_path / "budget" / "figures" / "budget.png").exists()
    assert "pairwise lottery at a fraction" in (tmp_path / "budget" / "budget.md").read_text()
    # the wording model on the same full grid (it was refused here before): every two-order verdict of
    # this judge is a tie and LLMBar's human preferences are never ties, so every wording agrees with the
    # humans on no pair: each quantile over the wordings is 0 on the full grid, and the observed cells'
    # means are 0 in every plan (tests/test_wording_pairwise.py has the rest)
    model = compose(["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.model_ranks=[0]",
                     "analysis.model_embedding=none", "analysis.n_sim=2", "analysis.n_resamples=5",
                     "analysis.budgets=[0.5]", "analysis.model_n_sim=2", "analysis.model_resamples=3"],
                    tmp_path=tmp_path)  # fmt: skip
    assert run_stage(model, tmp_path / "budget_model")["status"] == "ok"
    table = pd.read_csv(tmp_path / "budget_model" / "tables" / "wording_model.csv")
    quant = table[table["statistic"].str.startswith("q")]
    assert len(quant) == 2 * 5 and (quant["full"] == 0.0).all()
    assert (quant.loc[quant["method"].str.startswith("observed"), "mean_estimate"] == 0.0).all()


def test_pointwise_human_agreement_in_the_budget_simulator_by_hand():
    # 8 items x 3 wordings: A agrees with the humans on every item, B on half of them, C on none
    from promptlottery.analysis.budget.simulation import simulate_budgets

    rng = np.random.default_rng(0)
    labels = rng.integers(1, 4, (8, 3)).astype(float)
    hits = np.column_stack([np.ones(8), np.arange(8) % 2, np.zeros(8)])
    table = simulate_budgets(
        labels, labels, ["s"] * 8, items=[f"i{k}" for k in range(8)], variants=["A", "B", "C"], reference="A",
        budgets=[0.5, 1.0], designs=["spread"], n_sim=5, n_resamples=20, hits=hits,
    ).set_index(["budget", "statistic"])  # fmt: skip
    # full: A 1, B 1/2, C 0, pooled (8 + 4 + 0) / 24 = 1/2
    assert [table.loc[(1.0, f"human_agreement/{w}"), "full"] for w in "ABC"] == [1.0, 0.5, 0.0]
    assert table.loc[(1.0, "human_agreement"), "full"] == 0.5
    # every judged cell of A is a hit and of C a miss: whatever the plan, the estimates are 1 and 0
    assert table.loc[(0.5, "human_agreement/A"), "mean_estimate"] == 1.0
    assert table.loc[(0.5, "human_agreement/C"), "mean_estimate"] == 0.0
    assert table.loc[(1.0, "human_agreement/B"), "rmse"] == 0.0
