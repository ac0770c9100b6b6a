"""Sparse designs and their estimators (metrics/sparse_plans.py, metrics/sparse.py), the budget simulator and adaptive stopping
(analysis/budget/simulation.py, the ``budget`` stage). Every expected value is computed by hand in the comments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from promptlottery.analysis.budget.simulation import beta_confidence, full_statistics, simulate_adaptive
from promptlottery.metrics import fleiss_kappa, krippendorff_alpha
from promptlottery.metrics.sparse import (
    alpha_observed,
    changed_share,
    ht_system_tau,
    ipw_fleiss_kappa,
    mean_cohen_observed,
)
from promptlottery.metrics.sparse_plans import SparsePlan, sparse_plan
from tests.conftest import compose
from tests.test_analysis_fixtures import write_sweep

NAN = math.nan


def _plan(mask, prob, pair) -> SparsePlan:
    mask, prob, pair = np.asarray(mask, bool), np.asarray(prob, float), np.asarray(pair, float)
    n, k = mask.shape
    return SparsePlan(tuple(map(str, range(n))), tuple("ABC"[:k]), mask, prob, pair, None, 0)


def test_ipw_fleiss_weights_pairs_and_cells_by_their_inclusion_probability():
    # wordings A (anchor, prob 1), x, y (prob 1/2); pairs (A, x) = (A, y) = 1/2, (x, y) = 1/4
    # item 0: A=1, x=1; item 1: A=1, x=2, y=2
    # pairs: item 0 (A,x) agree, weight 2; item 1 (A,x) and (A,y) disagree, weight 2 each, (x,y) agree, weight 4
    # P = (2 + 4) / (2 + 2 + 2 + 4) = 0.6; label weights: 1 -> 1 + 2 + 1 = 4, 2 -> 2 + 2 = 4: Pe = 0.5
    # kappa = (0.6 - 0.5) / 0.5 = 0.2
    prob = [[1, 0.5, 0.5]] * 2
    pair = [[[1, 0.5, 0.5], [0.5, 0.5, 0.25], [0.5, 0.25, 0.5]]] * 2
    plan = _plan([[1, 1, 0], [1, 1, 1]], prob, pair)
    assert ipw_fleiss_kappa([[1, 1, NAN], [1, 2, 2]], plan) == pytest.approx(0.2)
    # unweighted it would be P = 2/4, shares 3/5, 2/5: Pe = 0.52, kappa = -0.0417 (the weights matter)


def test_ipw_fleiss_and_alpha_are_the_plain_definitions_on_a_full_grid():
    rng = np.random.default_rng(4)
    labels = rng.integers(1, 4, (25, 5)).astype(float)
    full = sparse_plan([f"i{k}" for k in range(25)], list("abcde"), budget=1.0)
    assert ipw_fleiss_kappa(labels, full) == pytest.approx(fleiss_kappa(labels), abs=1e-12)
    assert alpha_observed(labels) == pytest.approx(krippendorff_alpha(labels), abs=1e-12)


def test_alpha_over_the_judged_cells_by_hand():
    # pairable values: {1,1}, {2,2,2}, {3,3}, {1,2}; disagreeing coincidences only in the last: 2
    # n_1 = 3, n_2 = 4, n_3 = 2, n = 9; alpha = 1 - (n - 1) * 2 / (81 - 9 - 16 - 4) = 1 - 16/52
    labels = [[1, 1, NAN], [2, 2, 2], [NAN, 3, 3], [1, 2, NAN]]
    assert alpha_observed(labels) == pytest.approx(1 - 16 / 52)


def test_mean_cohen_over_the_pairs_judged_together():
    # (0,1) on items 0,1,3: all agree, marginals 1/3, 2/3 -> kappa 1
    # (0,2) on items 1,2,3: po 2/3, pe 4/9 -> 0.4; (1,2) on items 1,3: po 1/2, pe 1/2 -> 0
    labels = [[1, 1, NAN], [2, 2, 1], [1, NAN, 1], [2, 2, 2]]
    assert mean_cohen_observed(labels) == pytest.approx((1 + 0.4 + 0) / 3)


def test_changed_share_calibrates_agreeing_partial_items_on_the_full_ones():
    # full items: [1,1,1] (unchanged; 3 agreeing 2-subsets) and [1,2,1] (changed; 1 agreeing 2-subset)
    # q(2) = 1 / 4; item [3,3,-] counts 1/4, item [2,1,-] is changed: (1 + 1 + 0.25) / 4
    labels = [[1, 1, 1], [1, 2, 1], [3, 3, NAN], [2, 1, NAN]]
    assert changed_share(labels) == pytest.approx(2.25 / 4)
    assert changed_share([[1, 1, 1], [1, 2, 1], [3, 3, 3]]) == pytest.approx(1 / 3)
    with pytest.warns(Warning, match="no fully judged item to calibrate"):
        assert math.isnan(changed_share([[1, 1, NAN], [2, NAN, 2]]))


def test_system_tau_from_the_judged_items():
    # means under x: s1 1.5, s2 3.5, s3 5.5; under y: s1 5 (item 1 alone), s2 3.5, s3 5.5
    # pairs (s1,s2) discordant, (s1,s3) and (s2,s3) concordant: tau = (2 - 1) / 3
    scores = [[1, NAN], [2, 5], [3, 3], [4, 4], [5, 6], [6, 5]]
    mask = np.isfinite(np.array(scores))
    plan = _plan(mask, np.ones((6, 2)), np.ones((6, 2, 2)))
    assert ht_system_tau(scores, ["s1", "s1", "s2", "s2", "s3", "s3"], plan) == pytest.approx(1 / 3)


def test_plan_probabilities_nesting_and_anchor():
    items = [f"i{k}" for k in range(2000)]
    wordings = ["P1", "P2", "P3", "P4", "P5"]
    small = sparse_plan(items, wordings, budget=0.4, anchor="P1", seed=7)
    large = sparse_plan(items, wordings, budget=0.7, anchor="P1", seed=7)
    assert small.mask[:, 0].all()
    assert not (small.mask & ~large.mask).any()  # a larger budget keeps every cell of a smaller one
    # 0.4 x 5 = 2 calls per item: the anchor and m = 1 other of 4 -> prob 1/4, E[n(n-1)] = 0: pairs 0
    assert small.prob[0, 1:] == pytest.approx([0.25] * 4)
    assert small.pair_prob[0, 1, 2] == 0 and small.pair_prob[0, 0, 3] == pytest.approx(0.25)
    assert small.share == pytest.approx(0.4)
    # 0.7 x 5 = 3.5: m = 2.5 of 4 -> prob 0.625; n in {2, 3} half each: E[n(n-1)] = (2 + 6) / 2 = 4 -> 4/12
    assert large.prob[0, 1] == pytest.approx(0.625)
    assert large.pair_prob[0, 1, 2] == pytest.approx(1 / 3)
    assert abs(large.share - 0.7) < 0.01
    assert sparse_plan(items, wordings, budget=0.4, anchor="P1", seed=7).mask.tolist() == small.mask.tolist()
    with pytest.raises(ValueError, match="less than"):
        sparse_plan(items, wordings, budget=0.1, anchor="P1")


def test_full_share_items_are_judged_under_every_wording():
    items = [f"i{k}" for k in range(1000)]
    plan = sparse_plan(items, ["a", "b", "c", "d"], budget=0.5, full_share=0.2, seed=1)
    full = plan.mask.all(axis=1)
    assert abs(full.mean() - 0.2) < 0.04
    assert (plan.prob[full] == 1).all()
    # the rest: (0.5 * 4 - 0.2 * 4) / 0.8 = 1.5 calls per item of 4 wordings -> prob 0.375
    assert plan.prob[~full][0] == pytest.approx([0.375] * 4)
    assert abs(plan.share - 0.5) < 0.02


def test_beta_criterion_and_adaptive_stopping_by_hand():
    assert beta_confidence(3, 0) == pytest.approx(1 - 0.5**4)
    assert beta_confidence(2, 1) == pytest.approx(11 / 16)  # P(Bin(4, 1/2) >= 3) = 5/16 below 0.5
    same = np.ones((4, 5))
    # five equal votes: the 3-of-5 rule stops at the 3rd call; Beta(4,1) = 0.9375 >= 0.9 at the 3rd,
    # 0.95 needs Beta(5,1) = 0.96875: the 4th
    assert simulate_adaptive(same, rule="cluster_3_of_5", n_sim=5)["mean_calls"] == 3
    assert simulate_adaptive(same, rule="beta", confidence=0.9, n_sim=5)["mean_calls"] == 3
    rec = simulate_adaptive(same, rule="beta", confidence=0.95, n_sim=5)
    assert rec["mean_calls"] == 4 and rec["saving"] == pytest.approx(0.2) and rec["recovered"] == 1.0


def test_full_statistics_are_the_lottery_definitions():
    labels = np.array([[1, 1, 1], [2, 2, 1], [2, 2, 2], [1, 2, 1]], float)
    stats = full_statistics(labels, labels, np.array(["a", "b", "a", "b"], object))
    assert stats["fleiss"] == pytest.approx(1 / 3)  # P = 2/3, Pe = 1/2
    assert stats["changed"] == pytest.approx(0.5)
    # system means: a = items 0, 2: (1.5, 1.5, 1.5); b = items 1, 3: (1.5, 2, 1). Under wording 0 the two
    # systems tie (tau-b undefined: the pairs with it are left out); wordings 1, 2: a < b, then a > b: -1
    assert stats["tau"] == pytest.approx(-1.0)


def test_budget_stage_end_to_end(tmp_path):
    from promptlottery.stages import run_stage

    sweep = write_sweep(tmp_path / "grid")
    cfg = compose(
        ["+analysis=budget", f"analysis.runs={sweep}/*", "analysis.n_sim=6", "analysis.n_resamples=20",
         "analysis.budgets=[0.5,1.0]", "analysis.min_items=4"],
        tmp_path=tmp_path,
    )  # fmt: skip
    out = tmp_path / "budget"
    rec = run_stage(cfg, out)
    assert rec["status"] == "ok"
    report = (out / "budget.md").read_text()
    assert "## Sparse designs" in report and "## Adaptive stopping" in report
    assert (out / "figures" / "budget.png").stat().st_size > 0
    metrics = json.loads((out / "results.json").read_text())["metrics"]
    # at a budget of 1.0 every design is the full grid: every estimate equals the full value
    import pandas as pd

    table = pd.read_csv(out / "tables" / "budget.csv")
    whole = table[(table["budget"] == 1.0) & (table["design"] == "items")]
    assert np.allclose(whole["mean_estimate"], whole["full"], equal_nan=True)
    assert (whole["rmse"].fillna(0) == 0).all()
    assert any(k.endswith("/within_full_ci") for k in metrics)


def test_budget_options_are_checked():
    from promptlottery.analysis.budget.report import BudgetOptions
    from promptlottery.errors import ConfigError

    with pytest.raises(ConfigError, match="analysis.budgets"):
        BudgetOptions.from_dict({"budgets": [0.3, 1.5]})
    with pytest.raises(ConfigError, match="analysis.designs=.spreed.: must be one of items, spread, anchor"):
        BudgetOptions.from_dict({"designs": ["spreed"]})
    with pytest.raises(ConfigError, match=r"unknown analysis \(\+analysis=budget\) option"):
        BudgetOptions.from_dict({"n_sims": 3})


def test_sparse_sweep_end_to_end_on_the_fake_backend(tmp_path):
    """judge.design=sparse: every job judges its wording's planned cells; +analysis=budget rebuilds the
    plan, checks every planned cell, and estimates; the lottery report refuses the sparse grid."""
    import pandas as pd

    from promptlottery.errors import UserError
    from promptlottery.stages import run_stage

    design = ["judge.design=sparse", "judge.budget=0.5", "judge.full_share=0.25", "judge.design_seed=3"]
    fields = [
        "dataset=table", "dataset.path=examples/own_judge/qa_answers.jsonl", "dataset.fields.id=id",
        "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.response=answer",
        "dataset.fields.system=system", "dataset.fields.human=rating", "dataset.human_range=[1,5]",
    ]  # fmt: skip
    base = ["+experiment=own_judge", "backbone=fake", "judge.group_file=examples/own_judge/correctness.yaml"]
    variants = ["P1", "P2", "P3", "P4", "P5"]
    for n, v in enumerate(variants):
        cfg = compose([*base, *fields, *design, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / "sweep" / f"{n}_{v}")["status"] == "ok"
    rows = pd.concat(
        pd.read_parquet(tmp_path / "sweep" / f"{n}_{v}" / "judgments.parquet") for n, v in enumerate(variants)
    )
    items = sorted(pd.read_json("examples/own_judge/qa_answers.jsonl", lines=True)["id"].astype(str))
    plan = sparse_plan(items, variants, budget=0.5, full_share=0.25, seed=3)
    judged = {(str(i), v) for i, v in zip(rows["item_id"], rows["variant"], strict=True)}
    assert judged == {(i, v) for i, v, _ in plan.cells()}  # exactly the planned cells, each once
    assert len(rows) == plan.n_calls
    out = tmp_path / "budget"
    cfg = compose(
        ["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.n_resamples=50"],
        tmp_path=tmp_path,
    )
    assert run_stage(cfg, out)["status"] == "ok"
    est = pd.read_csv(out / "tables" / "sparse_estimates.csv").set_index("statistic")
    assert est.loc["fleiss", "lo"] <= est.loc["fleiss", "estimate"] <= est.loc["fleiss", "hi"]
    assert est["calls"].iloc[0] == plan.n_calls
    lottery = compose(["+analysis=lottery", f"analysis.runs={tmp_path / 'sweep'}/*"], tmp_path=tmp_path)
    with pytest.raises(UserError, match="sparse design"):
        run_stage(lottery, tmp_path / "lottery")


def test_the_design_options_at_their_defaults_leave_an_earlier_jobs_hash():
    """A job dir judged before judge.design existed is resumed by the same job now (not "another
    config"); a sparse job is another config."""
    from promptlottery.tracking.jobdir import config_hash

    before = {"judge": {"variant": "P1", "family": "x"}, "n_samples": 1}
    now = {"judge": {**before["judge"], "design": "full", "budget": 1.0, "anchor": None, "full_share": 0.0,
                     "design_seed": 0, "identical_pairs": "warn"}, "n_samples": 1}  # fmt: skip
    assert config_hash(now) == config_hash(before)
    sparse = {"judge": {**now["judge"], "design": "sparse", "budget": 0.5}, "n_samples": 1}
    assert config_hash(sparse) != config_hash(before)


def test_sparse_estimates_of_the_oracle_judge_are_its_known_answers(tmp_path):
    """The oracle answers the human label under every wording: the full grid's Fleiss' kappa and alpha are
    1, no verdict changes and every judged cell agrees with the human label on the scale, so every sparse
    estimate must be exactly that (its interval too), the human agreement of every wording as well."""
    import pandas as pd

    from promptlottery.stages import run_stage

    fields = [
        "dataset=table", "dataset.path=examples/own_judge/qa_answers.jsonl", "dataset.fields.id=id",
        "dataset.fields.context=question", "dataset.fields.reference=gold", "dataset.fields.response=answer",
        "dataset.fields.system=system", "dataset.fields.human=rating", "dataset.human_range=[1,5]",
        "backbone=fake", "backbone.backend.behaviour=oracle", "judge.group_file=examples/own_judge/correctness.yaml",
        "judge.design=sparse", "judge.budget=0.5", "judge.full_share=0.25",
    ]  # fmt: skip
    per_names = ["P1", "P2", "P3", "P4", "P5"]
    for n, v in enumerate(per_names):
        cfg = compose(["+experiment=own_judge", *fields, f"judge.variant={v}"], tmp_path=tmp_path)
        assert run_stage(cfg, tmp_path / "sweep" / f"{n}_{v}")["status"] == "ok"
    cfg = compose(
        ["+analysis=budget", f"analysis.runs={tmp_path / 'sweep'}/*", "analysis.n_resamples=30",
         "analysis.human_range=[1,5]", "analysis.model_ranks=[0]", "analysis.model_embedding=none",
         "analysis.model_resamples=5"],
        tmp_path=tmp_path,
    )  # fmt: skip
    assert run_stage(cfg, tmp_path / "budget")["status"] == "ok"
    # the wording model on the sparse cells: every judged cell agrees, so each wording's observed mean and
    # their quantiles are exactly 1, and the model's (unjudged cells predicted from all-agreeing ones) near 1
    import json

    (model,) = json.loads((tmp_path / "budget" / "tables" / "wording_model_sparse.json").read_text())
    assert (
        model["rank"] == 0
        and 0 < model["calls_share"] < 1
        and sorted(model["per_wording"]) == sorted(per_names)
    )
    assert model["observed_quantiles"] == [1.0] * 5 and set(model["observed_per_wording"].values()) == {1.0}
    assert all(q > 0.95 for q in model["quantiles"].values()) and all(lo > 0.9 for lo in model["lo"])
    assert "PromptEval-style model on this sparse grid" in (tmp_path / "budget" / "budget.md").read_text()
    est = pd.read_csv(tmp_path / "budget" / "tables" / "sparse_estimates.csv").set_index("statistic")
    per = [f"human_agreement/{v}" for v in ("P1", "P2", "P3", "P4", "P5")]
    for stat, known in (("fleiss", 1.0), ("alpha", 1.0), ("changed", 0.0), ("human_agreement", 1.0),
                        *((p, 1.0) for p in per)):  # fmt: skip
        assert est.loc[stat, "estimate"] == pytest.approx(known)
        assert est.loc[stat, "lo"] == pytest.approx(known) and est.loc[stat, "hi"] == pytest.approx(known)


def test_the_lottery_report_links_the_budget_figure_of_the_same_runs(tmp_path):
    """+analysis=budget records the files it read; the lottery report of exactly those files links its
    budget.md and figure (a path that resolves from the report's dir), and one of other files does not."""
    from promptlottery.stages import run_stage

    sweep = write_sweep(tmp_path / "grid")
    budget = ["+analysis=budget", "analysis.n_sim=4", "analysis.n_resamples=10", "analysis.budgets=[0.5]",
              "analysis.min_items=4"]  # fmt: skip
    assert (
        run_stage(compose([*budget, f"analysis.runs={sweep}/*"], tmp_path=tmp_path), tmp_path / "b")["status"]
        == "ok"
    )
    lottery = ["+analysis=lottery", "analysis.embeddings=none", "analysis.n_resamples=20", "analysis.n_permutations=20",
               "analysis.plots=false", f"analysis.budget_runs={tmp_path}/b*"]  # fmt: skip
    out = tmp_path / "reports" / "same"
    assert (
        run_stage(compose([*lottery, f"analysis.runs={sweep}/*"], tmp_path=tmp_path), out)["status"] == "ok"
    )
    report = (out / "report.md").read_text()
    assert "## At a fraction of the calls" in report
    assert (
        out / "../../b/figures/budget.png"
    ).resolve().is_file() and "](../../b/figures/budget.png)" in report
    other = tmp_path / "reports" / "other"
    first = sorted(sweep.glob("*"))[:2]  # a grid of other files: no link
    runs = f"analysis.runs=[{','.join(map(str, first))}]"
    assert (
        run_stage(compose([*lottery, runs, "analysis.allow_partial=true"], tmp_path=tmp_path), other)[
            "status"
        ]
        == "ok"
    )
    assert "At a fraction of the calls" not in (other / "report.md").read_text()


def test_the_item_subsample_ceiling_by_hand():
    """f = 0.3, level 0.95: z = 1.959964, sqrt(0.3 / 0.7) = 0.654654, z * that = 1.283098,
    Phi(1.283098) = 0.900271, so 2 * 0.900271 - 1 = 0.800542; f = 0.5: 2 Phi(1.959964) - 1 = 0.95.
    90%: (1.644854 / 1.959964)^2 = 0.704301, f = 0.704301 / 1.704301 = 0.413249."""
    from promptlottery.metrics.subsample_ceiling import item_subsample_share_needed, item_subsample_within_ci

    assert item_subsample_within_ci(0.3) == pytest.approx(0.800542, abs=1e-5)
    assert item_subsample_within_ci(0.5) == pytest.approx(0.95, abs=1e-9)
    assert item_subsample_within_ci(1.0) == 1.0
    assert item_subsample_share_needed(0.9) == pytest.approx(0.413249, abs=1e-5)
    assert item_subsample_within_ci(item_subsample_share_needed(0.9)) == pytest.approx(0.9, abs=1e-9)
    with pytest.raises(ValueError, match="share=0"):
        item_subsample_within_ci(0)


def test_changed_counts_agreeing_subsets_without_enumerating_them():
    """A full item [1, 1, 2, 1]: its agreeing s-subsets are those inside label 1's three wordings (C(3, s))
    or label 2's one (C(1, s)): s = 1: 3 + 1 = 4, s = 2: 3, s = 3: 1. With 30 wordings (2^30 subsets) the
    counts come at once: [1] x 20 + [2] x 10, s = 2: C(20, 2) + C(10, 2) = 190 + 45 = 235."""
    from promptlottery.metrics.sparse import changed_parts

    _, _, _, agree, changed = changed_parts([[1, 1, 2, 1], [3, 3, 3, 3]])
    assert agree[0, 1:4].tolist() == [4, 3, 1] and changed[0, 1:4].tolist() == [4, 3, 1]
    assert agree[1, 1:4].tolist() == [4, 6, 4] and changed[1].sum() == 0  # unchanged: no changed subsets
    _, _, _, agree, _ = changed_parts([[1] * 20 + [2] * 10])
    assert agree[0, 2] == 235 and agree[0, 20] == 1 and agree[0, 11] == math.comb(20, 11) + 0
