"""The names of the lottery section's tables (``tables/<name>.csv``), declared once.

The section (:mod:`promptlottery.analysis.lottery.sections.lottery`) builds its tables under these names;
the per-configuration workers, the headlines, the verdict, the figures and the report read them by
these names. A leaf module, so that every one of them can import it without an import cycle.
"""

CONFIGURATIONS = "configurations"
LABEL_DISTRIBUTIONS = "label_distributions"
AGREEMENT_COLLAPSE = "agreement_collapse"
AGREEMENT_BY_TASK_TYPE = "agreement_by_task_type"
VARIANT_HUMAN_CORRELATION = "variant_human_correlation"
BEST_VARIANT_COUNTS = "best_variant_counts"
VARIANT_AGREEMENT = "variant_agreement"
PROMPT_SIMILARITIES = "prompt_similarities"
SIMILARITY_STABILITY = "similarity_stability"
SIMILARITY_POINTS = "similarity_points"
WORDING_DIMENSIONS = "wording_dimensions"
CROSS_MODEL_AGREEMENT = "cross_model_agreement"
WORDING_DIMENSIONS_CROSS_MODEL = "wording_dimensions_cross_model"
FORMAT_STRICTNESS_REGRESSION = "format_strictness_regression"
RANK_SUMMARY = "rank_summary"
RANK_PAIRS = "rank_pairs"
RANK_SYSTEMS = "rank_systems"
RANK_TRAJECTORIES = "rank_trajectories"
AGGREGATION_VS_HUMANS = "aggregation_vs_humans"
ENSEMBLE_DESIGNS = "ensemble_designs"
CONVERGENCE_SUMMARY = "convergence_summary"
CONVERGENCE_ITEMS = "convergence_items"
UNSTABLE_ITEMS = "unstable_items"
VERDICT = "verdict"
REPEATS_VS_WORDINGS = "repeats_vs_wordings"
HEADLINES = "headlines"
#: with a sampled fixed-prompt baseline read from the parsed text (``sampled_verdict=parsed``)
PARSED_COLLAPSE = "agreement_collapse_parsed"

#: analysis 6's four tables
RANK_TABLES = (RANK_SUMMARY, RANK_PAIRS, RANK_SYSTEMS, RANK_TRAJECTORIES)
#: the tables computed one configuration at a time (:mod:`promptlottery.analysis.lottery.parallel`)
PER_CONFIGURATION = (
    AGREEMENT_COLLAPSE,
    VARIANT_HUMAN_CORRELATION,
    VARIANT_AGREEMENT,
    *RANK_TABLES,
    AGGREGATION_VS_HUMANS,
)
#: the tables of analyses 1-8 (empty when there is no pointwise judgment), in the order built
POINTWISE_TABLES = (
    CONFIGURATIONS,
    LABEL_DISTRIBUTIONS,
    AGREEMENT_COLLAPSE,
    AGREEMENT_BY_TASK_TYPE,
    VARIANT_HUMAN_CORRELATION,
    BEST_VARIANT_COUNTS,
    VARIANT_AGREEMENT,
    PROMPT_SIMILARITIES,
    SIMILARITY_STABILITY,
    SIMILARITY_POINTS,
    WORDING_DIMENSIONS,
    CROSS_MODEL_AGREEMENT,
    WORDING_DIMENSIONS_CROSS_MODEL,
    FORMAT_STRICTNESS_REGRESSION,
    *RANK_TABLES,
    AGGREGATION_VS_HUMANS,
    ENSEMBLE_DESIGNS,
    CONVERGENCE_SUMMARY,
    CONVERGENCE_ITEMS,
    UNSTABLE_ITEMS,
    VERDICT,
)
#: every table the section may build
TABLES = (*POINTWISE_TABLES, REPEATS_VS_WORDINGS, HEADLINES, PARSED_COLLAPSE)
