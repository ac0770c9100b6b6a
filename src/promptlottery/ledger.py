"""The paper ledger: every table, figure and quantitative claim of both papers, with where ours lives.

One :class:`Ref` per claim, as data: the paper, its section / table / figure, the paper's words
(quoted from ``shared/papers``: the prompt-lottery paper's source-linked summary, the rubric
paper's full text), the keys of our outputs that reproduce it, and a status:

* ``paper``: our row uses the paper's definition on the paper's population; ``tests`` names the
  hand-computed test(s) of that definition;
* ``ours``: our row computes it another way, ``how`` says how it differs;
* ``missing``: nothing of ours reproduces it, ``how`` says why (data, hardware or not built).

Keys name what a report produced on the test fixtures contains (``tests/test_ledger.py`` checks
each): ``headline:<key>`` (a row of the lottery report's headline table), ``table:<name>`` or
``table:<name>.<column>`` (a lottery analysis table), ``validation:<file>`` or
``validation:<file>.<column>`` (the ``validate_prompts`` stage's outputs), ``gate:<file>`` (a
table the gate stage writes) and ``rubric:<table id>`` (a table of the rubric study's
``cells.csv``).

Other parts add or update their rows here, as data; ``python -m promptlottery.ledger`` rewrites
``docs/paper_ledger.md`` (``--check`` exits 1 when the committed file differs).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

PAPER, OURS, MISSING = "paper", "ours", "missing"
STATUS_TEXT = {PAPER: "paper's definition", OURS: "ours", MISSING: "missing"}
PAPERS = {
    "lottery": "Prompt Lottery in LLM-as-a-Judge (Subasic et al., arXiv 2610.38076v1)",
    "rubric": "Quantifying the Statistical Effect of Rubric Modifications on Human-Autorater Agreement "
    "(Huynh et al., arXiv 2605.06283)",
}
KEY_KINDS = ("headline", "table", "validation", "gate", "rubric")


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
        if self.status == PAPER and not self.tests:
            raise ValueError(
                f"ledger row {self.where!r}: a paper's-definition row needs its hand-computed test"
            )
        if self.status != PAPER and not self.how:
            raise ValueError(f"ledger row {self.where!r}: say how ours differs or why it is missing")
        for k in self.keys:
            if k.partition(":")[0] not in KEY_KINDS:
                raise ValueError(f"ledger row {self.where!r}: key {k!r} must start with one of {KEY_KINDS}")


_L, _R = "lottery", "rubric"
_T = "tests/test_lottery_paper_rows.py::"
_D = "tests/test_paper_definitions.py::"
_GATE5 = "the gate's protocol (issue 24 item 5, §F.1): "
_RUBRIC8 = "the rubric study's conditions, examples, prompts and judges (issue 24 item 8): "

#: the ledger, paper by paper in the paper's order
LEDGER: tuple[Ref, ...] = (
    # ---------------------------------------------------------------- the prompt-lottery paper
    Ref(_L, "§1", "selective aggregation achieved 86% of full robustness while reducing inference costs by 60% "
        "versus naive aggregation", ("gate:paper_comparison",), OURS,
        _GATE5 + "our gate is tuned on val/tpr on a 60/20/20 split, the paper's on validation MCC and balanced "
        "accuracy on an 80/20 holdout"),
    Ref(_L, "Abstract", "LLMaJ judges exhibit 6-9x larger agreement degradation under prompt rephrasings than "
        "humans", (), MISSING, "data: the paper's user study (10 annotators, 650 data points) is not released"),
    Ref(_L, "§3", "33 configurations across 12 datasets and six judge families, using five backbones and five "
        "prompt variants for 825 experimental conditions", ("table:configurations",), OURS,
        "the CPU study runs one configuration per judge family (5) on 4 small CPU backbones; every "
        "configuration the data allows has an experiment config"),
    Ref(_L, "§3", "The study uses near-zero temperature (T = 10^-5)", ("headline:fixed_kappa_T1e-05",), PAPER,
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
        "pairwise Cohen's kappa, 0.80 Fleiss' kappa, and 0.63 Krippendorff's alpha", (), MISSING,
        "data: the user study's annotations are not released"),
    Ref(_L, "§3.2", "Fixed-prompt repeated runs established Cohen's kappa = 0.86 and Fleiss' kappa = 0.89",
        ("headline:fixed_kappa_T1e-05", "headline:fixed_kappa_cohen_T1e-05"), PAPER,
        "Fleiss' kappa and mean pairwise Cohen over every configuration where defined; on CPU the repeats differ "
        "only with repeat_source=batch (our emulation of GPU nondeterminism, named in the row)",
        ("tests/test_metrics_agreement.py::test_fleiss_kappa_worked_example",
         _T + "test_fleiss_is_the_headline_with_pairwise_cohen_beside_it")),
    Ref(_L, "§3.2", "At T = 0.7, fixed-prompt runs had lower Fleiss' kappa = 0.39", ("headline:fixed_kappa_T0.7",),
        PAPER, "", (_T + "test_the_fixed_prompt_rows_carry_the_papers_value_at_their_temperature",
                    "tests/test_metrics_agreement.py::test_fleiss_kappa_worked_example")),
    Ref(_L, "§3.2", "the paper set kappa = 0.80 as the human robustness baseline and kappa > 0.61 as the "
        "usability threshold", ("table:agreement_collapse.band",), PAPER,
        "the band is read off the mean pairwise Cohen's kappa", ("tests/test_analysis.py::test_agreement_collapse_hand_computed",)),
    Ref(_L, "§4.1, §C.3", "Agreement falls from kappa = 0.89 with a fixed prompt to kappa = 0.24 across "
        "paraphrastic variants", ("headline:paraphrase_kappa", "table:agreement_collapse.fleiss_kappa_all"), PAPER,
        "mean over every configuration where Fleiss' kappa is defined, n of m in the note",
        (_T + "test_kappa_means_keep_every_configuration_where_fleiss_is_defined",
         _T + "test_fleiss_is_the_headline_with_pairwise_cohen_beside_it")),
    Ref(_L, "§4.1 (ours beside it)", "kappa = 0.24 across paraphrastic variants",
        ("headline:paraphrase_kappa_filtered", "headline:paraphrase_kappa_cohen"), OURS,
        "collapse-filtered mean (configurations with >= 95% of verdicts one label left out) and mean pairwise "
        "Cohen's kappa, each with n of m"),
    Ref(_L, "§4.2", "Binary tasks had higher raw overlap than non-binary tasks, but lower chance-corrected "
        "reliability", ("table:agreement_by_task_type.overlap", "table:agreement_by_task_type.fleiss_kappa_all"), PAPER,
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
    Ref(_L, "§5, Table 6", "Plurality aggregation consistently achieves the strongest human alignment among the "
        "compared strategies (Pearson correlation with human scores)", ("table:aggregation_vs_humans.pearson",),
        PAPER, "plurality = a label given by at least 3 of 5 judges (no verdict on a no-consensus item); "
        "plurality_ties_to_p1 beside it is ours",
        (_T + "test_aggregators_are_scored_on_the_same_items_with_coverage",
         "tests/test_analysis.py::test_aggregation_vs_humans_hand_computed")),
    Ref(_L, "§5, Table 6", "The comparison uses Pearson correlation with human scores across three datasets with "
        "public annotations", ("table:aggregation_vs_humans.n",), OURS,
        "every configuration with human labels in our runs (STS-B, Topical-Chat, SummEval in the CPU study), not "
        "the paper's three; each method scored on the items all methods cover"),
    Ref(_L, "§5.2", "The classifier was selected to maximize TNR because false negatives can corrupt evaluation "
        "quality", ("gate:operating_points",), OURS, _GATE5 + "ours tunes on val/tpr (the paper's TNR with "
        "'needs aggregation' as its positive class is our TPR), while §F.1 names MCC and balanced accuracy"),
    Ref(_L, "§5.1, Figures 4-5", "Inter-prompt aggregation achieves stronger reliability than inter-model or "
        "hybrid aggregation", ("table:ensemble_designs",), OURS,
        "k judges per design, mean pairwise Cohen among them and the tie-broken plurality's correlation with "
        "the humans (the summary names no measure)"),
    Ref(_L, "§5.2", "The default prompt matches plurality in 94.7% of binary cases but only 44.0% overall",
        ("headline:p1_match_binary", "headline:p1_match_all"), PAPER,
        "no cluster = no match; ties_to_P1 beside it is ours",
        (_T + "test_p1_match_and_online_convergence_on_the_toy", _D + "test_p1_matches_only_the_cluster_label")),
    Ref(_L, "§5.2", "strict plurality is reached in 58.73% of cases. For non-binary tasks, 37.68% reach plurality "
        "by the third judge, 21.05% require all five, and 41.27% never converge",
        ("headline:cluster_share", "headline:converged_by_3", "headline:converged_by_5",
         "headline:never_converged"), PAPER, "on the non-binary pool",
        (_T + "test_convergence_rows_compare_the_non_binary_pool_and_name_all_scales_as_ours",
         _D + "test_incremental_convergence_shares_sum_to_one")),
    Ref(_L, "§5.2 (ours beside it)", "For non-binary tasks, 37.68% reach plurality by the third judge",
        ("headline:cluster_share_all", "headline:converged_by_3_all", "headline:converged_by_5_all",
         "headline:never_converged_all", "headline:adaptive_calls_all"), OURS,
        "all scales pooled (binary included)"),
    Ref(_L, "§5.2.1", "The derivation compares the gated strategy with full aggregation at 4.247 calls",
        ("headline:adaptive_calls", "gate:paper_comparison"), PAPER,
        "3 x by-3rd + 5 x (by-5th + never), on the non-binary pool",
        (_T + "test_convergence_rows_compare_the_non_binary_pool_and_name_all_scales_as_ours",
         "tests/test_gate_paper.py::test_the_papers_call_derivation_from_its_shares")),
    Ref(_L, "§5.2", "DEBERTA-V3 achieves TPR 85.06% and TNR 69.42%", ("gate:classifier_metrics",), OURS,
        _GATE5 + "objective val/tpr, 60/20/20 split; DeBERTa-v3 on GPU only"),
    Ref(_L, "§5.2", "TNR stable at 66.22% on a held-out dataset with unseen Prometheus prompts",
        ("gate:transfer_classifier_metrics",), OURS,
        _GATE5 + "the transfer is measured on our held-out group G15, not on Prometheus prompts"),
    Ref(_L, "§5.2", "Approximately 60% fewer LLM calls than naive five-prompt aggregation ... while recovering 86% "
        "of full-aggregation decisions. Performance falls to 65% in difficult no-consensus cases; full "
        "aggregation achieves 79%", ("gate:paper_comparison", "gate:operating_points"), OURS,
        _GATE5 + "our gate and split"),
    Ref(_L, "§6", "On stable instances, DEBERTA reduces LLM calls from 5 to 1.99", ("gate:paper_comparison",), PAPER,
        "1 + (1 - TNR) x (adaptive - 1), the paper's derivation; the TNR is our gate's",
        ("tests/test_gate_paper.py::test_paper_policy_costs_one_call_when_trusted_else_the_adaptive_aggregation",
         "tests/test_gate_paper.py::test_the_papers_call_derivation_from_its_shares")),
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
        "balanced accuracy over 35 two-epoch trials ... using an 80/20 stratified holdout split",
        ("gate:training_history",), OURS, _GATE5 + "objective val/tpr on a 60/20/20 split; DeBERTa-v3-large "
        "needs a GPU (CPU runs a tiny DeBERTa)"),
    Ref(_L, "§F.1", "Gradient accumulation, sequence length, and LoRA target modules were fixed at 8 steps, 512 "
        "tokens, and query/key/value projections", ("gate:training_history",), OURS,
        "conf/gate/classifier/deberta_v3_large.yaml sets 8 / 512 / query_proj, key_proj, value_proj as the paper; "
        "it needs a GPU (hardware): the CPU runs use deberta_tiny or minilm (256 tokens)"),
    Ref(_L, "§F.2", "The Llama 3.1 8B classifier predicts whether a judge's score matches at least three of five "
        "semantically similar judges, outputting category 0 or 1", ("gate:operating_points",), OURS,
        _GATE5 + "the LLM baseline runs the stage's backbone (a small CPU model here; Llama 3.1 8B needs a GPU)"),
    Ref(_L, "§F.2", "queries are truncated to 3,500 characters and few-shot examples to 1,200 characters each",
        ("gate:operating_points",), OURS, _GATE5 + "ours cuts 3,000 characters in the middle and drops shots"),
    # ---------------------------------------------------------------- the rubric paper
    Ref(_R, "Figure 1", "This diagram provides a walkthrough of the experimental setup", (), MISSING,
        "a diagram: nothing to compute"),
    Ref(_R, "Figure 2", "This diagram represents comparisons made between human-autorater agreements tau across "
        "various conditions", (), MISSING, "a diagram: nothing to compute"),
    Ref(_R, "§3.1, Table 1", "Delta rater: human vs autorater agreement on AES (Full, 3ex, separate, batch, "
        "edited)", ("rubric:table1",), OURS,
        _RUBRIC8 + "three holistic conditions of our own instead of Full / 3ex, seeded examples, prompts in our "
        "words"),
    Ref(_R, "Table 1", "Delta rubric: holistic vs analytic agreement within a rater", ("rubric:table2",), OURS,
        _RUBRIC8 + "our table2; the paper prints Delta rater and Delta rubric in Table 1"),
    Ref(_R, "Table 2", "Kendall's tau on IF (0ex and 3ex holistic, analytic separate / batch / edited)",
        ("rubric:table6",), OURS, _RUBRIC8 + "our table6; conditions ours"),
    Ref(_R, "Table 3", "GPT-4o vs Llama agreement", ("rubric:table3",), OURS,
        _RUBRIC8 + "model-vs-model rows of our table3, between our two CPU backbones"),
    Ref(_R, "Table 4, §A.1", "Delta rater + rubric", ("rubric:table3",), OURS, _RUBRIC8 + "our table3"),
    Ref(_R, "Table 5", "ASAP Chosen Essay Prompts", (), OURS,
        "essay sets 1, 4 and 6 have experiment configs (rubric_asap_set1/4/6); no table of them is written"),
    Ref(_R, "Table 6, §A.2", "essays with rater agreement exhibited higher tau than those without", ("rubric:table4",),
        OURS, _RUBRIC8 + "our table4 (agree vs disagree strata, the paper's test)"),
    Ref(_R, "Table 7, §A.2", "full agreement (all three raters agree, 25.9% of the dataset), partial agreement (two "
        "raters agree, 53.3%)", ("rubric:table4_levels",), OURS, _RUBRIC8 + "our table4_levels"),
    Ref(_R, "§4.2", "Experiments were conducted using gpt-4o-2024-11-20 ... and Llama-3.1-70B-Instruct", (),
        MISSING, "not built: ours is pinned to gpt-4o-2024-08-06 and has no Llama-3.1-70B config; the CPU study "
        "runs small CPU models (hardware)"),
    Ref(_R, "§4.2", "Autorater ratings are calculated using a probability weighting scheme: r = sum_i p_i / "
        "(sum_j p_j) * s_i", ("rubric:table1",), PAPER, "the logprob-weighted score, renormalised over the labels",
        ("tests/test_scoring.py::test_weighted_score_renormalises_over_scale_labels",)),
    Ref(_R, "§4.3", "In AES, Pareto dominance is used ... The confidence interval around the correlations is "
        "calculated using bootstrapping with 1000 samples", ("rubric:table3",), PAPER,
        "Kendall's tau-b, Pareto-dominance aggregation, paired bootstrap with Bonferroni",
        ("tests/test_rubric_definitions.py::test_three_conditions_use_the_8th_9th_and_991st_992nd_of_1000_differences",
         "tests/test_metrics_correlation.py::test_pareto_dominance_tau_incomparable_items_are_ties")),
    Ref(_R, "§A.1", "a trend of tau decreasing and then increasing based on criteria order in prompts 4 and 6",
        ("rubric:table7",), OURS, "our positional-bias table (table7), a name of its own"),
    Ref(_R, "Appendix B.1", "The examples chosen from ASAP++ are essay IDs 449, 1264, 1616, 9125, 9430, 9497, "
        "15558, 16520, and 16581", (), OURS, _RUBRIC8 + "seeded high / medium / low essays per criterion"),
    Ref(_R, "Appendix B.1-B.2", "Prompt 1 Holistic Context Instructions ... Evaluation Prompt I will show you "
        "examples", (), OURS, _RUBRIC8 + "prompts written in our own words (rubrics/texts/prompts.yaml)"),
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
        "on the test fixtures). Status: **paper's definition** (our row measures what the paper defines, on its",
        "population; the tests named compute it by hand from the paper's words), **ours** (computed another",
        "way, as said), **missing** (why). Keys: `headline:` a row of the lottery report's headline table,",
        "`table:` a lottery analysis table (`.column`), `validation:` a `validate_prompts` output, `gate:` a",
        "gate table, `rubric:` a table of the rubric study.",
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
    ap.add_argument(
        "--out", default=str(DOC), help="where to write the ledger (default: docs/paper_ledger.md)"
    )
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
    out.write_text(text, encoding="utf-8")
    print(f"ledger rows={len(LEDGER)} out={out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
