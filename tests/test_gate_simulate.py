"""The gating simulation on a hand-computed example: calls, decisions, recovery, baselines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.gating.data import load_examples
from promptlottery.gating.simulate import (
    baseline_points,
    choose_operating_point,
    item_block,
    point_at_threshold,
    policy_metrics,
    simulate_first_k,
    simulate_fixed,
    simulate_threshold,
    threshold_curve,
)
from tests.test_gate_data import judgments

# 4 items x 5 judges (P1..P5) and the gate's P(in cluster) after each call
LABELS = {
    "A": [4, 4, 4, 2, 1],  # plurality 4
    "B": [1, 2, 2, 3, 3],  # plurality 2 (tie with 3, P2 first); no consensus
    "C": [3, 5, 5, 5, 1],  # plurality 5
    "D": [2, 2, 1, 1, 1],  # plurality 1 (its third 1 arrives with the fifth call)
}
GATE = {
    "A": [0.9, 0.1, 0.1, 0.1, 0.1],  # trusted after call 1 -> "4", recovered
    "B": [0.2, 0.4, 0.7, 0.9, 0.1],  # trusted after call 3 -> "2", recovered
    "C": [0.1, 0.3, 0.2, 0.4, 0.99],  # never before the last call: 5 calls, full plurality "5"
    "D": [0.3, 0.8, 0.1, 0.1, 0.1],  # trusted after call 2 -> "2", NOT the plurality "1"
}
HUMAN = {"A": 4.0, "B": 2.5, "C": 4.5, "D": 1.0}


@pytest.fixture()
def block_and_scores():
    ex = load_examples(judgments(LABELS, human=HUMAN))
    ex["p"] = [GATE[i][int(p)] for i, p in zip(ex["item_id"], ex["position"])]
    block = item_block(ex, ["P1", "P2", "P3", "P4", "P5"])
    return block, block.scores(ex, "p")


def test_learned_gate_calls_match_hand_computed_example(block_and_scores):
    block, scores = block_and_scores
    assert block.items["item_id"].tolist() == ["A", "B", "C", "D"]
    assert block.final.tolist() == ["4", "2", "5", "1"]
    calls, dec = simulate_threshold(block.labels, scores, 0.5, block.final)
    assert calls.tolist() == [1, 3, 5, 2]
    assert dec.tolist() == ["4", "2", "5", "2"]
    m = policy_metrics(calls, dec, block)
    assert m["mean_calls"] == pytest.approx(2.75)
    assert m["calls_saved"] == pytest.approx(1 - 2.75 / 5)
    assert m["recovered"] == pytest.approx(0.75)
    assert m["n_items_nc"] == 1 and m["mean_calls_nc"] == 3 and m["recovered_nc"] == 1.0
    # never trusting = naive five-prompt aggregation; always trusting = P1 alone
    calls, dec = simulate_threshold(block.labels, scores, np.inf, block.final)
    assert calls.tolist() == [5, 5, 5, 5] and dec.tolist() == block.final.tolist()
    calls, dec = simulate_threshold(block.labels, scores, 0.0, block.final)
    assert calls.tolist() == [1, 1, 1, 1] and dec.tolist() == ["4", "1", "3", "2"]


def test_missing_verdict_is_never_trusted():
    labels = np.array([[None, "3", "3"]], dtype=object)
    calls, dec = simulate_threshold(labels, np.array([[0.99, 0.99, 0.1]]), 0.5, np.array(["3"], dtype=object))
    assert calls.tolist() == [2] and dec.tolist() == ["3"]


def test_first_k_and_fixed_baselines_match_hand_computed_example(block_and_scores):
    block, _ = block_and_scores
    calls, dec = simulate_first_k(block.labels, 2, block.final)
    assert calls.tolist() == [2, 3, 3, 2] and dec.tolist() == ["4", "2", "5", "2"]
    calls, dec = simulate_first_k(block.labels, 3, block.final)
    assert calls.tolist() == [3, 5, 4, 5] and dec.tolist() == ["4", "2", "5", "1"]
    calls, dec = simulate_fixed(block.labels, 1, block.final)
    assert calls.tolist() == [1, 1, 1, 1] and dec.tolist() == ["4", "1", "3", "2"]
    pts = baseline_points(block).set_index("policy")
    assert pts.loc["first_2_agree", "mean_calls"] == pytest.approx(2.5)
    assert pts.loc["first_2_agree", "recovered"] == pytest.approx(0.75)
    assert pts.loc["first_3_agree", "mean_calls"] == pytest.approx(4.25)
    assert pts.loc["first_3_agree", "recovered"] == 1.0
    assert pts.loc["P1_only", "recovered"] == pytest.approx(0.25)
    assert pts.loc["full_plurality", "calls_saved"] == 0.0 and pts.loc["full_plurality", "recovered"] == 1.0


def test_cost_curve_and_operating_point(block_and_scores):
    block, scores = block_and_scores
    curve = threshold_curve(block, scores, "learned_gate")
    assert curve["mean_calls"].is_monotonic_increasing  # a higher threshold never saves more calls
    best = choose_operating_point(curve, target_recovery=0.75)
    assert best["recovered"] >= 0.75 and best["calls_saved"] == pytest.approx(
        curve.loc[curve["recovered"] >= 0.75, "calls_saved"].max()
    )
    full = choose_operating_point(curve, target_recovery=1.0)
    assert full["recovered"] == 1.0
    at = point_at_threshold(block, scores, "learned_gate", 0.5)
    assert at["mean_calls"] == pytest.approx(2.75)


def test_human_correlation_of_decisions(block_and_scores):
    from promptlottery.metrics import spearman

    block, _ = block_and_scores
    calls, dec = simulate_fixed(block.labels, 5, block.final)
    m = policy_metrics(calls, dec, block)
    expected = spearman([4, 2, 5, 1], [HUMAN[i] for i in "ABCD"])
    assert m["human_spearman"] == pytest.approx(expected)
    assert isinstance(block.items, pd.DataFrame)


def test_adaptive_full_aggregation_and_human_agreement_hand_computed(block_and_scores):
    block, _ = block_and_scores
    pts = baseline_points(block).set_index("policy")
    # third identical label at call 3 (A), never (B), call 4 (C: 5,5,5 at P2-P4), never within 5 (D: 1 x 3 at call 5)
    assert block.adaptive_calls.tolist() == [3, 5, 4, 5]
    assert pts.loc["adaptive_full_aggregation", "mean_calls"] == pytest.approx((3 + 5 + 4 + 5) / 4)
    assert pts.loc["adaptive_full_aggregation", "recovered"] == 1.0  # its decision is the reference
    # human labels on the scale: A (4.0) and D (1.0); B (2.5) and C (4.5) are not scale values
    assert pts.loc["full_plurality", "human_agreement"] == pytest.approx(1.0)  # 4 = 4, 1 = 1
    assert pts.loc["P1_only", "human_agreement"] == pytest.approx(0.5)  # A: 4 = 4; D: 2 != 1
    assert (
        pts.loc["P1_only", "human_agreement_nc"] != pts.loc["P1_only", "human_agreement_nc"]
    )  # B: no scale label
