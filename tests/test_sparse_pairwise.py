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
from promptlottery.modes.pairwise import ORDERS


def test_plan_cells_anchor_and_joint_probabilities_by_hand():
    pairs = [f"q{k}" for k in range(300)]
    plan = pairwise_plan(pairs, ["P1", "P2", "P3"], orders=ORDERS, budget=0.5, anchor="P1", seed=2)
    # 6 cells per pair, budget 3 per pair: the anchor's 2 cells, m = 1 of the K' = 4 others
    assert plan.variants == ("P1:12", "P1:21", "P2:12", "P2:21", "P3:12", "P3:21")
    assert plan.mask[:, :2].all() and (plan.mask[:, 2:].sum(axis=1) == 1).all()
    assert plan.prob[0, 2] == pytest.approx(1 / 4)
    both, four = pair_probabilities(plan, ["P1", "P2", "P3"])
    # n = 1 exactly: both orders of P2 never (E[n(n-1)] = 0); both of the anchor always
    assert both[0].tolist() == [1.0, 0.0, 0.0] and four[0, 0, 1] == 0.0
    # m = 2.5 of K' = 4: n = 2 or 3 w.p. 1/2; P(both of P2) = E[n(n-1)] / 12 = (2 + 6) / 2 / 12 = 1/3;
    # P(all four of P2, P3) = E[n(n-1)(n-2)(n-3)] / 24 = 0
    plan = pairwise_plan(pairs, ["P1", "P2", "P3"], orders=ORDERS, budget=0.75, anchor="P1", seed=2)
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
    plan = pairwise_plan([f"q{k}" for k in range(40)], ["P1", "P2", "P3", "P4"], orders=ORDERS, budget=1.0)
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
        pairwise_plan(["a"], ["P1", "P2"], orders=ORDERS, budget=1.0, anchor="P9")


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
    plan = pairwise_plan(items, variants, orders=ORDERS, budget=0.5, full_share=0.25, anchor="P1")
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
    # LLMBar Natural: one pair per instruction, so the pairs are resampled one by one
    assert set(est["resampled"]) == {"pairs"}
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


# --------------------------------------------------------------------------- the cluster bootstrap


def test_cluster_weights_by_hand():
    """Clusters [a, a, b, c, c]: a resample draws 3 clusters with replacement, so within a cluster the
    weights are equal, the three clusters' draw counts sum to 3, and the counts are those of the plain
    bootstrap's draws of 3 units (the clusters, in order of first appearance). A pair without an id is
    its own cluster; without a cluster of two pairs the weights are the pairs' own, unchanged."""
    from promptlottery.analysis.budget.pairwise.simulation import pair_weights
    from promptlottery.analysis.budget.simulation import bootstrap_weights
    from promptlottery.metrics.bootstrap import resample_indices
    from promptlottery.metrics.cluster_bootstrap import cluster_codes, cluster_weights

    w = cluster_weights(["a", "a", "b", "c", "c"], 50, seed=3)
    assert w.shape == (50, 5)
    assert (w[:, 0] == w[:, 1]).all() and (w[:, 3] == w[:, 4]).all()
    per_cluster = w[:, [0, 2, 3]]
    assert (per_cluster.sum(axis=1) == 3).all()
    draws = resample_indices(3, 50, seed=3)
    assert (per_cluster == np.stack([(draws == c).sum(axis=1) for c in range(3)], axis=1)).all()
    # None and NaN: a cluster each, never merged with each other
    assert cluster_codes(["a", None, "a", float("nan")]).tolist() == [0, 1, 0, 2]
    r, how = pair_weights(["a", "a", None, "b"], 4, 20, 0)
    assert how == "clusters (cluster_id, 3 clusters)" and r.shape == (21, 4)
    assert (r[0] == 1).all() and (r[1:, 0] == r[1:, 1]).all()
    for singles in (None, ["a", "b", None, None], [None] * 4):
        r, how = pair_weights(singles, 4, 20, 0)
        assert how == "pairs" and (r == bootstrap_weights(4, 20, 0)).all()
    with pytest.raises(ValueError, match="3 cluster ids for 4 pairs"):
        pair_weights(["a", "a", "b"], 4, 20, 0)


def _judged(plan, wordings, order, values):
    """Pairs x wordings: ``values`` (per pair) where the plan judged ``order`` of the wording, else None."""
    from promptlottery.metrics.sparse_pairwise import cell

    cols = [plan.variants.index(cell(w, order)) for w in wordings]
    return np.where(plan.mask[:, cols], np.asarray(values, dtype=object)[:, None], None).astype(object)


def test_known_answers_under_the_cluster_bootstrap():
    """12 pairs in 3 clusters of 4 (and one pair without an id), half the calls with P1 as the anchor:
    the judge that always prefers the answer shown first ("1" in order 12, "2" in order 21 in the pair's
    terms) has position consistency 0 and first-position rate 1 in every resample, so [0, 0] and [1, 1];
    the oracle (the human preference in both orders) has consistency, kappa and human agreement 1."""
    from promptlottery.analysis.budget.pairwise.report import estimate_pairwise_sparse

    pairs, wordings = [f"q{k:02d}" for k in range(13)], ["P1", "P2", "P3"]
    clusters = [f"c{k // 4}" for k in range(12)] + [None]
    plan = pairwise_plan(pairs, wordings, orders=ORDERS, budget=0.5, full_share=0.25, anchor="P1")
    human = ["1", "2"] * 6 + ["1"]
    judges = {
        "always_first": ((["1"] * 13, ["2"] * 13), {"position_consistency": 0.0, "first_position_rate": 1.0}),
        "oracle": (
            (human, human),
            {"position_consistency": 1.0, "pairwise_kappa": 1.0, "human_agreement": 1.0},
        ),
    }
    for (v12, v21), known in judges.values():
        est = estimate_pairwise_sparse(
            _judged(plan, wordings, "12", v12), _judged(plan, wordings, "21", v21), plan, wordings,
            n_resamples=200, level=0.95, seed=0, human=human, clusters=clusters,
        )  # fmt: skip
        assert set(est["resampled"]) == {"clusters (cluster_id, 4 clusters)"}
        overall = est[est["wording"] == ""].set_index("statistic")
        for stat, value in known.items():
            row = overall.loc[stat]
            assert (row["estimate"], row["lo"], row["hi"]) == pytest.approx((value,) * 3), stat


def test_clusters_with_opposite_outcomes_widen_the_interval():
    """8 pairs x 2 wordings, all judged: the 4 pairs of cluster a have the same verdict in both orders,
    the 4 of cluster b not, so position consistency is 1/2. Drawing the 2 clusters, a resample is
    (a, a) -> 1, (b, b) -> 0 or mixed -> 1/2, with chances 1/4, 1/4, 1/2: the 95% percentile interval is
    [0, 1]. Drawing the 8 pairs one by one, 0 needs all 8 from b (1/256 < 2.5%), so the interval is
    inside (0, 1): the cluster interval is the wider one. The simulator's full-grid interval too."""
    from promptlottery.analysis.budget.pairwise.report import estimate_pairwise_sparse
    from promptlottery.analysis.budget.pairwise.simulation import simulate_pairwise_budgets

    pairs, wordings = [f"q{k}" for k in range(8)], ["P1", "P2"]
    clusters = ["a"] * 4 + ["b"] * 4
    first = np.full((8, 2), "1", dtype=object)
    second = np.array([["1", "1"]] * 4 + [["2", "2"]] * 4, dtype=object)
    plan = pairwise_plan(pairs, wordings, orders=ORDERS, budget=1.0)
    bounds = {}
    for cl in (clusters, None):
        est = estimate_pairwise_sparse(first, second, plan, wordings, n_resamples=1000, level=0.95, seed=0,
                                       clusters=cl)  # fmt: skip
        row = est[(est["statistic"] == "position_consistency") & (est["wording"] == "")].iloc[0]
        assert row["estimate"] == 0.5
        bounds[row["resampled"]] = (row["lo"], row["hi"])
    assert bounds["clusters (cluster_id, 2 clusters)"] == (0.0, 1.0)
    lo, hi = bounds["pairs"]
    assert 0.0 < lo < 0.5 < hi < 1.0
    sim = {}
    for cl in (clusters, None):
        t = simulate_pairwise_budgets(
            first, second, [None] * 8, [None] * 8, [None] * 8, pairs=pairs, wordings=wordings, reference="P1",
            budgets=[1.0], designs=["items"], n_sim=2, n_resamples=1000, clusters=cl, orders=ORDERS,
        )  # fmt: skip
        row = t.set_index("statistic").loc["position_consistency"]
        sim[row["resampled"]] = (row["full_lo"], row["full_hi"])
    assert sim["clusters (cluster_id, 2 clusters)"] == (0.0, 1.0)
    assert 0.0 < sim["pairs"][0] < 0.5 < sim["pairs"][1] < 1.0


def test_a_clustered_pairwise_grid_through_the_budget_stage(tmp_path):
    """MT-Bench's ranking pairs, 2 questions x 7 models against gpt-3.5-turbo (a question's pairs share
    its cluster_id), the judge that always prefers the answer shown first: the sparse estimates (the
    plan is over the group's 5 wordings) and the simulator on a full grid of 3 wordings resample the 2
    clusters, and say so, and the known answers hold: position consistency [0, 0], first-position rate
    [1, 1], every Bradley-Terry strength 0 and no rank change between wordings [0, 0]."""
    import pandas as pd

    from promptlottery.stages import run_stage
    from tests.conftest import compose

    base = ["backbone=fake", "backbone.backend.behaviour=always_first", "+experiment=mt_bench_ranking_pairwise",
            "dataset.limit=2", "stage=judge"]  # fmt: skip
    sparse = ["judge.design=sparse", "judge.budget=0.5", "judge.full_share=0.25", "judge.anchor=P1"]
    for sweep, extra, variants in (
        ("sparse", sparse, ["P1", "P2", "P3", "P4", "P5"]),
        ("full", [], ["P1", "P2", "P3"]),
    ):
        for n, v in enumerate(variants):
            cfg = compose([*base, *extra, f"judge.variant={v}"], tmp_path=tmp_path)
            assert run_stage(cfg, tmp_path / sweep / f"{n}_{v}")["status"] == "ok"
        cfg = compose(["+analysis=budget", f"analysis.runs={tmp_path / sweep}/*", "analysis.n_resamples=30",
                       "analysis.n_sim=2", "analysis.budgets=[0.5]", "analysis.confidences=[0.9]"],
                      tmp_path=tmp_path)  # fmt: skip
        assert run_stage(cfg, tmp_path / f"budget_{sweep}")["status"] == "ok"
    how = "clusters (cluster_id, 2 clusters)"
    est = pd.read_csv(tmp_path / "budget_sparse" / "tables" / "sparse_pairwise_estimates.csv",
                      keep_default_na=False)  # fmt: skip
    assert set(est["n_pairs"]) == {14} and set(est["resampled"]) == {how}
    overall = est[est["wording"] == ""].set_index("statistic")
    for stat, value in {"position_consistency": 0.0, "first_position_rate": 1.0}.items():
        row = overall.loc[stat]
        assert (float(row["estimate"]), float(row["lo"]), float(row["hi"])) == pytest.approx((value,) * 3)
    assert how in (tmp_path / "budget_sparse" / "budget.md").read_text()
    # every two-order verdict is a tie: every Bradley-Terry strength 0, no rank changes between wordings;
    # the 7 models are ranked, the baseline gpt-3.5-turbo (in every game) is not
    bt = est[est["statistic"] == "bradley_terry"]
    assert len(bt) == 7 * 5 and "gpt-3.5-turbo" not in set(bt["system"])
    values = bt[["estimate", "lo", "hi"]].replace("", np.nan).astype(float).to_numpy()
    assert (values[np.isfinite(values)] == 0.0).all() and np.isfinite(values[bt["wording"] == "P1"]).all()
    row = overall.loc["bt_rank_change_share"]
    assert (float(row["estimate"]), float(row["lo"]), float(row["hi"])) == (0.0, 0.0, 0.0)
    fam = pd.read_csv(tmp_path / "budget_full" / "tables" / "budget_pairwise_families.csv")
    assert set(fam["resampled"]) == {how}
    by = fam.set_index(["design", "statistic"])
    for design in ("items", "spread", "anchor"):
        assert by.loc[(design, "position_consistency"), "mean_estimate"] == 0.0
        assert by.loc[(design, "first_position_rate"), "coverage"] == 1.0
        assert by.loc[(design, "bt_rank_change_share"), "mean_estimate"] == 0.0
        assert by.loc[(design, "bradley_terry"), "full"] == 0.0
    assert how in (tmp_path / "budget_full" / "budget.md").read_text()
