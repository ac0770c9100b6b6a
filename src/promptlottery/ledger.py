"""The paper ledger: every table, figure and quantitative claim of both papers, with where ours lives.

One :class:`Ref` per claim, as data: the paper, its section / table / figure, the paper's words
(quoted from ``shared/papers``: the prompt-lottery paper's source-linked summary, the rubric
paper's full text), the keys of our outputs that reproduce it, and a status:

* ``paper``: our row uses the paper's definition on the paper's population (the paper's own items,
  settings or procedure, nothing measured on ours): such a row has no key; ``tests`` names the
  hand-computed test(s) of that definition;
* ``paper_on_ours``: "paper's definition on our population": the paper's definition computed on our
  items, configurations and backbones (every row with a key: a key names a report of our runs);
  ``tests`` names the hand-computed test(s), ``how`` says what our population is;
* ``ours``: our row computes it another way, ``how`` says how it differs;
* ``missing``: nothing of ours reproduces it, ``how`` says why (data, hardware or not built).

Keys name what a report produced on the test fixtures contains (``tests/test_ledger.py`` checks
each): ``headline:<key>`` (a row of the lottery report's headline table), ``table:<name>`` or
``table:<name>.<column>`` (a lottery analysis table), ``validation:<file>`` or
``validation:<file>.<column>`` (the ``validate_prompts`` stage's outputs), ``gate:<file>`` (a
table the gate stage writes), ``rubric:<table id>`` (a table of the rubric study's
``cells.csv``) and ``human:<key>`` (a row of the human baseline's ``human_summary.csv``, the
``human_analyse`` stage's output).

Other parts add or update their rows here, as data; ``python -m promptlottery.ledger`` rewrites
``docs/paper_ledger.md`` (``--check`` exits 1 when the committed file differs).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from promptlottery.atomic import atomic_write_text
from promptlottery.tracking.tables import ON_OURS

PAPER, ON_POP, OURS, MISSING = "paper", "paper_on_ours", "ours", "missing"
STATUS_TEXT = {PAPER: "paper's definition", ON_POP: ON_OURS, OURS: "ours", MISSING: "missing"}
PAPERS = {
    "lottery": "Prompt Lottery in LLM-as-a-Judge (Subasic et al., arXiv 2610.38076v1)",
    "rubric": "Quantifying the Statistical Effect of Rubric Modifications on Human-Autorater Agreement "
    "(Huynh et al., arXiv 2605.06283)",
}
KEY_KINDS = ("headline", "table", "validation", "gate", "rubric", "human")


@dataclass(frozen=True)
class Ref:
    paper: str
    where: str
    words: str
    keys: tuple[str, ...]
    status: str
    how: str = ""
    tests: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"ledger row {self.where!r}: paper must be one of {sorted(PAPERS)}")
        if self.status not in STATUS_TEXT:
            raise ValueError(f"ledger row {self.where!r}: status must be one of {sorted(STATUS_TEXT)}")
        if self.status in (PAPER, ON_POP) and not self.tests:
            raise ValueError(
                f"ledger row {self.where!r}: a paper's-definition row needs its hand-computed test"
            )
        if self.status == PAPER and self.keys:
            raise ValueError(
                f"ledger row {self.where!r}: its keys are reports of our runs, so it is the paper's "
                f"definition on our population (status {ON_POP!r}), not on the paper's"
            )
        if self.status != PAPER and not self.how:
            what = (
                "what our population is" if self.status == ON_POP else "how ours differs or why it is missing"
            )
            raise ValueError(f"ledger row {self.where!r}: say {what}")
        for k in self.keys:
            if k.partition(":")[0] not in KEY_KINDS:
                raise ValueError(f"ledger row {self.where!r}: key {k!r} must start with one of {KEY_KINDS}")


_L, _R = "lottery", "rubric"
_T = "tests/test_lottery_paper_rows.py::"
_D = "tests/test_paper_definitions.py::"
_G = "tests/test_gate_protocol.py::"
_GP = "tests/test_gate_paper.py::"
_RD = "tests/test_rubric_definitions.py::"
_H = "tests/test_human_agreement.py::"
_SPLIT = (
    "every paper_comparison row names its split (gate.split: three_way, ours and the default, test "
    "items untouched; holdout, §F.1's 80/20) and the search objective of gate.best_params"
)

#: the ledger, paper by paper in the paper's order
LEDGER: tuple[Ref, ...] = (
    # ---------------------------------------------------------------- the prompt-lottery paper
    Ref(_L, "§1", "selective aggregation achieved 86% of full robustness while reducing inference costs by 60% "
        "versus naive aggregation", ("gate:paper_comparison",), OURS,
        "the paper's policy (gate on P1, else adaptive aggregation) simulated with our gate on our judgments; "
        + _SPLIT),
    Ref(_L, "Abstract", "LLMaJ judges exhibit 6-9x larger agreement degradation under prompt rephrasings than "
        "humans", ("human:human_degradation.human_drop", "human:human_degradation.judge_drop",
                   "human:human_degradation.ratio"), OURS,
        "the human baseline (promptlottery.human, docs/human_baseline.md) computes it on a campaign of yours: "
        "drop = agreement within one wording - across wordings, ratio = judge drop / human drop (ours: the "
        "summary defines neither); the paper's user study (10 annotators, 650 data points) is not released, so "
        "its 6-9x stands beside ours (human_degradation.paper_ratio), not reproduced",
        (_H + "test_toy_degradation_ratio_matches_the_hand_computation",)),
    Ref(_L, "§3", "33 configurations across 12 datasets and six judge families, using five backbones and five "
        "prompt variants for 825 experimental conditions", ("table:configurations",), OURS,
        "the CPU study runs one configuration per judge family (5) on 4 small CPU backbones; every "
        "configuration the data allows has an experiment config"),
    Ref(_L, "§3", "The study uses near-zero temperature (T = 10^-5)", ("headline:fixed_kappa_T1e-05",), ON_POP,
        "decoding.temperature defaults to 1e-5; on a deterministic backend greedy repeats agree by construction "
        "and the row says so", (_T + "test_greedy_repeats_agree_by_construction_and_sampled_ones_name_their_source",)),
    Ref(_L, "§3.1", "their average sBERT similarity was 0.93 despite lexical overlap of 0.38 +- 0.01",
        ("validation:validation.csv.mean_sim_to_p1", "validation:validation.csv.mean_jaccard"), OURS,
        "all-MiniLM-L6-v2 cosine on templates rendered with placeholders, and token Jaccard; the summary names "
        "neither the sBERT model nor the overlap measure"),
    Ref(_L, "§3.1", "Three LLMs rated prompt similarity at 81%, 84%, and 79%, respectively",
        ("validation:validation_equivalence.csv.accepted",), OURS,
        "each judge asked whether a paraphrase asks for the same judgment as P1 (our wording; the summary "
        "prints no question), share accepted; one judge per run (validation.equivalence=true)"),
    Ref(_L, "§3.1", "human task-equivalence ratings averaged 76/100, with Cohen's kappa = 0.78 and "
        "Krippendorff's alpha = 0.81", (), MISSING, "data: the paper's human equivalence ratings are not released"),
    Ref(_L, "§3.2", "10 annotators rated 650 data points, yielding average human agreement of 0.78 Overlap, 0.71 "
        "pairwise Cohen's kappa, 0.80 Fleiss' kappa, and 0.63 Krippendorff's alpha",
        ("human:human_agreement.overlap", "human:human_agreement.cohen", "human:human_agreement.fleiss",
         "human:human_agreement.alpha"), OURS,
        "the four §3.2 measures on the annotators of a campaign of yours (promptlottery.human: every (item, "
        "wording) task rated by 3 annotators, never back-to-back), within one wording and across wordings (the "
        "split and the units are ours; the paper's setting is not split by wording); the user study's "
        "annotations are not released, so the paper's values stand beside ours",
        (_H + "test_toy_agreement_matches_the_hand_computation",)),
    Ref(_L, "§3.2", "Fixed-prompt repeated runs established Cohen's kappa = 0.86 and Fleiss' kappa = 0.89",
        ("headline:fixed_kappa_T1e-05", "headline:fixed_kappa_cohen_T1e-05"), ON_POP,
        "Fleiss' kappa and mean pairwise Cohen over every configuration where defined; on CPU the repeats differ "
        "only with repeat_source=batch (our emulation of GPU nondeterminism, named in the row)",
        ("tests/test_metrics_agreement.py::test_fleiss_kappa_worked_example",
         _T + "test_fleiss_is_the_headline_with_pairwise_cohen_beside_it")),
    Ref(_L, "§3.2", "At T = 0.7, fixed-prompt runs had lower Fleiss' kappa = 0.39", ("headline:fixed_kappa_T0.7",),
        ON_POP, "P1 sampled at T = 0.7 (n_samples) on our configurations and backbones, Fleiss over every "
        "configuration where defined", (_T + "test_the_fixed_prompt_rows_carry_the_papers_value_at_their_temperature",
                    "tests/test_metrics_agreement.py::test_fleiss_kappa_worked_example")),
    Ref(_L, "§3.2", "the paper set kappa = 0.80 as the human robustness baseline and kappa > 0.61 as the "
        "usability threshold", ("table:agreement_collapse.band",), ON_POP,
        "the band is read off the mean pairwise Cohen's kappa", ("tests/test_analysis.py::test_agreement_collapse_hand_computed",)),
    Ref(_L, "§4.1, §C.3", "Agreement falls from kappa = 0.89 with a fixed prompt to kappa = 0.24 across "
        "paraphrastic variants", ("headline:paraphrase_kappa", "table:agreement_collapse.fleiss_kappa_all"), ON_POP,
        "mean over every configuration where Fleiss' kappa is defined, n of m in the note",
        (_T + "test_kappa_means_keep_every_configuration_where_fleiss_is_defined",
         _T + "test_fleiss_is_the_headline_with_pairwise_cohen_beside_it")),
    Ref(_L, "§4.1 (ours beside it)", "kappa = 0.24 across paraphrastic variants",
        ("headline:paraphrase_kappa_filtered", "headline:paraphrase_kappa_cohen"), OURS,
        "collapse-filtered mean (configurations with >= 95% of verdicts one label left out) and mean pairwise "
        "Cohen's kappa, each with n of m"),
    Ref(_L, "§4.2", "Binary tasks had higher raw overlap than non-binary tasks, but lower chance-corrected "
        "reliability", ("table:agreement_by_task_type.overlap", "table:agreement_by_task_type.fleiss_kappa_all"), ON_POP,
        "means over configurations by task type; Fleiss over every configuration where defined", ("tests/test_analysis.py::test_by_task_type_means_and_mapping",)),
    Ref(_L, "§4.2, §C.3", "Objective tasks show greater invariance (kappa = 0.47-0.69) than subjective tasks "
        "(kappa = 0.26-0.28)", ("headline:objective_kappa", "headline:subjective_kappa"), OURS,
        "Fleiss' kappa as the paper's; which judge families count as objective is ours (the summary lists none)"),
    Ref(_L, "§4.2", "Sensitivity varied by backbone", ("table:agreement_by_task_type",), OURS,
        "means by backbone over our small CPU backbones, not the paper's five"),
    Ref(_L, "§4.3", "The similarity-stability correlation was r = -0.11 (p = 0.157)", ("headline:similarity_r",),
        OURS, "MiniLM cosine to P1 vs each variant's mean Cohen's kappa with the others (the summary names "
        "neither measure)"),
    Ref(_L, "§4.3, Table 4", "human-alignment differences were Delta r = 0.00-0.02, with only two of three "
        "comparisons significant", ("table:variant_human_correlation", "table:best_variant_counts"), OURS,
        "each variant's Pearson / Kendall with the human labels and the paired bootstrap of Kendall's tau "
        "against P1; Table 4's layout is not in the summary"),
    Ref(_L, "§4.4, Table 5", "SQuAD v2 had tau = 0.176 and 43.3% rank changes, while MTBench had 0% reversals",
        ("headline:rank_tau", "headline:rank_changes", "table:rank_summary"), OURS,
        "mean Kendall tau between the variants' system rankings and the share of systems whose rank changes; "
        "our systems are small CPU models' answers"),
    Ref(_L, "§4.4, Figure 2", "On SQuAD v2, GPT-4o ranged from 1st to 3rd and Qwen3p6-Plus from 1st to 4th "
        "across prompt variants", ("table:rank_trajectories",), MISSING,
        "data: the paper's evaluated systems' answers (GPT-4o, Qwen3p6-Plus) are not available; the "
        "trajectories figure is drawn for our systems"),
    Ref(_L, "Appendix E", "SQuAD v2 and SummEval exhibit reversals, while MTBench retains its ordering",
        ("headline:summeval_reversals", "table:rank_summary.flip_share"), OURS,
        "the share of system pairs in strictly opposite order between two variants, mean over variant pairs, on "
        "SummEval configurations only (n/a without one; the summary prints no number); our systems are "
        "SummEval's 16 summarisers on our sample of articles, judged by our backbones",
        (_T + "test_summeval_reversals_are_measured_on_summeval_only",)),
    Ref(_L, "§5, Table 6", "Plurality aggregation consistently achieves the strongest human alignment among the "
        "compared strategies (Pearson correlation with human scores)", ("table:aggregation_vs_humans.pearson",),
        ON_POP, "plurality = a label given by at least 3 of 5 judges (no verdict on a no-consensus item); "
        "plurality_ties_to_p1, median and mean beside it (on all items) are ours",
        (_T + "test_aggregation_rows_name_their_items_and_plurality_differs_from_the_median",
         "tests/test_analysis.py::test_aggregation_vs_humans_hand_computed")),
    Ref(_L, "§5, Table 6", "The comparison uses Pearson correlation with human scores across three datasets with "
        "public annotations", ("table:aggregation_vs_humans.n",), OURS,
        "every configuration with human labels in our runs (STS-B, Topical-Chat, SummEval in the CPU study), not "
        "the paper's three; plurality on the items it decides, with its coverage; every other method on all items"),
    Ref(_L, "§5.2", "The classifier was selected to maximize TNR because false negatives can corrupt evaluation "
        "quality", ("gate:training_history", "gate:classifier_metrics"), OURS,
        "the summary does not say what was selected; ours picks the best epoch by validation TNR in the paper's "
        "polarity (positive = needs aggregation, our val/tpr in the cluster; gate.select_for=paper_tnr, the "
        "default) and the threshold on validation recovery; the search objective is §F.1's under +gate=paper",
        (_GP + "test_polarity_naming_on_a_2x2_toy",)),
    Ref(_L, "§5.1, Figures 4-5", "Inter-prompt aggregation achieves stronger reliability than inter-model or "
        "hybrid aggregation", ("table:ensemble_designs",), OURS,
        "k judges per design, mean pairwise Cohen among them and the tie-broken plurality's correlation with "
        "the humans (the summary names no measure)"),
    Ref(_L, "§5.2", "The default prompt matches plurality in 94.7% of binary cases but only 44.0% overall",
        ("headline:p1_match_binary", "headline:p1_match_all"), ON_POP,
        "no cluster = no match; ties_to_P1 beside it is ours",
        (_T + "test_p1_match_and_online_convergence_on_the_toy", _D + "test_p1_matches_only_the_cluster_label")),
    Ref(_L, "§5.2", "strict plurality is reached in 58.73% of cases. For non-binary tasks, 37.68% reach plurality "
        "by the third judge, 21.05% require all five, and 41.27% never converge",
        ("headline:cluster_share", "headline:converged_by_3", "headline:converged_by_5",
         "headline:never_converged"), ON_POP, "on the non-binary pool",
        (_T + "test_convergence_rows_compare_the_non_binary_pool_and_name_all_scales_as_ours",
         _D + "test_incremental_convergence_shares_sum_to_one")),
    Ref(_L, "§5.2 (ours beside it)", "For non-binary tasks, 37.68% reach plurality by the third judge",
        ("headline:cluster_share_all", "headline:converged_by_3_all", "headline:converged_by_5_all",
         "headline:never_converged_all", "headline:adaptive_calls_all"), OURS,
        "all scales pooled (binary included)"),
    Ref(_L, "§5.2.1", "The derivation compares the gated strategy with full aggregation at 4.247 calls",
        ("headline:adaptive_calls", "gate:paper_comparison"), ON_POP,
        "3 x by-3rd + 5 x (by-5th + never), on the non-binary pool",
        (_T + "test_convergence_rows_compare_the_non_binary_pool_and_name_all_scales_as_ours",
         "tests/test_gate_paper.py::test_the_papers_call_derivation_from_its_shares")),
    Ref(_L, "§5.2", "DEBERTA-V3 achieves TPR 85.06% and TNR 69.42%", ("gate:classifier_metrics", "gate:paper_comparison"), OURS,
        "our gate on our judgments: DeBERTa-v3-large needs a GPU (gate/classifier=deberta_v3_large; the CPU "
        "runs MiniLM); the TPR / TNR rows of paper_comparison take the paper's polarity; " + _SPLIT),
    Ref(_L, "§5.2", "TNR stable at 66.22% on a held-out dataset with unseen Prometheus prompts",
        ("gate:transfer_classifier_metrics", "gate:paper_comparison"), OURS,
        "66.22% is a reference value beside our held-out row of paper_comparison (paper's polarity), measured on "
        "our held-out prompt group G15 on items the gate never saw, not on a held-out dataset with Prometheus "
        "prompts; no G15 judgments: the row says n/a", (_G + "test_the_held_out_transfer_tnr_is_a_reference_value",)),
    Ref(_L, "§5.2", "Approximately 60% fewer LLM calls than naive five-prompt aggregation ... while recovering 86% "
        "of full-aggregation decisions. Performance falls to 65% in difficult no-consensus cases; full "
        "aggregation achieves 79%", ("gate:paper_comparison", "gate:operating_points"), OURS,
        "the paper's measures (calls saved, decisions recovered, human agreement on no-consensus items) of our "
        "gate on our judgments; " + _SPLIT),
    Ref(_L, "§6", "On stable instances, DEBERTA reduces LLM calls from 5 to 1.99", ("gate:paper_comparison",), ON_POP,
        "1 + (1 - TNR) x (adaptive - 1), the paper's derivation; the TNR is our gate's",
        ("tests/test_gate_paper.py::test_paper_policy_costs_one_call_when_trusted_else_the_adaptive_aggregation",
         "tests/test_gate_paper.py::test_the_papers_call_derivation_from_its_shares")),
    Ref(_L, "§6", "The authors note that Section 5 gains may partly reflect repeated judging rather than prompt "
        "diversity itself", ("table:repeats_vs_wordings.diff",), OURS,
        "analysis.repeats: P1 sampled n times (the test the data allow: judge.variant=P1 n_samples=5 "
        "decoding.temperature=0.7) against the 5 wordings, each aggregated by the mean verdict and correlated "
        "with the humans (Pearson) on the same items; diff = r(wordings) - r(repeats) with the paired bootstrap "
        "(the comparison is ours: the summary prints no test)",
        (_T + "test_repeats_vs_wordings_on_a_hand_computed_toy",)),
    Ref(_L, "Table 10", "Each of 33 configurations pairs a dataset with a judge family and evaluates 25 LLMaJ "
        "triples from five back-models and five prompt variants", ("table:configurations",), OURS,
        "our configurations x our backbones (the CPU study: 4 backbones)"),
    Ref(_L, "Appendix B, Table 12", "none of the six dimensions consistently raised cross-model score agreement. "
        "Their eta-squared values of 0.26-0.48 were comparable to the chance baseline",
        ("table:wording_dimensions_cross_model", "table:cross_model_agreement"), OURS,
        "the paper's outcome with Fleiss' kappa among the backbones as the agreement measure (ours: the summary "
        "names none), centred within each task; permutation null over the variants' tags; tags are ours"),
    Ref(_L, "Appendix B (ours beside it)", "eta-squared values of 0.26-0.48", ("table:wording_dimensions",), OURS,
        "cross-variant agreement (each variant's Cohen's kappa with the other variants) instead of cross-model"),
    Ref(_L, "Appendix B", "Output-format strictness had a univariate slope of +0.076 kappa per step, but the effect "
        "weakened to +0.031 with other features fixed and was not significant (p = 0.17). The MT-Bench family "
        "... had a +0.005 slope", ("table:format_strictness_regression.slope",), OURS,
        "OLS on our cross-model kappa per paraphrase, centred within its task; strictness steps loose 0, plain "
        "1, strict 2 from our tags"),
    Ref(_L, "Table 16", "The 15 groups contain 4-5 semantically equivalent prompt variants each ... G15 is used "
        "only for gated aggregation", ("validation:validation.csv.group",), OURS,
        "our groups G1-G16 are written from the summary's descriptions (the paper's full prompts are not in it); "
        "G15 is the gate's held-out group as in the paper"),
    Ref(_L, "§F.1", "Optuna tuned DeBERTa-v3-large LoRA for validation Matthews correlation coefficient and "
        "balanced accuracy", ("gate:training_history", "gate:paper_comparison"), OURS,
        "+gate=paper: gate.tune.metric=val/mcc_plus_balanced_accuracy, the paper's two figures; their sum is "
        "our reading of 'and' (the summary says no more); the CPU default searches val/mcc; the objective is "
        "named in best_params.json and in every paper_comparison row",
        (_G + "test_mcc_plus_balanced_accuracy_on_a_toy_confusion_matrix",)),
    Ref(_L, "§F.1", "over 35 two-epoch trials on one NVIDIA A100 80GB GPU", ("gate:training_history",), ON_POP,
        "+gate=paper: gate.tune.n_trials=35, epochs=2 of DeBERTa-v3-large (a GPU; sweeps/tune_gate.py); the "
        "CPU default is 4 trials x 2 epochs of MiniLM",
        (_G + "test_the_paper_preset_optimises_the_papers_objective_and_keeps_the_three_way_split",)),
    Ref(_L, "§F.1", "using an 80/20 stratified holdout split", ("gate:paper_comparison",), ON_POP,
        "gate.split=holdout (holdout_size=0.2, stratified by the label, instance-disjoint; the holdout picks "
        "and is scored, as one holdout must); the default stays three_way (60/20/20, ours: test items "
        "untouched), and +gate=paper keeps it unless gate.split=holdout; each paper_comparison row names it",
        (_G + "test_80_20_holdout_keeps_the_class_ratio",)),
    Ref(_L, "§F.1", "Gradient accumulation, sequence length, and LoRA target modules were fixed at 8 steps, 512 "
        "tokens, and query/key/value projections", ("gate:training_history",), OURS,
        "conf/gate/classifier/deberta_v3_large.yaml sets 8 / 512 / query_proj, key_proj, value_proj as the paper; "
        "it needs a GPU (hardware): the CPU runs use deberta_tiny or minilm (256 tokens)"),
    Ref(_L, "§F.2", "The Llama 3.1 8B classifier predicts whether a judge's score matches at least three of five "
        "semantically similar judges, outputting category 0 or 1", ("gate:operating_points",), OURS,
        "the LLM baseline (llm_prompt_gate) runs the stage's backbone (a small CPU model here; backbone=llama31_8b "
        "needs a GPU) with a question template of ours (the summary prints none), scored by P(yes)"),
    Ref(_L, "§F.2", "queries are truncated to 3,500 characters and few-shot examples to 1,200 characters each",
        ("gate:operating_points",), ON_POP,
        "gate.llm_baseline.max_query_chars=3500, max_shot_chars=1200, truncation=right (the start kept); ours "
        "beyond it: a prompt still over the backend's context is cut further, then loses shots (logged with a "
        "count); truncation=middle is ours", (_G + "test_llm_baseline_cuts_queries_to_3500_and_shots_to_1200_characters",)),
    # ---------------------------------------------------------------- the rubric paper
    Ref(_R, "Figure 1", "This diagram provides a walkthrough of the experimental setup", (), MISSING,
        "a diagram: nothing to compute"),
    Ref(_R, "Figure 2", "This diagram represents comparisons made between human-autorater agreements tau across "
        "various conditions", (), MISSING, "a diagram: nothing to compute"),
    Ref(_R, "§3.1", "edited holistic prompts reduces the examples to a representative set of three examples (3ex; "
        "high, medium, and low scores) ... presenting all sub-criteria in a single API call (batch), in separate API "
        "calls to mitigate potential positional bias (separate), and a combination of enhancements such as "
        "incorporating additional context, the \"3ex\" set ... and the \"separate\" API call strategy (edited)",
        ("rubric:table1", "rubric:table2"), ON_POP,
        "conf/rubric/: holistic 3ex (and IF 0ex, Table 2's header), analytic separate / batch / edited, in the "
        "paper's order and labels (rubric.order); the holistic block compares two conditions, the analytic one three",
        ("tests/test_rubric_study.py::test_rubric_experiments_compose_with_every_condition_and_both_cpu_backbones",
         _RD + "test_set_1_examples_are_the_papers_essays_for_3ex_and_every_edited_criterion")),
    Ref(_R, "§3.1 (Full)", "the original holistic prompts for the AES task include a large number of examples (10-18)",
        ("rubric:table1",), OURS,
        "the Full condition shows one scored essay per score level from outside the sample: the guides' anchor "
        "papers are not in the data"),
    Ref(_R, "Table 1", "Kendall's tau results on AES with GPT-4o and Llama for Delta rater ... tau is calculated with "
        "singular numerical values for Delta rater", ("rubric:table1",), ON_POP,
        "Kendall's tau-b (H_H -> LLM_H, H_A -> LLM_A per criterion) on a sample of ASAP sets 1, 4, 6 (dataset.limit: "
        "12 essays on CPU) by the run's backbones (the CPU study: smollm2, gemma3_270m); the paper's printed "
        "GPT-4o / Llama values in 'paper <model>: <condition>' columns beside ours; the Full column's examples are ours",
        (_RD + "test_asap_set6_holistic_is_the_resolved_single_score_not_the_raters_mean",
         _RD + "test_paper_reference_values_are_the_printed_ones")),
    Ref(_R, "Table 1, §4.3", "calculated through Pareto dominance comparison for preferences for Delta rubric ... essay A "
        "is considered better than essay B if all sub-criteria scores of A are at least tied to those of B, with at "
        "least one sub-criteria score from A being higher", ("rubric:table1",), ON_POP,
        "the Delta rubric block of table1 (H_H -> H_A, LLM_H -> LLM_A per holistic condition)",
        ("tests/test_metrics_correlation.py::test_pareto_dominance_tau_incomparable_items_are_ties",)),
    Ref(_R, "Table 1 (caption)", "† is indicated next to comparisons that are significantly larger within holistic "
        "prompts. ⋆ is indicated next to comparisons that are significantly larger between separate and batch "
        "comparisons. ↑ and ↓ represent that the tau value for edited prompts is significantly larger or smaller "
        "respectively with the separate s or batch b prompts' tau", ("rubric:table1", "rubric:table2", "rubric:table4"),
        ON_POP, "rubrics.ci.paper_marks on the paired bootstrap tests of each block (significance.csv)",
        (_RD + "test_marks_follow_the_papers_caption_on_toy_blocks", _RD + "test_bonferroni_marks_on_a_toy_p_value_list")),
    Ref(_R, "Table 2", "Kendall's tau results on IF with GPT-4o and Llama. Delta rubric is calculated through instruction "
        "following ratio comparison for preferences", ("rubric:table2",), ON_POP,
        "the model cells (LLM_H -> LLM_A by the yes-ratio) on a sample of InFoBench (dataset.limit: 24 "
        "instructions); the human cells are missing (next row); the paper's printed values beside ours",
        ("tests/test_metrics_correlation.py::test_ratio_tau_is_kendall_on_share_of_yes",
         _RD + "test_marks_follow_the_papers_caption_on_toy_blocks")),
    Ref(_R, "Table 2 (human cells)", "In the dataset, each output was annotated with both scores by three expert "
        "annotators using provided rubrics", ("rubric:table2",), MISSING,
        "data: the InFoBench data here ships no human (expert) labels, so Delta rater and H_H -> H_A cells say "
        "n/a with the reason; the paper's printed values stand beside them"),
    Ref(_R, "Table 2 (ours beside it)", "Kendall's tau results on IF with GPT-4o and Llama", ("rubric:ours_if_gpt4_reference",),
        OURS, "model-only comparisons and GPT-4's decomposed answers as a labelled non-human reference "
        "(ours_if_gpt4_reference)"),
    Ref(_R, "Table 3, §A.1", "Kendall's tau is calculated between GPT-4 ratings and Llama ratings in Table 3",
        ("rubric:table3",), ON_POP,
        "Kendall's tau-b between the run's two backbones (the CPU study: smollm2 vs gemma3_270m), not GPT-4o vs "
        "Llama; the paper's values in 'paper GPT-4o vs Llama: <condition>' columns beside ours",
        (_RD + "test_asap_set6_holistic_is_the_resolved_single_score_not_the_raters_mean",
         "tests/test_metrics_correlation.py::test_pareto_dominance_tau_incomparable_items_are_ties")),
    Ref(_R, "Table 4, §A.1", "Kendall's tau results for Delta rater+rubric with GPT-4o and Llama on AES and IF ... tau is "
        "calculated through Pareto dominance comparison for AES and through instruction following ratio comparison "
        "for IF", ("rubric:table4",), ON_POP,
        "LLM_H -> H_A and H_H -> LLM_A per condition; on IF the human cells say n/a (no human labels here)",
        ("tests/test_metrics_correlation.py::test_pareto_dominance_tau_incomparable_items_are_ties",
         "tests/test_metrics_correlation.py::test_ratio_tau_is_kendall_on_share_of_yes")),
    Ref(_R, "§A.1, Table 4", "The best tau obtained for any rubric condition when comparing human ratings on holistic "
        "rubrics with autoraters on analytic rubrics (Human_H -> LLM_A, 0.401, 0.682, and 0.644 respectively) is lower "
        "than the worst tau obtained from comparing autoraters on holistic rubrics with humans on analytic rubrics "
        "(LLM_H -> Human_A, 0.539, 0.688, and 0.645 respectively)", ("rubric:table4",), ON_POP,
        "the paper's values are carried beside ours (rubrics/paper_reference.py); ours are the run's backbones",
        (_RD + "test_paper_reference_values_are_the_printed_ones",)),
    Ref(_R, "Table 5", "ASAP Chosen Essay Prompts", (), OURS,
        "essay sets 1, 4 and 6 have experiment configs (rubric_asap_set1/4/6); no table of them is written"),
    Ref(_R, "Table 6, §A.2", "for essay prompts 4 and 6 (where both raters agreed on 77.1% and 62.2% of essays, "
        "respectively), essays with rater agreement exhibited higher tau than those without ... with a significant "
        "difference in essay prompt 4", ("rubric:table6",), ON_POP,
        "holistic Delta rater on essays whose two raters' holistic scores are equal (agree) vs not; the caption's † "
        "from the unpaired bootstrap of the two subsets (25th / 975th of 1000); the paper's GPT-4o values from §A.2's "
        "text beside ours (Llama: no numbers printed); the agree - disagree row is ours",
        (_RD + "test_two_strata_split_equal_rater_scores_from_the_rest", _RD + "test_agree_vs_disagree_on_four_items")),
    Ref(_R, "Table 6, §A.2 (ours beside it)", "essays with rater agreement exhibited higher tau than those without",
        ("rubric:ours_agree_disagree", "rubric:ours_agreement_levels"), OURS,
        "every human comparison (human holistic vs analytic, Delta rater, Delta rater + rubric) by agree / disagree "
        "stratum (ours_agree_disagree), and the three levels of the two raters (equal, adjacent, 2+ apart; "
        "ours_agreement_levels)",
        (_RD + "test_table4_gives_a_large_enough_stratum_its_tau_when_the_other_is_too_small",)),
    Ref(_R, "Table 7, §A.2, §5.3", "In the IF dataset, holistic prompt ratings (with three human raters) were divided "
        "into three subsets: full agreement (all three raters agree, 25.9% of the dataset), partial agreement (two "
        "raters agree, 53.3% of the dataset), and full disagreement (no raters agree, 20.9% of the dataset)",
        ("rubric:table7",), MISSING,
        "data: InFoBench's three expert annotators' labels are not in the data (it ships GPT-4's decomposed "
        "answers only); every cell of ours says so, and the paper's GPT-4o values from §5.3 / §A.2's text stand "
        "beside them with its p / f marks"),
    Ref(_R, "§4.2", "Experiments were conducted using gpt-4o-2024-11-20 ... and Llama-3.1-70B-Instruct", (), OURS,
        "configs: backbone=gpt4o (pinned to gpt-4o-2024-11-20), llama31_70b (vLLM, GPUs) and llama31_70b_api "
        "(OpenAI-compatible endpoint); not run here (hardware, API): the CPU study runs small CPU models. Missing: "
        "gpt4o in the paper's chat setting (the study reads each answer after an assistant prefix, which OpenAI's "
        "API does not honour: gpt4o runs there only as prompt_format=completion)"),
    Ref(_R, "§4.2", "Autorater ratings are calculated using a probability weighting scheme: r = sum_i p_i / "
        "(sum_j p_j) * s_i", ("rubric:table1",), ON_POP, "the logprob-weighted score, renormalised over the labels",
        ("tests/test_scoring.py::test_weighted_score_renormalises_over_scale_labels",)),
    Ref(_R, "§4.3", "we use Kendall's tau with tie consideration (calculated using the SciPy ... implementation of (Kendall, 1945)) ... "
        "The confidence interval around the correlations is calculated using bootstrapping with 1000 samples",
        ("rubric:table1", "rubric:table3"), ON_POP,
        "Kendall's tau-b with a 95% percentile bootstrap interval over items, 1000 resamples (rubric.stats)",
        (_RD + "test_asap_set6_holistic_is_the_resolved_single_score_not_the_raters_mean",
         _RD + "test_a_blocks_paired_interval_depends_on_how_many_conditions_it_compares")),
    Ref(_R, "§4.3", "the 95% confidence interval is determined by sampling the 25th and 975th sorted values. For "
        "comparisons involving three conditions, the confidence interval is adjusted using Bonferroni correction, "
        "with the interval bounds set as the average of the 8th and 9th values and the average of the 991st and "
        "992nd values", ("rubric:table1", "rubric:table4"), ON_POP,
        "paired bootstrap of the difference between two conditions; Bonferroni per block (three analytic "
        "conditions: 8th/9th and 991st/992nd; two holistic ones: 25th / 975th)",
        (_RD + "test_three_conditions_use_the_8th_9th_and_991st_992nd_of_1000_differences",
         _RD + "test_a_blocks_paired_interval_depends_on_how_many_conditions_it_compares")),
    Ref(_R, "§5.1", "batch ratings consistently demonstrated a bias with probability distributions heavily skewed "
        "towards \"yes\" responses when answering yes/no decomposed questions. This contrasts with the separate "
        "API call approach, which more closely resembled human response distributions", ("rubric:ours_if_yes_skew",),
        OURS, "mean P(yes) (logprob-weighted) and argmax yes share per analytic condition on our InFoBench sample and "
        "backbones, batch vs separate by the block's paired test; the reference beside them is GPT-4's answers "
        "(the human answers are not in the data), so 'resembled human response distributions' is not tested",
        (_RD + "test_batch_answers_skew_towards_yes_on_a_toy",)),
    Ref(_R, "§A.1", "Separate API calls improve alignment for 8 out of 13 sub-criteria in AES",
        ("rubric:ours_separate_vs_batch",), ON_POP,
        "the count of Table 3's criteria whose model-vs-model tau is higher with separate than batch calls, on "
        "our two backbones and one ASAP set per run (5 or 4 criteria, 12 essays on CPU); the same count on the "
        "paper's printed Table 3 gives its 8 of 13 (4 + 2 + 2)",
        (_RD + "test_separate_beats_batch_on_8_of_13_criteria_of_the_papers_table_3",
         _RD + "test_the_separate_vs_batch_table_counts_table_3s_cells")),
    Ref(_R, "§5.3, §A.2", "Analytic prompt ratings were divided into full agreement (13% of the dataset) and partial "
        "agreement (87% of the dataset) subsets, using majority vote for the final score",
        ("rubric:ours_if_analytic_agreement",), MISSING,
        "data: computed by rubrics.claims.analytic_agreement_levels (full = the three annotators agree on every "
        "question; majority vote per question) where each annotator's answers exist; the InFoBench data here "
        "ships none, so the table says n/a beside the paper's 13% / 87%",
        (_RD + "test_full_and_partial_agreement_of_three_annotators_analytic_answers",)),
    Ref(_R, "§A.1", "a trend of tau decreasing and then increasing based on criteria order in prompts 4 and 6",
        ("rubric:ours_positional_bias",), OURS,
        "our positional-bias table (ours_positional_bias: batch mode by criterion position, batch vs separate), a "
        "name of its own"),
    Ref(_R, "Appendix B.1, §4.1", "The examples chosen from ASAP++ are essay IDs 449, 1264, 1616, 9125, 9430, 9497, "
        "15558, 16520, and 16581 ... three examples per essay prompt were selected from ASAP++ and excluded from "
        "analysis", (), PAPER,
        "sets 1, 4, 6: these essays (asap_task.PAPER_EXAMPLES), never drawn into the sample, shown to 3ex and "
        "edited; a missing one is an error naming it. Ours: sets 2, 3, 5 (seeded essays the raters agree on), IF "
        "(GPT-4-labelled items; B.2's printed examples are not carried), the 3ex labels (the human holistic score)",
        (_RD + "test_set_1_examples_are_the_papers_essays_for_3ex_and_every_edited_criterion",
         _RD + "test_the_sample_never_holds_the_papers_example_essays",
         _RD + "test_the_papers_essays_are_in_the_data_with_equal_traits_high_medium_low")),
    Ref(_R, "Appendix B.1-B.2", "Prompt 1 Holistic Context Instructions ... Evaluation Prompt I will show you "
        "examples", (), OURS,
        "rubrics/texts/prompts.yaml version 2: the printed texts verbatim (holistic contexts of prompts 1, 4, 6; "
        "the separate and edited analytic contexts of prompt 1; B.2's evaluation prompt); ours, marked in the "
        "file: the analytic contexts of prompts 4 and 6, every batch context, the layout, system and answer lines"),
)  # fmt: skip


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(ledger: tuple[Ref, ...] = LEDGER) -> str:
    """``docs/paper_ledger.md``: one table per paper, one row per claim, and the counts by status."""
    lines = [
        "# Paper ledger",
        "",
        "Generated by `python -m promptlottery.ledger` from `src/promptlottery/ledger.py` (edit that, not this",
        "file; `tests/test_ledger.py` checks that the two agree and that every key exists in a report produced",
        "on the test fixtures). Status: **paper's definition** (the paper's definition on its population: its",
        "own items, settings or procedure; such a row has no key), **paper's definition on our population**",
        "(the paper's definition computed on our items, configurations and backbones: every row with a key;",
        "the tests named compute the definition by hand from the paper's words), **ours** (computed another",
        "way, as said), **missing** (why). Keys: `headline:` a row of the lottery report's headline table,",
        "`table:` a lottery analysis table (`.column`), `validation:` a `validate_prompts` output, `gate:` a",
        "gate table, `rubric:` a table of the rubric study, `human:` a row of the human baseline's summary.",
        "",
    ]
    for paper, title in PAPERS.items():
        rows = [r for r in ledger if r.paper == paper]
        counts = ", ".join(f"{sum(r.status == s for r in rows)} {t}" for s, t in STATUS_TEXT.items())
        lines += [f"## {title}", "", f"{len(rows)} rows: {counts}.", ""]
        lines += [
            "| where | the paper's words | ours (keys) | status | how ours differs / why missing | tests |"
        ]
        lines += ["|---|---|---|---|---|---|"]
        for r in rows:
            keys = "<br>".join(f"`{k}`" for k in r.keys) or "-"
            tests = "<br>".join(f"`{t}`" for t in r.tests) or "-"
            lines.append(
                f'| {_cell(r.where)} | "{_cell(r.words)}" | {keys} | {STATUS_TEXT[r.status]} | '
                f"{_cell(r.how) or '-'} | {tests} |"
            )
        lines.append("")
    return "\n".join(lines)


DOC = Path(__file__).resolve().parents[2] / "docs" / "paper_ledger.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m promptlottery.ledger", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DOC), help="where to write it (default: docs/paper_ledger.md)")
    ap.add_argument(
        "--check", action="store_true", help="exit 1 if the file differs from the generated ledger"
    )
    args = ap.parse_args(argv)
    out, text = Path(args.out), render()
    if args.check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        if not same:
            print(f"{out} is out of date: run python -m promptlottery.ledger", file=sys.stderr)
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)  # a generated doc: whole or not at all
    print(f"ledger rows={len(LEDGER)} out={out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
