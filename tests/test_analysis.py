"""Analyses 1-8 of the prompt lottery on small fixtures whose answers were computed by hand.

The fixture is described in tests/test_analysis_fixtures.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.agreement import (
    agreement_by_task_type,
    agreement_collapse,
    variant_agreement,
)
from promptlottery.analysis.lottery.agreement_measures import agreement_measures
from promptlottery.analysis.lottery.ensembles import (
    aggregation_vs_humans,
    convergence_analysis,
    ensemble_designs,
)
from promptlottery.analysis.lottery.human_correlation import best_variant_counts, variant_human_correlation
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.ranks import _pair_stats, _system_means, rank_reversals
from promptlottery.analysis.lottery.similarity import similarity_vs_stability, wording_dimensions
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from promptlottery.judging.table import AnalysisError, add_verdicts
from promptlottery.metrics import kendall_tau, mean_pairwise_cohen_kappa, resample_indices
from promptlottery.prompts.groups import WORDING_DIMENSIONS
from tests.test_analysis_fixtures import config_a, config_b, config_c, default_judgments, judgments

R = 60  # bootstrap resamples: enough for the interval machinery, fast
OPTS = LotteryOptions(n_resamples=R)
A = "stsb/semantic_alignment/G12/similarity/bb1"
B = "topical_chat_usr/dialogue_quality/G1/engaging/bb1"
C = "stsb/semantic_alignment/G12/similarity/bb2"


@pytest.fixture(scope="module")
def grid():
    return JudgmentGrid.from_frame(load_judgments(default_judgments()))


@pytest.fixture(scope="module")
def df(grid):
    return grid.judgments


def _row(table, **where):
    m = np.ones(len(table), dtype=bool)
    for k, v in where.items():
        m &= (table[k] == v).to_numpy()
    assert m.sum() == 1, where
    return table[m].iloc[0]


# --------------------------------------------------------------------------- verdicts


def test_verdicts_argmax_weighted_and_sampled():
    rows = judgments(config_a())
    rows.loc[0, "weighted_score"] = 2.5  # P1 i1: halfway -> the lower label
    rows.loc[1, "weighted_score"] = 2.6
    d = add_verdicts(load_judgments(rows), "weighted")
    p1 = d[(d["variant"] == "P1") & (d["sample_index"] == 0) & (d["temperature"] < 0.001)].set_index(
        "item_id"
    )
    assert p1.loc["i1", "label"] == "2" and p1.loc["i2", "label"] == "3"
    assert p1.loc["i1", "cont"] == 2.5  # continuous measures use the unrounded score
    a = add_verdicts(load_judgments(rows), "argmax")
    assert (
        a.set_index(["variant", "item_id", "temperature", "sample_index"]).loc[("P1", "i1", 1e-5, 0), "label"]
        == "1"
    )
    sampled = a[a["temperature"] == 0.7]
    assert set(sampled["label"]) == {"5"} and set(sampled["verdict_source"]) == {"sampled_parsed"}
    same = add_verdicts(load_judgments(rows), "argmax", sampled="same")
    assert set(same.loc[same["temperature"] == 0.7, "label"]) == {"1", "2"}
    with pytest.raises(AnalysisError, match="verdict"):
        add_verdicts(rows, "mode")


def test_load_dedupes_the_shared_p1_sample(df):
    a = df[df["config_id"] == A]
    # 3 variants x 4 items + 2 more samples at T=1e-5 (sample 0 is the paraphrase row) + 3 x 4 at T=0.7
    assert len(a) == 12 + 8 + 12


# --------------------------------------------------------------------------- 1. agreement collapse


def test_agreement_collapse_hand_computed(grid):
    t = agreement_collapse(grid, OPTS)
    para = _row(t, config_id=A, setting="paraphrases")
    # pairs: P1-P2 identical (kappa 1, overlap 1); P1-P3 and P2-P3 agree on 2 of 4 with chance 1/2 (kappa 0)
    assert para["overlap"] == pytest.approx(2 / 3)
    assert para["mean_kappa"] == pytest.approx(1 / 3)
    # Fleiss: P-bar = (1 + 1/3 + 1 + 1/3) / 4 = 2/3, P_e = 1/2 -> 1/3
    assert para["fleiss_kappa"] == pytest.approx(1 / 3)
    # Krippendorff: D_o = 4/12, D_e = 2 * 6 * 6 / (12 * 11) -> 1 - 11/18 = 7/18 (two values: interval = nominal)
    assert para["alpha_nominal"] == pytest.approx(7 / 18)
    assert para["alpha_interval"] == pytest.approx(7 / 18)
    assert para["n_items"] == 4 and para["judges"] == "P1,P2,P3"
    assert para["mean_kappa_lo"] <= para["mean_kappa"] <= para["mean_kappa_hi"]
    assert para["band"] == "below usable"
    greedy = _row(t, config_id=A, setting="fixed T=1e-05")
    assert greedy["overlap"] == 1.0 and greedy["mean_kappa"] == pytest.approx(1.0)
    assert greedy["band"] == "robust" and greedy["judges"] == "P1 x3 samples"
    sampled = _row(t, config_id=A, setting="fixed T=0.7")  # every sampled answer is "5"
    assert sampled["overlap"] == 1.0
    assert np.isnan(sampled["mean_kappa"]) and np.isnan(sampled["fleiss_kappa"])
    assert "labels collapsed: every verdict is '5'" in sampled["notes"]
    assert sampled["band"] == "n/a"
    collapsed = _row(t, config_id=C, setting="paraphrases")
    assert np.isnan(collapsed["mean_kappa"]) and "collapsed" in collapsed["notes"]
    assert set(t.loc[t["config_id"] == C, "setting"]) == {"paraphrases"}  # no baseline for C


def test_agreement_binary_config(grid):
    t = agreement_collapse(grid, OPTS)
    b = _row(t, config_id=B, setting="paraphrases")
    # P1-P2 agree on t1, t4 (2/6); P1-P3 on t1, t5, t6 (3/6); P2-P3 on t1, t2, t3 (3/6) -> 8/18
    assert b["overlap"] == pytest.approx(8 / 18)
    # P1-P2: p_o 1/3, p_e 1/2 -> -1/3; P1-P3 and P2-P3: p_o 1/2, p_e 1/2 -> 0
    assert b["mean_kappa"] == pytest.approx(-1 / 9)


def test_mean_kappa_batch_equals_metrics():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 4, size=(12, 4)).astype(float)
    idx = resample_indices(12, 40, seed=1)
    fast = mean_pairwise_cohen_kappa.batch(idx, x, labels=[1.0, 2.0, 3.0, 4.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = np.array([mean_pairwise_cohen_kappa(x[i], labels=[1.0, 2.0, 3.0, 4.0, 5.0]) for i in idx])
    assert np.allclose(fast, ref, equal_nan=True, atol=1e-12)


def test_agreement_measures_too_small():
    res = agreement_measures(np.array([[1.0, 2.0]]), [1, 2, 3], n_resamples=R)
    assert all(np.isnan(e.estimate) and "need >= 2 complete items" in e.note for e in res.values())


# --------------------------------------------------------------------------- 2. task types


def test_by_task_type_means_and_mapping(grid):
    t, d = agreement_collapse(grid, OPTS, return_distributions=True)
    g = agreement_by_task_type(t, d)
    likert = _row(g, grouping="task type", group="likert")
    assert likert["n_configs"] == 2  # A and C
    assert likert["mean_kappa_n"] == 1  # C is collapsed: left out of the kappa mean
    assert likert["mean_kappa"] == pytest.approx(1 / 3)
    assert likert["overlap"] == pytest.approx((2 / 3 + 1.0) / 2)
    subj = _row(g, grouping="judge family type", group="subjective")  # dialogue_quality
    obj = _row(g, grouping="judge family type", group="objective")  # semantic_alignment
    assert subj["n_configs"] == 1 and obj["n_configs"] == 2
    assert np.isfinite(likert["mean_kappa_lo"]) and likert["mean_kappa_lo"] <= likert["mean_kappa_hi"]
    assert likert["overlap_minus_kappa"] == pytest.approx(likert["overlap"] - likert["mean_kappa"])
    # §4.2 "Binary tasks had higher raw overlap ... but lower chance-corrected reliability", Fleiss over every
    # configuration where defined: likert = A only (C: every verdict '5', undefined). A by hand: items
    # (1,1,1) P=1, (1,1,2) P=(4+1-3)/6=1/3, (2,2,2) 1, (2,2,1) 1/3 -> P-bar 2/3; p(1)=p(2)=1/2, P_e 1/2;
    # kappa = (2/3 - 1/2) / (1/2) = 1/3. Binary = B: -1/8 (tests/test_lottery_paper_rows.py)
    assert likert["fleiss_kappa_all"] == pytest.approx(1 / 3) and likert["fleiss_kappa_all_n"] == 1
    binary = _row(g, grouping="task type", group="binary")
    assert binary["fleiss_kappa_all"] == pytest.approx(-1 / 8)


# --------------------------------------------------------------------------- 3. no prompt wins


def test_variant_correlations_hand_computed(grid):
    c = variant_human_correlation(grid, OPTS)
    p1 = _row(c, config_id=A, variant="P1")
    # x = 1 1 2 2 vs h = 1 2 3 4: r = 2 / sqrt(1 * 5); tau-b = 4 / sqrt(4 * 6)
    assert p1["pearson"] == pytest.approx(2 / np.sqrt(5))
    assert p1["kendall"] == pytest.approx(4 / np.sqrt(24))
    assert np.isnan(p1["williams_p"])  # the reference itself
    p3 = _row(c, config_id=A, variant="P3")
    assert p3["pearson"] == pytest.approx(0.0, abs=1e-12) and p3["kendall"] == pytest.approx(0.0, abs=1e-12)
    assert np.isfinite(p3["williams_p"])
    constant = _row(c, config_id=C, variant="P2")
    assert np.isnan(constant["pearson"]) and "no variance" in constant["notes"]
    counts = best_variant_counts(c).set_index("variant")
    # A: P1 and P2 tie for best; B: see below; C: undefined everywhere -> not counted
    assert counts.loc["P1", "n_configs"] == 2
    assert counts.loc["P2", "best"] >= 1 and counts.loc["P1", "best"] >= 1
    assert counts.loc["P1", "better_than_ref"] is None


# --------------------------------------------------------------------------- 4-5. similarity and wording


def test_similarity_vs_stability_hand_computed():
    agreement = pd.DataFrame(
        {
            "config_id": ["c"] * 4,
            "prompt_group": ["G"] * 4,
            "variant": ["P1", "P2", "P3", "P4"],
            "kappa_with_others": [0.5, 0.1, 0.2, 0.3],
            "overlap_with_others": [0.5, 0.6, 0.6, 0.6],
        }
    )
    sims = pd.DataFrame(
        {
            "prompt_group": ["G"] * 4,
            "variant": ["P1", "P2", "P3", "P4"],
            "similarity_to_ref": [1.0, 0.9, 0.8, 0.7],
        }
    )
    summary, points = similarity_vs_stability(agreement, sims)
    k = _row(summary, agreement="kappa")
    assert k["r"] == pytest.approx(-1.0) and k["n_points"] == 3  # P1 left out
    o = _row(summary, agreement="overlap")
    assert np.isnan(o["r"]) and "no variance" in o["note"]
    assert list(points["variant"]) == ["P2", "P3", "P4"]
    few, _ = similarity_vs_stability(agreement.iloc[:2], sims)
    assert "need >= 3" in few.iloc[0]["note"]


def test_wording_dimensions_eta_squared_and_null():
    agreement = pd.DataFrame(
        {
            "config_id": ["c"] * 4,
            "prompt_group": ["G"] * 4,
            "variant": ["P1", "P2", "P3", "P4"],
            "kappa_with_others": [0.1, 0.3, 0.5, 0.7],
        }
    )
    tags = pd.DataFrame(
        {
            "prompt_group": ["G"] * 4,
            "variant": ["P1", "P2", "P3", "P4"],
            **{d: ["x"] * 4 for d in WORDING_DIMENSIONS},
        }
    )
    tags["syntax"] = ["a", "a", "b", "b"]  # means 0.2 / 0.6 around 0.4: SS_b = 0.16, SS_t = 0.20
    tags["length"] = ["a", "b", "b", "a"]  # means 0.4 / 0.4: eta^2 = 0
    out = wording_dimensions(agreement, tags, n_permutations=600, seed=0).set_index("dimension")
    assert out.loc["syntax", "eta_squared"] == pytest.approx(0.8)
    # 2 of the 6 equally likely splits reach 0.8: p ~ 1/3
    assert out.loc["syntax", "p"] == pytest.approx(1 / 3, abs=0.06)
    assert out.loc["length", "eta_squared"] == pytest.approx(0.0, abs=1e-12)
    assert out.loc["length", "p"] == pytest.approx(1.0)
    assert "one level only" in out.loc["role_framing", "note"]


def test_variant_agreement(grid):
    va = variant_agreement(grid).set_index(["config_id", "variant"])
    assert va.loc[(A, "P1"), "kappa_with_others"] == pytest.approx(0.5)  # kappa 1 with P2, 0 with P3
    assert va.loc[(A, "P3"), "kappa_with_others"] == pytest.approx(0.0)
    assert va.loc[(A, "P3"), "overlap_with_others"] == pytest.approx(0.5)
    assert np.isnan(va.loc[(C, "P1"), "kappa_with_others"])


# --------------------------------------------------------------------------- 6. rank reversals


def test_rank_reversals_hand_computed(grid):
    r = rank_reversals(grid, OPTS)
    s = _row(r["summary"], config_id=A)
    # P1 = P2 (tau 1, no flip, no rank change); vs P3: tau 0, 1 of 6 pairs flips (B-D), 2 of 4 ranks change
    assert s["kendall_tau"] == pytest.approx(1 / 3)
    assert s["flip_share"] == pytest.approx(1 / 9)
    assert s["rank_change_share"] == pytest.approx(1 / 3)
    assert s["n_systems"] == 4
    systems = r["systems"][r["systems"]["config_id"] == A].set_index("system")
    assert systems.loc["A", ["best_rank", "worst_rank"]].tolist() == [3, 3]
    assert systems.loc["B", ["best_rank", "worst_rank"]].tolist() == [1, 3]
    assert systems.loc["D", ["best_rank", "worst_rank"]].tolist() == [1, 3]
    assert systems.loc["C", ["best_rank", "worst_rank"]].tolist() == [1, 1]
    assert "fewer than 2 evaluated systems" in _row(r["summary"], config_id=B)["note"]
    traj = r["trajectories"]
    assert len(traj[traj["config_id"] == A]) == 4 * 3


def test_rank_tau_batch_equals_metrics():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 4, size=(20, 3)).astype(float)
    x[rng.random((20, 3)) < 0.1] = np.nan
    codes = rng.integers(0, 5, size=20)
    idx = resample_indices(20, 50, seed=2)
    means = _system_means(x, codes, 5, idx)
    for a, b, tau, _, _ in _pair_stats(means):
        for k in range(len(idx)):
            ok = np.isfinite(means[k, :, a]) & np.isfinite(means[k, :, b])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = kendall_tau(means[k, ok, a], means[k, ok, b]) if ok.sum() >= 2 else np.nan
            assert (np.isnan(ref) and np.isnan(tau[k])) or ref == pytest.approx(tau[k], abs=1e-12)


# --------------------------------------------------------------------------- 7. aggregation


def test_aggregation_vs_humans_hand_computed(grid):
    ag = aggregation_vs_humans(grid, OPTS)
    # plurality (2 of 3 judges) decides every item here: = ties_to_P1 = median = 1 1 2 2 (= P1): r = 2 / sqrt(5);
    # mean = 1, 4/3, 2, 5/3: r = 0.8
    for m in ("P1", "P1 on plurality's items", "plurality", "plurality_ties_to_p1", "median"):
        assert _row(ag, config_id=A, method=m)["pearson"] == pytest.approx(2 / np.sqrt(5))
    assert _row(ag, config_id=A, method="mean")["pearson"] == pytest.approx(0.8)
    assert _row(ag, config_id=A, method="plurality")["diff_vs_ref"] == pytest.approx(0.0)
    b = _row(ag, config_id=B, method="plurality")  # yes no yes no yes no = the human labels
    assert b["pearson"] == pytest.approx(1.0)


def test_ensemble_designs_equal_numbers(grid):
    # two backbones: the plurality of two judges is the first judge, so no design is compared
    two = _row(ensemble_designs(grid, OPTS), task="stsb/semantic_alignment/G12/similarity")
    assert two["note"] == "n/a: needs >= 3 backbones (have 3 variants, 2 backbones)"
    # a third backbone with A's labels: k = 3 judges per design on the same 4 items
    three = JudgmentGrid.from_frame(
        load_judgments(judgments(config_a(), config_c(), config_a("bb3", baselines=False)))
    )
    e = ensemble_designs(three, OPTS)
    stsb = e[e["task"] == "stsb/semantic_alignment/G12/similarity"].set_index("design")
    designs = {"inter-prompt (bb1)", "inter-prompt (bb2)", "inter-prompt (bb3)", "inter-model", "hybrid"}
    assert set(stsb.index) == designs
    assert (stsb["k"] == 3).all() and (stsb["n_items"] == 4).all()
    assert stsb.loc["inter-model", "judges"] == "P1@bb1 P1@bb2 P1@bb3"
    assert stsb.loc["hybrid", "judges"] == "P1@bb1 P2@bb2 P3@bb3"
    assert "k = 3 < 5" in stsb.loc["hybrid", "note"]
    b = _row(ensemble_designs(grid, OPTS), task="topical_chat_usr/dialogue_quality/G1/engaging")
    assert b["note"].startswith("n/a: needs >= 3 backbones")


# --------------------------------------------------------------------------- 8. convergence


def test_convergence_hand_computed(grid):
    summary, items = convergence_analysis(grid, OPTS)
    b = _row(summary, group=B)
    # 3 judges: the cluster needs 2 votes. Online, a label has 2 votes after the 2nd call in rows 1
    # (yes yes) and 4 (no no), after the 3rd in the others; P1 gives the cluster's label in rows 1, 4, 5, 6
    assert b["converged_by_3"] == pytest.approx(1.0) and b["never_converged"] == pytest.approx(0.0)
    assert b["cluster_share"] == pytest.approx(1.0)
    assert np.isnan(b["converged_by_5"]) and "fewer than 5 judges" in b["note"]
    assert b["p1_match"] == pytest.approx(4 / 6) and b["p1_match_ties_to_p1"] == pytest.approx(4 / 6)
    its = items[items["config_id"] == B].set_index("item_id")
    assert its["converged_at"].tolist() == [2.0, 3.0, 3.0, 2.0, 3.0, 3.0]
    assert its["plurality"].tolist() == ["yes", "no", "yes", "no", "yes", "no"]
    assert its["cluster"].tolist() == ["yes", "no", "yes", "no", "yes", "no"]
    assert set(its["judge_order"]) == {"P1,P2,P3"}
    binary = _row(summary, group="pooled: binary")
    assert binary["p1_match"] == pytest.approx(4 / 6) and binary["n_items"] == 6
    # all: A (4 of 4 match) + B (4 of 6) + C (4 of 4, every label 5)
    assert _row(summary, group="pooled: all")["p1_match"] == pytest.approx(12 / 14)


def test_degenerate_judgments_still_analyse(tmp_path):
    """Parse failures, a variant with no verdict at all, no human labels, a lone variant: n/a, no crash."""
    from promptlottery.analysis.lottery.analyse import analyse
    from promptlottery.analysis.lottery.render import render_report

    a = judgments(config_a(baselines=False))
    a.loc[a["variant"] == "P2", ["argmax_label", "parsed_label", "weighted_score"]] = (
        None  # no verdict at all
    )
    a.loc[
        (a["variant"] == "P3") & (a["item_id"] == "i2"), ["argmax_label", "parsed_label", "weighted_score"]
    ] = None
    a["human"] = np.nan
    lone = judgments(config_b())
    lone = lone[lone["variant"] == "P1"]  # one variant only
    d = JudgmentGrid.from_frame(load_judgments(pd.concat([a, lone], ignore_index=True)))
    opts = LotteryOptions.from_dict(
        {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "plots": False}
    )
    res = analyse(d, opts, encode=lambda texts: np.eye(len(texts), 8))
    t = res["tables"]
    para = _row(t["agreement_collapse"], config_id=A, setting="paraphrases")
    assert para["n_items"] == 0 and "need >= 2 complete items" in para["notes"]
    lone_row = _row(t["agreement_collapse"], config_id=B, setting="paraphrases")
    assert "need >= 2 complete items and >= 2 judges" in lone_row["notes"]
    corr = t["variant_human_correlation"]
    corr = corr[corr["config_id"] == A]
    assert corr["pearson"].isna().all() and corr["notes"].str.contains("human label").all()
    text = render_report(res, d, opts, tmp_path, {}, [])
    assert "## 8. Convergence" in text and "n/a" in text


def test_headlines_use_squad_v2_when_present():
    from promptlottery.analysis.lottery.analyse import analyse

    squad = judgments(config_a(baselines=False))
    squad["dataset"] = "squad_v2"
    d = JudgmentGrid.from_frame(load_judgments(pd.concat([squad, judgments(config_b())], ignore_index=True)))
    opts = LotteryOptions.from_dict(
        {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "embeddings": "none"}
    )
    h = analyse(d, opts)["tables"]["headlines"].set_index("key")
    assert "SQuAD v2" in h.loc["rank_tau", "finding"]
    assert h.loc["rank_tau", "ours"] == pytest.approx(1 / 3)  # configuration A's mean tau (see above)
    assert h.loc["rank_changes", "ours"] == pytest.approx(1 / 3)
    assert h.loc["fixed_kappa", "note"].startswith("n/a: no fixed-prompt baseline")
    assert h.loc["similarity_r", "note"].startswith("n/a")
