"""The frontier's pieces on hand-computed cases (gating/frontier.py, gating/split.left_out_configs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.gating import frontier as fr
from promptlottery.gating.item_block import ItemBlock
from promptlottery.gating.split import left_out_configs

V = ["P1", "P2", "P3", "P4", "P5"]


def block(rows: list[list[str]], human: list[float]) -> ItemBlock:
    """Items with these five labels each; the plurality / convergence as gating.data computes them."""
    from promptlottery.metrics.convergence import online_convergence

    labels = np.array(rows, dtype=object)
    plur = [max(set(r), key=lambda x: (r.count(x), -r.index(x))) for r in rows]
    items = pd.DataFrame(
        {
            "config_id": "c",
            "item_id": [f"i{k}" for k in range(len(rows))],
            "item_key": [f"d/i{k}" for k in range(len(rows))],
            "scale": "likert_1_5",
            "plurality": plur,
            "human": human,
            "no_consensus": [max(r.count(x) for x in r) < 3 for r in rows],
            "converged_at": online_convergence(labels, n_judges=5),
        }
    )
    return ItemBlock(items=items, labels=labels, variants=V)


ROWS = [
    ["3", "3", "3", "3", "3"],  # unanimous
    ["2", "4", "4", "4", "1"],  # P1 out of the cluster (4, 3 of 5)
    ["5", "5", "1", "2", "5"],  # cluster 5 reached at call 5
    ["1", "2", "3", "4", "5"],  # no consensus: plurality = P1's label (ties to the earliest)
]


def test_fixed_policies_by_hand():
    b = block(ROWS, [3.0, 4.0, 5.0, 2.5])
    t = fr.frontier(b, pd.DataFrame(), {}, n_resamples=200).table.set_index("policy")
    # P1 alone: decisions 3, 2, 5, 1 against the pluralities 3, 4, 5, 1: 3 of 4 recovered
    assert t.loc["P1_only", "calls"] == 1 and t.loc["P1_only", "recovered"] == pytest.approx(0.75)
    # human agreement over the items whose human label is on the scale (2.5 is not): 3 of 3 P1 = human? 3=3, 2!=4, 5=5
    assert t.loc["P1_only", "human_agreement"] == pytest.approx(2 / 3)
    assert t.loc["full_aggregation", "calls"] == 5 and t.loc["full_aggregation", "recovered"] == 1
    assert t.loc["full_aggregation", "human_agreement"] == 1
    # first-2-agree: item 0 at call 2 (3), item 1 at call 3 (4), item 2 at call 2 (5), item 3 never
    # (5 calls, the plurality): (2 + 3 + 2 + 5) / 4 calls
    assert t.loc["first_2_agree", "calls"] == pytest.approx(3.0) and t.loc["first_2_agree", "recovered"] == 1
    # the paper's adaptive full aggregation: converged at 3, 4, 5; never -> 5
    assert t.loc["adaptive_3of5", "calls"] == pytest.approx((3 + 4 + 5 + 5) / 4)
    for axis in ("calls", "recovered", "human_agreement"):
        assert (t[f"{axis}_lo"] <= t[axis] + 1e-12).all() and (t[axis] <= t[f"{axis}_hi"] + 1e-12).all()
    assert t.loc["full_aggregation", "calls_saved"] == 0 and t.loc["P1_only", "calls_saved"] == 0.8


def test_adaptive_beta_stops_on_agreement_and_exhausts_on_none():
    b = block([ROWS[0], ROWS[3]], [3.0, 1.0])
    # Beta criterion: two agreeing votes give 1 - 0.5 ** 3 = 0.875 >= 0.85 (one vote: 0.75 < 0.85)
    calls, dec = fr.adaptive_stopping(b, "beta", 0.85)
    assert calls.tolist() == [2, 5] and dec[0] == "3"
    calls, _ = fr.adaptive_stopping(b, "beta", 0.7)  # one vote already gives 0.75: every item stops
    assert calls.tolist() == [1, 1]


def test_mcc_and_its_interval():
    y = np.array([1, 1, 0, 0])
    assert fr.mcc(y, np.array([1, 0, 0, 0])) == pytest.approx(1 / np.sqrt(3))
    assert fr.mcc(y, np.ones(4)) == 0.0  # a constant prediction
    m = fr.mcc_interval(y, np.array([0.9, 0.8, 0.1, 0.2]), np.array(["a", "b", "c", "d"]), n_resamples=300)
    assert m["mcc"] == 1 and m["mcc_hi"] == 1 and m["mcc_lo"] <= 1


def test_cluster_mean_ci_leaves_out_undefined_items():
    w = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    est, lo, hi = fr.cluster_mean_ci(np.array([1.0, 0.0, np.nan]), w, level=0.5)
    # resample means: 1/2, 2/2, 0/3 -> quartiles of [0.5, 1, 0]
    assert est == 0.5 and (lo, hi) == pytest.approx(tuple(np.quantile([0.5, 1.0, 0.0], [0.25, 0.75])))


def policy_rows(policy, calls, calls_ci, recovered, recovered_ci, human) -> pd.DataFrame:
    """A frontier table by hand: each axis's estimate and its (lo, hi) per policy."""
    return pd.DataFrame(
        {
            "policy": policy,
            "calls": calls,
            "calls_lo": [c[0] for c in calls_ci],
            "calls_hi": [c[1] for c in calls_ci],
            "recovered": recovered,
            "recovered_lo": [r[0] for r in recovered_ci],
            "recovered_hi": [r[1] for r in recovered_ci],
            "human_agreement": human,
        }
    )


def test_recommendation_takes_the_cheapest_policy_that_recovers_the_target():
    t = policy_rows(
        ["P1_only", "first_2_agree", "full_aggregation"],
        [1.0, 2.5, 5.0],
        [(1.0, 1.0), (2.2, 2.8), (5.0, 5.0)],
        [0.80, 0.90, 1.0],
        [(0.7, 0.9), (0.85, 0.95), (1.0, 1.0)],
        [0.5, 0.6, 0.6],
    )
    s = fr.recommendation(t, 0.86)
    assert s.startswith("Take first_2_agree: it recovers 90% [85%, 95%]") and "2.50 [2.20, 2.80]" in s
    assert "one call alone recovers 80% [70%, 90%]" in s
    assert fr.recommendation(t, 0.75).startswith("Take P1_only")
    assert "one wording's verdict" not in s and "on 12 items" in fr.recommendation(t.assign(n_items=12), 0.86)


def test_a_one_call_stopping_rule_is_named_for_what_it_is():
    """An adaptive rule whose validation confidence stops at the first vote makes one call per item
    (calls 1.00 [1.00, 1.00]): the sentence says it is one wording's verdict, not an aggregation."""
    t = policy_rows(
        ["P1_only", "adaptive_beta", "full_aggregation"],
        [1.0, 1.0, 5.0],
        [(1.0, 1.0), (1.0, 1.0), (5.0, 5.0)],
        [0.83, 1.0, 1.0],
        [(0.5, 1.0), (1.0, 1.0), (1.0, 1.0)],
        [np.nan] * 3,
    ).assign(n_items=6)
    s = fr.recommendation(t, 0.86)
    assert s.startswith("Take adaptive_beta: it recovers 100% [100%, 100%]") and "on 6 items" in s
    assert s.endswith("It makes one call on every item: one wording's verdict, no aggregation.")


def test_stacked_gate_reads_both_inputs():
    rng = np.random.default_rng(0)
    n = 200
    y = rng.integers(0, 2, n)
    val = pd.DataFrame(
        {"in_cluster": y, "p_gate": np.where(y, 0.7, 0.3), "confidence": 0.5, "position": np.arange(n) % 5}
    )
    test = val.head(10).copy()
    p = fr.stacked_gate(val, {"test": test})["test"]
    assert ((p > 0.5) == test["in_cluster"].astype(bool)).all()


def test_left_out_configs_is_seeded_and_leaves_training_configs():
    cfgs = [f"c{k}" for k in range(10)]
    a = left_out_configs(cfgs, 0.3, seed=0)
    assert len(a) == 3 and a == left_out_configs(list(reversed(cfgs)), 0.3, seed=0)
    assert left_out_configs(["c0", "c1"], 0.9, seed=0) in (["c0"], ["c1"])  # at most n - 1
    assert left_out_configs(["c0"], 0.5, seed=0) == [] and left_out_configs(cfgs, None, seed=0) == []


def test_by_configuration_splits_the_items():
    b = block(ROWS, [3.0, 4.0, 5.0, 2.5])
    b.items["config_id"] = ["a", "a", "b", "b"]
    t = fr.by_configuration(b, pd.DataFrame(), {}, n_resamples=100)
    p1 = t[t["policy"] == "P1_only"].set_index("config_id")
    # config a: P1 says 3 (plurality 3) and 2 (plurality 4); config b: 5 (5) and 1 (1)
    assert p1.loc["a", "recovered"] == 0.5 and p1.loc["b", "recovered"] == 1.0
    assert set(t["n_items"]) == {2} and set(t["n_configs"]) == {1}


def test_a_binary_human_label_on_a_likert_scale_has_no_agreement():
    # EvoUNA: the human says correct (1) / wrong (0), the judge rates 1-5: 1 = "correct" is not the scale's 1
    b = block(ROWS, [1.0, 0.0, 1.0, 1.0])
    t = fr.frontier(b, pd.DataFrame(), {}, n_resamples=50).table
    assert t["human_agreement"].isna().all() and set(t["n_items_human"]) == {0}


# -- the sparse designs as policies (gating/sparse_policy.py) -------------------------------------


def test_sparse_designs_by_hand():
    from promptlottery.gating.sparse_policy import simulate_sparse

    b = block(ROWS, [3.0, 4.0, 5.0, 2.5])
    p1 = ["3", "2", "5", "1"]  # P1's labels; pluralities 3, 4, 5, 1
    # the whole budget: every cell, the full plurality
    calls, dec = simulate_sparse(b, budget=1.0)
    assert calls.tolist() == [5] * 4 and dec.tolist() == ["3", "4", "5", "1"]
    # a fifth with P1 as the anchor: P1 alone on every item
    calls, dec = simulate_sparse(b, budget=0.2, anchor="P1")
    assert calls.tolist() == [1] * 4 and dec.tolist() == p1
    # two fifths with the anchor: P1 and exactly one other wording (m = 2 - 1 = 1); two labels either
    # agree or tie, and a tie goes to the earliest wording, P1: P1's decisions at two calls each
    calls, dec = simulate_sparse(b, budget=0.4, anchor="P1", seed=7)
    assert calls.tolist() == [2] * 4 and dec.tolist() == p1
    # two fifths without an anchor: two wordings per item; the unanimous item is always recovered
    calls, dec = simulate_sparse(b, budget=0.4, seed=7)
    assert calls.tolist() == [2] * 4 and dec[0] == "3"


def test_sparse_design_leaves_unjudged_items_without_a_decision():
    from promptlottery.gating.sparse_policy import simulate_sparse

    rows = [["3"] * 5 for _ in range(60)]
    b = block(rows, [3.0] * 60)
    # a tenth of 5 calls = 0.5 per item: each item gets 0 or 1 wording (floor(1.5 - u))
    calls, dec = simulate_sparse(b, budget=0.1, seed=0)  # the frontier's seed
    assert set(calls.tolist()) == {0, 1}
    assert all((d is None) == (c == 0) for c, d in zip(calls, dec))
    t = fr.frontier(b, pd.DataFrame(), {}, sparse_designs=({"budget": 0.1, "anchor": None, "full_share": 0.0},),
                    n_resamples=200).table.set_index("policy")  # fmt: skip
    # unanimous items: recovered exactly where judged
    assert t.loc["sparse_0.1", "recovered"] == pytest.approx((calls > 0).mean())
    assert t.loc["sparse_0.1", "calls"] == pytest.approx(calls.mean())
    assert t.loc["sparse_0.1", "calls_lo"] <= calls.mean() <= t.loc["sparse_0.1", "calls_hi"]


def test_sparse_policy_masks_the_cells_a_sparse_sweep_judges():
    """The simulated cells are those ``judge.design=sparse`` judges (judging.sparse_job), wording by wording."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from promptlottery.gating.sparse_policy import simulate_sparse
    from promptlottery.judging.sparse_job import sparse_design

    rows = [[str(1 + (k + w) % 3) for w in range(5)] for k in range(30)]
    b = block(rows, [1.0] * 30)
    items = [SimpleNamespace(id=i) for i in b.items["item_id"]]
    calls, _ = simulate_sparse(b, budget=0.6, anchor="P1", seed=4)
    judged = np.zeros((30, 5), dtype=int)
    for w, v in enumerate(V):
        jc = OmegaConf.create({"design": "sparse", "budget": 0.6, "anchor": "P1", "full_share": 0.0,
                               "design_seed": 4, "variant": v})  # fmt: skip
        judged[:, w] = sparse_design(jc, SimpleNamespace(variants=V), items, "pointwise")["judged"]
    assert calls.tolist() == judged.sum(axis=1).tolist()
    assert judged[:, 0].all() and calls.mean() == pytest.approx(3.0, abs=0.4)
