"""The lottery report's paper rows (issue 12), each on a toy whose answer is worked out by hand
from the paper's words, never from the code's output.

The toy ``FIVE``: 4 items, judges P1-P5 (one backbone, Likert 1-5), humans 1, 2, 3, 4.

    item  P1 P2 P3 P4 P5   cluster (>= 3 of 5)  online call   P1 = cluster   ties_to_P1 plurality
    i1    2  2  2  1  1    2                    3             yes            2 (P1 matches)
    i2    1  1  2  2  3    none (2-2-1)         never         no             1 (tie 1/2, P1 says 1)
    i3    4  4  3  4  1    4                    4             yes            4
    i4    3  1  1  1  2    1                    4             no             1 (P1 does not match)

Paper's P1 match 2/4; ties_to_P1 3/4; cluster share 3/4; converged by the 3rd call 1/4, at the
4th or 5th 2/4, never 1/4 (sum 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.agreement import agreement_collapse, paper_band
from promptlottery.analysis.lottery.analyse import analyse
from promptlottery.analysis.lottery.ensembles import aggregation_vs_humans, convergence_analysis
from promptlottery.analysis.lottery.headline_rows import BY_CONSTRUCTION
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from tests.test_analysis_fixtures import _row, config_a, config_b, config_c, judgments

FIVE = {
    "P1": ["2", "1", "4", "3"],
    "P2": ["2", "1", "4", "1"],
    "P3": ["2", "2", "3", "1"],
    "P4": ["1", "2", "4", "1"],
    "P5": ["1", "3", "1", "2"],
}
CID = "stsb/semantic_alignment/G12/similarity/bb1"
OPTS = {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "plots": False, "embeddings": "none"}


def _five():
    return JudgmentGrid.from_frame(load_judgments(judgments(config_a(labels=FIVE, baselines=False))))


def test_p1_match_and_online_convergence_on_the_toy():
    summary, items = convergence_analysis(_five(), LotteryOptions(n_resamples=20))
    s = summary[summary["group"] == CID].iloc[0]
    assert s["p1_match"] == pytest.approx(2 / 4)
    assert s["p1_match_ties_to_p1"] == pytest.approx(3 / 4)
    assert s["cluster_share"] == pytest.approx(3 / 4)
    assert (s["converged_by_3"], s["converged_by_5"], s["never_converged"]) == pytest.approx(
        (0.25, 0.5, 0.25)
    )
    it = items.set_index("item_id")
    assert it["converged_at"].tolist()[:1] == [3.0] and it["converged_at"].tolist()[2:] == [4.0, 4.0]
    assert np.isnan(it.loc["i2", "converged_at"])


def test_every_headline_is_the_papers_definition_on_our_population_or_ours():
    """The report computes every row on our runs: no row may claim the paper's population, and the
    objective / subjective split (the summary lists no family under it) is ours."""
    from promptlottery.analysis.lottery.headlines import HEADLINES, ON_OURS

    assert ON_OURS == "paper's definition on our population"
    for h in HEADLINES:
        assert h.definition.startswith((ON_OURS, "ours")), (h.key, h.definition)
    by_key = {h.key: h for h in HEADLINES}
    for k in ("objective_kappa", "subjective_kappa"):
        assert by_key[k].definition.startswith("ours: which judge families count as objective"), k
        assert "paper's split" not in by_key[k].definition


def test_headline_metrics_carry_the_paper_and_the_tie_broken_figures():
    h = analyse(_five(), LotteryOptions.from_dict(OPTS))["tables"]["headlines"].set_index("key")
    assert h.loc["p1_match_all", "ours"] == pytest.approx(2 / 4)
    assert h.loc["p1_match_all_ties_to_p1", "ours"] == pytest.approx(3 / 4)
    assert h.loc["cluster_share", "ours"] == pytest.approx(3 / 4)
    shares = [h.loc[k, "ours"] for k in ("converged_by_3", "converged_by_5", "never_converged")]
    assert shares == pytest.approx([0.25, 0.5, 0.25]) and sum(shares) == pytest.approx(1.0)
    assert h.loc["p1_match_all", "definition"].startswith("paper")
    assert h.loc["p1_match_all_ties_to_p1", "definition"].startswith("ours")
    assert h["definition"].str.match(r"^(paper|ours)").all()  # every row says whose definition it is
    assert h.loc["p1_match_binary", "note"] == "n/a: no binary configuration"


def test_fleiss_is_the_headline_with_pairwise_cohen_beside_it():
    # binary toy (tests/test_analysis_fixtures.py, config B), 3 raters, 6 items:
    # t1 yyy: P_i = (9 - 3) / 6 = 1; t2..t6 have a 2-1 split: P_i = (4 + 1 - 3) / 6 = 1/3
    # P-bar = (1 + 5/3) / 6 = 4/9; yes 10 of 18 -> P_e = (5/9)^2 + (4/9)^2 = 41/81
    # Fleiss = (36/81 - 41/81) / (40/81) = -1/8
    # Cohen: P1-P2 agree on 2 of 6 (p_e 1/2) -> -1/3; P1-P3 and P2-P3 on 3 of 6 -> 0; mean -1/9
    d = JudgmentGrid.from_frame(load_judgments(judgments(config_b())))
    h = analyse(d, LotteryOptions.from_dict(OPTS))["tables"]["headlines"].set_index("key")
    assert h.loc["paraphrase_kappa", "ours"] == pytest.approx(-1 / 8)
    assert h.loc["paraphrase_kappa_cohen", "ours"] == pytest.approx(-1 / 9)
    assert "§3.2" in h.loc["paraphrase_kappa", "definition"]
    assert h.loc["paraphrase_kappa", "paper"] == "about 0.24"


def test_greedy_repeats_agree_by_construction_and_sampled_ones_name_their_source():
    # config A's P1 repeated 3 times at T=1e-5 (identical labels) and at T=0.7 (parsed answers, all "5")
    d = JudgmentGrid.from_frame(load_judgments(judgments(config_a())))
    t = analyse(d, LotteryOptions.from_dict(OPTS))["tables"]
    h = t["headlines"].set_index("key")
    greedy = h.loc["fixed_kappa_T1e-05"]
    assert np.isnan(greedy["ours"]) and greedy["note"] == BY_CONSTRUCTION
    sampled = h.loc["fixed_kappa_T0.7"]
    assert "verdict source sampled_parsed" in sampled["note"] and "paraphrase_kappa_parsed" in sampled["note"]
    # the same-source comparison: paraphrases on parsed labels (= the argmax labels here): Fleiss 1/3
    assert h.loc["paraphrase_kappa_parsed", "ours"] == pytest.approx(1 / 3)
    assert set(t["agreement_collapse_parsed"]["verdict_source"]) == {"parsed"}


def test_aggregation_rows_name_their_items_and_plurality_differs_from_the_median():
    # Table 6 (§5): "Plurality aggregation ... Pearson correlation with human scores"; the paper's plurality (§5.2:
    # a label given by at least 3 of the 5 judges) decides i1, i3, i4 (2, 4, 1); i2 (1 1 2 2 3) has none.
    # On all 4 items, humans 1 2 3 4 (mean 2.5, deviations -1.5 -0.5 0.5 1.5, sum of squares 5):
    #   P1 2 1 4 3: deviations -0.5 -1.5 1.5 0.5 -> r = 3 / sqrt(5 x 5) = 0.6
    #   ties_to_P1 plurality 2 1 4 1 (i2: tie 1/2, P1 says 1): deviations 0 -1 2 -1 -> sum dx dy = 0 -> r = 0
    #   median 2 2 4 1 (i2: 1 1 2 2 3 -> 2): mean 2.25, sum dx dy = -0.5, sum dx^2 = 4.75 -> r = -0.5 / sqrt(23.75)
    #   mean 1.6 1.8 3.2 1.6: mean 2.05, sum dx dy = 0.7, sum dx^2 = 1.79 -> r = 0.7 / sqrt(8.95)
    #   mean_weighted: the weighted scores are the labels + 0.1 on i2 and i4 -> 1.6 1.9 3.2 1.7:
    #     mean 2.1, sum dx dy = 0.8, sum dx^2 = 1.66 -> r = 0.8 / sqrt(8.3)
    # On the decided items i1 i3 i4 (humans 1 3 4, deviations -5/3 1/3 4/3, sum of squares 42/9):
    #   plurality 2 4 1: deviations -1/3 5/3 -4/3 -> sum dx dy = -2/3, sum dx^2 = 42/9 -> r = -1/7
    #   P1 2 4 3: deviations -1 1 0 -> sum dx dy = 2, sum dx^2 = 2 -> r = 2 / sqrt(2 x 42/9) = 6 / sqrt(84)
    ag = aggregation_vs_humans(_five(), LotteryOptions(n_resamples=20)).set_index("method")
    expected = {
        "plurality": ("decided by plurality", 3, 0.75, -1 / 7),
        "P1 on plurality's items": ("decided by plurality", 3, 0.75, 6 / np.sqrt(84)),
        "P1": ("all", 4, 1.0, 0.6),
        "plurality_ties_to_p1": ("all", 4, 1.0, 0.0),
        "median": ("all", 4, 1.0, -0.5 / np.sqrt(23.75)),
        "mean": ("all", 4, 1.0, 0.7 / np.sqrt(8.95)),
        "mean_weighted": ("all", 4, 1.0, 0.8 / np.sqrt(8.3)),
    }
    assert set(ag.index) == set(expected)  # no row where two methods coincide by construction
    for method, (items, n, coverage, r) in expected.items():
        row = ag.loc[method]
        assert (row["items"], row["n"], row["coverage"]) == (items, n, pytest.approx(coverage)), method
        assert row["pearson"] == pytest.approx(r, abs=1e-12), method
    assert ag.loc["median", "pearson"] != pytest.approx(ag.loc["plurality_ties_to_p1", "pearson"])
    assert (
        ag.loc["mean_weighted", "verdict"] == "weighted score (unrounded)"
        and ag.loc["P1", "verdict"] == "argmax"
    )
    # Kendall, P1 on all items: 6 pairs, (i1, i2) and (i3, i4) discordant -> (4 - 2) / 6
    assert ag.loc["P1", "kendall"] == pytest.approx(1 / 3)
    # plurality 2, 4, 1 against 1, 3, 4: pairs (i1,i3) +, (i1,i4) -, (i3,i4) - -> -1/3
    assert ag.loc["plurality", "kendall"] == pytest.approx(-1 / 3)


def test_judges_are_the_five_variants_in_order():
    # the toy's judge order is P1..P5 (the convergence table records it)
    _, items = convergence_analysis(_five(), LotteryOptions(n_resamples=20))
    assert set(items["judge_order"]) == {"P1,P2,P3,P4,P5"}
    assert isinstance(items, pd.DataFrame)


# --------------------------------------------------------------------------- issue 24: the rows' populations


def _binary(labels: dict[str, list[str]], backbone: str = "bb1") -> list[dict]:
    """A binary configuration (topical_chat_usr / G1), one row per variant x item."""
    return [
        _row(
            "topical_chat_usr",
            "dialogue_quality",
            "G1",
            "binary_yes_no",
            backbone,
            "engaging",
            f"t{k + 1}",
            None,
            float(lab == "yes"),
            v,
            lab,
        )  # fmt: skip
        for v, labs in labels.items()
        for k, lab in enumerate(labs)
    ]


# t1: yes yes yes no no -> cluster "yes" at the 3rd call; t2: yes no yes no no -> "no" at the 5th
BIN5 = {
    "P1": ["yes", "yes"],
    "P2": ["yes", "no"],
    "P3": ["yes", "yes"],
    "P4": ["no", "no"],
    "P5": ["no", "no"],
}


def test_convergence_rows_compare_the_non_binary_pool_and_name_all_scales_as_ours():
    # §5.2: 37.68% / 21.05% / 41.27% are "for non-binary tasks". Non-binary pool = FIVE only:
    # by 3rd 1/4, 4th-5th 2/4, never 1/4, cluster 3/4; adaptive cost (§5.2.1) 3 x 1/4 + 5 x (2/4 + 1/4) = 4.5.
    # All scales pooled (ours) = FIVE + BIN5, 6 items: by 3rd {i1, t1} 2/6, 4th-5th {i3, i4, t2} 3/6,
    # never {i2} 1/6; adaptive 3 x 2/6 + 5 x 4/6 = 13/3.
    d = JudgmentGrid.from_frame(
        load_judgments(judgments(config_a(labels=FIVE, baselines=False), _binary(BIN5)))
    )
    h = analyse(d, LotteryOptions.from_dict(OPTS))["tables"]["headlines"].set_index("key")
    got = [h.loc[k, "ours"] for k in ("converged_by_3", "converged_by_5", "never_converged", "cluster_share")]
    assert got == pytest.approx([1 / 4, 2 / 4, 1 / 4, 3 / 4])
    assert h.loc["adaptive_calls", "ours"] == pytest.approx(4.5)
    assert h.loc["adaptive_calls", "paper"] == "4.247 calls (non-binary)"
    assert h.loc["converged_by_3", "paper"] == "37.68% (non-binary)"
    got = [h.loc[f"{k}_all", "ours"] for k in ("converged_by_3", "converged_by_5", "never_converged")]
    assert got == pytest.approx([2 / 6, 3 / 6, 1 / 6])
    assert h.loc["adaptive_calls_all", "ours"] == pytest.approx(13 / 3)
    for k in ("cluster_share_all", "converged_by_3_all", "adaptive_calls_all"):
        assert h.loc[k, "definition"].startswith("ours") and h.loc[k, "paper"].startswith("(ours")


def test_kappa_means_keep_every_configuration_where_fleiss_is_defined():
    # NEAR: 5 judges x 5 binary items, 24 of 25 verdicts "yes" (96% >= 95%: collapsed for our filter).
    # Fleiss by hand: items t1-t4 all yes: P_i = (25 - 5) / 20 = 1; t5 4 yes 1 no: (16 + 1 - 5) / 20 = 0.6;
    # P-bar = 4.6 / 5 = 0.92; P_e = 0.96^2 + 0.04^2 = 0.9232; kappa = (0.92 - 0.9232) / 0.0768 = -1/24.
    # Config C (stsb, every verdict "5"): Fleiss undefined (P_e = 1), so the paper's mean is over 1 of 2;
    # the collapse-filtered mean (ours) drops both: 0 of 2.
    near = {v: ["yes"] * 5 for v in ("P1", "P2", "P3", "P4")} | {"P5": ["yes"] * 4 + ["no"]}
    d = JudgmentGrid.from_frame(load_judgments(judgments(_binary(near), config_c())))
    h = analyse(d, LotteryOptions.from_dict(OPTS))["tables"]["headlines"].set_index("key")
    assert h.loc["paraphrase_kappa", "ours"] == pytest.approx(-1 / 24)
    assert h.loc["paraphrase_kappa", "n"] == 1
    assert h.loc["paraphrase_kappa", "note"].startswith("mean over 1 of 2 configurations")
    assert "collapse-filtered (ours" in h.loc["paraphrase_kappa", "note"]
    assert np.isnan(h.loc["paraphrase_kappa_filtered", "ours"])
    assert "all 2 configurations" in h.loc["paraphrase_kappa_filtered", "note"]
    assert h.loc["paraphrase_kappa_filtered", "definition"].startswith("ours")


def test_the_fixed_prompt_rows_carry_the_papers_value_at_their_temperature():
    # §3.2: Fleiss 0.89 and Cohen 0.86 at T = 1e-5; "At T = 0.7, fixed-prompt runs had lower Fleiss' kappa = 0.39"
    h = analyse(
        JudgmentGrid.from_frame(load_judgments(judgments(config_a()))), LotteryOptions.from_dict(OPTS)
    )
    h = h["tables"]["headlines"].set_index("key")
    assert h.loc["fixed_kappa_T0.7", "paper"] == "0.39 (at T = 0.7)"
    assert h.loc["fixed_kappa_T1e-05", "paper"] == "0.89 (at T = 1e-5)"
    assert h.loc["fixed_kappa_cohen_T1e-05", "paper"] == "0.86 (at T = 1e-5)"
    assert h.loc["fixed_kappa_cohen_T0.7", "paper"].startswith("not reported at T = 0.7")


def test_cross_model_agreement_per_paraphrase_and_the_strictness_slope():
    # Appendix B / Table 12's outcome on two backbones judging config A's items (G12, Likert):
    #   P1: bb1 1 1 2 2, bb2 1 1 2 2 -> Fleiss 1
    #   P2: bb1 1 1 2 2, bb2 1 2 2 2 -> P-bar = 3/4 (item 2 split: P_i = 0); p(1) = 3/8, p(2) = 5/8,
    #       P_e = 34/64; kappa = (48/64 - 34/64) / (30/64) = 7/15
    #   P3: bb1 1 2 2 1, bb2 2 2 1 1 -> P-bar = 2/4; P_e = 1/2; kappa = 0
    # strictness (G12 tags): P1 plain = 1 step, P2 and P3 strict = 2 steps; two levels, so the OLS slope is
    # mean(strict) - mean(plain) = (7/15 + 0) / 2 - 1 = -23/30 (centring within the task moves no slope)
    from promptlottery.analysis.lottery.similarity import (
        cross_model_agreement,
        strictness_regression,
        variant_texts,
    )

    bb2 = {"P1": ["1", "1", "2", "2"], "P2": ["1", "2", "2", "2"], "P3": ["2", "2", "1", "1"]}
    d = JudgmentGrid.from_frame(
        load_judgments(judgments(config_a(baselines=False), config_a("bb2", bb2, baselines=False)))
    )
    cross = cross_model_agreement(d).set_index("variant")
    assert cross["cross_model_kappa"].tolist() == pytest.approx([1.0, 7 / 15, 0.0])
    assert (cross["n_backbones"] == 2).all() and (cross["n_items"] == 4).all()
    reg = strictness_regression(cross.reset_index(), variant_texts(["G12"])).set_index("model")
    assert reg.loc["univariate", "slope"] == pytest.approx(-23 / 30)
    assert reg.loc["univariate", "n_points"] == 3
    assert reg.loc["mt_bench", "note"].startswith("n/a")


# --------------------------------------------------------------------------- the robust / usable band


def test_the_band_is_the_papers_fleiss_kappa_with_a_strict_usable_threshold():
    # §3.2: "κ = 0.80 as the human robustness baseline and κ > 0.61 as the usability threshold", the 0.80 the
    # humans' Fleiss' κ. Two wordings, 10 binary items: P1 says yes on t1-t6, P2 on t1-t4.
    # Agreement on t1-t4 (yes) and t7-t10 (no): p_o = 8/10.
    # Cohen: p_e = 0.6 x 0.4 + 0.4 x 0.6 = 0.48 -> (0.8 - 0.48) / 0.52 = 8/13 = 0.615 (>= 0.61: ours says usable)
    # Fleiss: pooled yes 10 of 20, P_e = 1/2; P-bar = 8/10 -> (0.8 - 0.5) / 0.5 = 0.6 (below usable)
    labels = {"P1": ["yes"] * 6 + ["no"] * 4, "P2": ["yes"] * 4 + ["no"] * 6}
    rows = [
        _row(
            "topical_chat_usr",
            "dialogue_quality",
            "G1",
            "binary_yes_no",
            "bb1",
            "engaging",
            f"t{k + 1}",
            None,
            1.0,
            v,
            lab,
        )  # fmt: skip
        for v, labs in labels.items()
        for k, lab in enumerate(labs)
    ]
    t = agreement_collapse(
        JudgmentGrid.from_frame(load_judgments(judgments(rows))), LotteryOptions(n_resamples=20)
    )
    para = t[t["setting"] == "paraphrases"].iloc[0]
    assert para["mean_kappa"] == pytest.approx(8 / 13) and para["fleiss_kappa"] == pytest.approx(0.6)
    assert para["band"] == "below usable"
    assert para["band_mean_kappa"] == "usable"  # ours, under its own name
    th = {"robust": 0.80, "usable": 0.61}
    assert paper_band(0.61, th) == "below usable" and paper_band(0.6101, th) == "usable"
    assert paper_band(0.80, th) == "robust"


def test_summeval_reversals_are_measured_on_summeval_only():
    """App. E: "SQuAD v2 and SummEval exhibit reversals". Configuration A's systems (see
    tests/test_analysis.py's rank toy): P1 = P2 (no pair flips), P3 against each reverses 1 of the 6
    system pairs (B-D): the mean flip share over the 3 variant pairs is (0 + 1/6 + 1/6) / 3 = 1/9."""
    opts = LotteryOptions.from_dict(
        {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "embeddings": "none"}
    )
    summeval = judgments(config_a(baselines=False))
    summeval["dataset"] = "summeval"
    grid = JudgmentGrid.from_frame(
        load_judgments(pd.concat([summeval, judgments(config_b())], ignore_index=True))
    )
    h = analyse(grid, opts)["tables"]["headlines"].set_index("key")
    assert h.loc["summeval_reversals", "ours"] == pytest.approx(1 / 9)
    assert h.loc["summeval_reversals", "n"] == 1 and h.loc["summeval_reversals", "finding"].endswith(
        "SummEval"
    )
    # without a SummEval configuration: n/a, never the mean over the other datasets
    other = JudgmentGrid.from_frame(load_judgments(judgments(config_a(baselines=False))))
    h = analyse(other, opts)["tables"]["headlines"].set_index("key")
    assert np.isnan(h.loc["summeval_reversals", "ours"])
    assert h.loc["summeval_reversals", "note"].startswith("n/a: no SummEval configuration")


def test_repeats_vs_wordings_on_a_hand_computed_toy():
    """§6: "Section 5 gains may partly reflect repeated judging rather than prompt diversity".
    Configuration A's wordings P1-P3 (labels 1,1,1 | 1,1,2 | 2,2,2 | 2,2,1) have mean verdicts
    1, 4/3, 2, 5/3; P1 sampled 3 times at T = 0.7 (1,1,1 | 1,2,3 | 1,1,1 | 4,4,4) has means 1, 2, 1, 4.
    Humans 1, 2, 3, 4 (deviations -1.5, -0.5, 0.5, 1.5, sum of squares 5):
    wordings: deviations -1/2, -1/6, 1/2, 1/6, cross sum 4/3, squares 5/9: r = (4/3) / sqrt(25/9) = 0.8;
    repeats: deviations -1, 0, -1, 2, cross sum 4, squares 6: r = 4 / sqrt(30)."""
    from tests.test_analysis_fixtures import _row as row

    samples = {"i1": "111", "i2": "123", "i3": "111", "i4": "444"}
    rows = list(config_a(baselines=False))
    for k, (item, labs) in enumerate(samples.items()):
        for s, lab in enumerate(labs):
            rows.append(
                row("stsb", "semantic_alignment", "G12", "likert_1_5", "bb1", "similarity", item,
                    "ABCD"[k], float(k + 1), "P1", lab, temperature=0.7, sample_index=s)
            )  # fmt: skip
    opts = LotteryOptions.from_dict(
        {"runs": "unused", "n_resamples": 200, "n_permutations": 20, "embeddings": "none"}
    )
    out = analyse(JudgmentGrid.from_frame(load_judgments(pd.DataFrame(rows))), opts)["tables"]
    t = out["repeats_vs_wordings"]
    assert len(t) == 1
    r = t.iloc[0]
    assert (r["setting"], r["n_samples"], r["n_variants"], r["n"]) == ("fixed T=0.7", 3, 3, 4)
    assert r["pearson_wordings"] == pytest.approx(0.8, abs=1e-12)
    assert r["pearson_repeats"] == pytest.approx(4 / np.sqrt(30), abs=1e-12)
    assert r["diff"] == pytest.approx(0.8 - 4 / np.sqrt(30), abs=1e-12)
    assert r["diff_lo"] <= r["diff"] <= r["diff_hi"] and r["verdict"] == "argmax"
