"""The pairwise sparse design (metrics/sparse_pairwise.py): orders as cells, the joint inclusion
probabilities, and the pairwise section's estimators with inverse-probability weights. Every expected
value is computed by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from promptlottery.metrics import fleiss_kappa
from promptlottery.metrics.sparse_pairwise import (
    ipw_pairwise_kappa,
    ipw_position_consistency,
    pair_probabilities,
    pairwise_plan,
)


def test_plan_cells_anchor_and_joint_probabilities_by_hand():
    pairs = [f"q{k}" for k in range(300)]
    plan = pairwise_plan(pairs, ["P1", "P2", "P3"], budget=0.5, anchor="P1", seed=2)
    # 6 cells per pair, budget 3 per pair: the anchor's 2 cells, m = 1 of the K' = 4 others
    assert plan.variants == ("P1:12", "P1:21", "P2:12", "P2:21", "P3:12", "P3:21")
    assert plan.mask[:, :2].all() and (plan.mask[:, 2:].sum(axis=1) == 1).all()
    assert plan.prob[0, 2] == pytest.approx(1 / 4)
    both, four = pair_probabilities(plan, ["P1", "P2", "P3"])
    # n = 1 exactly: both orders of P2 never (E[n(n-1)] = 0); both of the anchor always
    assert both[0].tolist() == [1.0, 0.0, 0.0] and four[0, 0, 1] == 0.0
    # m = 2.5 of K' = 4: n = 2 or 3 w.p. 1/2; P(both of P2) = E[n(n-1)] / 12 = (2 + 6) / 2 / 12 = 1/3;
    # P(all four of P2, P3) = E[n(n-1)(n-2)(n-3)] / 24 = 0
    plan = pairwise_plan(pairs, ["P1", "P2", "P3"], budget=0.75, anchor="P1", seed=2)
    both, four = pair_probabilities(plan, ["P1", "P2", "P3"])
    assert both[0, 1] == pytest.approx(1 / 3) and four[0, 1, 2] == 0.0
    # P(both of P1 and both of P2): the anchor's are certain, so P(both of P2) again
    assert four[0, 0, 1] == pytest.approx(1 / 3)
    # and the design judges both orders of P2 on about a third of the pairs
    assert np.mean(plan.mask[:, 2] & plan.mask[:, 3]) == pytest.approx(1 / 3, abs=0.08)


def test_position_consistency_weights_each_wording_by_its_two_orders():
    # pair 0: A consistent (P both = 1), B inconsistent (P both = 1/4, weight 4)
    # pair 1: A inconsistent (weight 1), B one order only (not counted)
    # overall: (1 + 0 + 0) / (1 + 4 + 1) = 1/6; per wording: A (1 + 0) / 2 = 1/2, B 0 / 4 = 0
    first = [["1", "1"], ["2", "tie"]]
    second = [["1", "2"], ["1", None]]
    both = np.array([[1.0, 0.25], [1.0, 0.25]])
    assert ipw_position_consistency(first, second, both) == pytest.approx(1 / 6)
    assert ipw_position_consistency(first, second, both, per_wording=True).tolist() == pytest.approx(
        [0.5, 0.0]
    )


def test_pairwise_kappa_by_hand():
    # two-order verdicts: pair 0: A (1,1) -> 1, B (1,1) -> 1; pair 1: A (1,2) -> inconsistent = tie, B (2,2) -> 2
    # P(both of A) = 1, of B = 1/2, of all four = 1/2: rating pairs (A, B) weigh 2 each, pair 0 agrees:
    # P = 2 / 4 = 1/2; label weights: 1 -> 1 + 2 = 3, tie -> 1, 2 -> 2 (of 6): Pe = (9 + 1 + 4) / 36 = 7/18
    # kappa = (1/2 - 7/18) / (1 - 7/18) = (2/18) / (11/18) = 2/11
    first = [["1", "1"], ["1", "2"]]
    second = [["1", "1"], ["2", "2"]]
    both = np.array([[1.0, 0.5], [1.0, 0.5]])
    four = np.array([[[1.0, 0.5], [0.5, 1.0]]] * 2)
    assert ipw_pairwise_kappa(first, second, both, four) == pytest.approx(2 / 11)


def test_on_a_full_plan_they_are_the_plain_definitions():
    rng = np.random.default_rng(3)
    first = rng.choice(["1", "2", "tie"], (40, 4)).astype(object)
    second = rng.choice(["1", "2", "tie"], (40, 4)).astype(object)
    plan = pairwise_plan([f"q{k}" for k in range(40)], ["P1", "P2", "P3", "P4"], budget=1.0)
    both, four = pair_probabilities(plan, ["P1", "P2", "P3", "P4"])
    assert (both == 1).all() and (four[:, 0, 1] == 1).all()
    assert ipw_position_consistency(first, second, both) == pytest.approx(np.mean(first == second))
    two_order = np.where(first == second, first, "tie")
    codes = np.vectorize({"1": 1.0, "2": 2.0, "tie": 3.0}.get)(two_order)
    assert ipw_pairwise_kappa(first, second, both, four) == pytest.approx(fleiss_kappa(codes), abs=1e-12)


def test_a_bad_verdict_or_anchor_is_refused():
    with pytest.raises(ValueError, match="pairwise verdict"):
        ipw_position_consistency([["A"]], [["1"]], np.ones((1, 1)))
    with pytest.raises(ValueError, match="anchor"):
        pairwise_plan(["a"], ["P1", "P2"], budget=1.0, anchor="P9")


@pytest.mark.parametrize("behaviour", ["hash", "always_first", "oracle"])
def test_a_pairwise_sparse_sweep_end_to_end_on_the_fake_backend(tmp_path, behaviour):
    """judge.design=sparse with a pairwise judge: every job judges exactly its wording's planned (pair,
    order) cells; +analysis=budget rebuilds the plan, checks the cells and estimates the pairwise measures;
    the lottery report refuses the sparse grid. Known answers: the judge that always prefers the answer
    shown first says "1" in order 12 and "2" in order 21 (in the pair's terms) on every pair: position
    consistency 0 and first-position rate 1 exactly, intervals too; the oracle gives the human preference in
    both orders under every wording: position consistency 1, the kappa across wordings 1 and every judged
    pair's two-order verdict the human one (human agreement 1, per wording too)."""
    import pandas as pd

    from promptlottery.errors import UserError
    from promptlottery.stages import run_stage
    from tests.conftest import compose

    base = ["backbone=fake", f"backbone.backend.behaviour={behaviour}", "+experiment=llmbar_natural_pairwise",
            "dataset.limit=16", "stage=judge"]  # fmt: skip
    design = ["judge.design=sparse", "judge.budget=0.5", "judge.full_share=0.25", "judge.anchor=P1"]
    variants = ["P1", "P2", "P3", "P4", "P5"]
    for n, v in enumerate(variants):
        cfg = compose([*base, *design, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / "sweep" / f"{n}_{v}")["status"] == "ok"
    rows = pd.concat(
        pd.read_parquet(tmp_path / "sweep" / f"{n}_{v}" / "judgments.parquet") for n, v in enumerate(variants)
    )
    items = sorted(rows["item_id"].astype(str).unique())
    plan = pairwise_plan(items, variants, budget=0.5, full_share=0.25, anchor="P1")
    judged = {
        (str(i), f"{v}:{o}") for i, v, o in zip(rows["item_id"], rows["variant"], rows["order"], strict=True)
    }
    assert judged == {(i, c) for i, c, _ in plan.cells()} and len(rows) == plan.n_calls
    assert len(items) == 16 and plan.n_calls == pytest.approx(0.5 * 16 * 10, abs=16)
    cfg = compose(["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.n_resamples=30"],
                  tmp_path=tmp_path)  # fmt: skip
    assert run_stage(cfg, tmp_path / "budget")["status"] == "ok"
    est = pd.read_csv(tmp_path / "budget" / "tables" / "sparse_pairwise_estimates.csv", keep_default_na=False)
    overall = est[est["wording"] == ""].set_index("statistic")
    assert {"position_consistency", "pairwise_kappa", "first_position_rate", "human_agreement"} <= set(
        overall.index
    )
    assert 0 <= float(overall.loc["position_consistency", "estimate"]) <= 1
    assert set(est.loc[est["wording"] != "", "wording"]) == set(variants)
    known = {
        "always_first": {"position_consistency": 0.0, "first_position_rate": 1.0},
        "oracle": {"position_consistency": 1.0, "pairwise_kappa": 1.0, "human_agreement": 1.0},
    }
    for stat, value in known.get(behaviour, {}).items():
        row = overall.loc[stat]
        assert (float(row["estimate"]), float(row["lo"]), float(row["hi"])) == pytest.approx((value,) * 3)
    if behaviour == "oracle":
        per = est[(est["statistic"] == "human_agreement") & (est["wording"] != "")]
        assert len(per) == len(variants) and (per["estimate"] == 1.0).all()
    lottery = compose(["+analysis=lottery", f"analysis.runs={tmp_path / 'sweep'}/*"], tmp_path=tmp_path)
    with pytest.raises(UserError, match="sparse design"):
        run_stage(lottery, tmp_path / "lottery")


@pytest.mark.faults
def test_bad_pairwise_sparse_options_are_one_line(tmp_path):
    from tests.test_user_errors import one_line, run

    base = ["+experiment=llmbar_natural_pairwise", "dataset.limit=3", "stage=judge", "judge.design=sparse"]
    one_line(
        run(tmp_path, *base, "judge.budget=0.5", "judge.position_swap=false"), "judge.position_swap=true"
    )
    one_line(run(tmp_path, *base, "judge.budget=0.5", "judge.anchor=P9"), "judge.design=sparse", "'P9'")
