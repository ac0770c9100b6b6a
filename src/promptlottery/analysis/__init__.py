"""Analyses of judgments: the prompt lottery (issue 6).

Reads the judgments of one or many sweeps and never calls a judge model. Each analysis is a
function of a judgments table with verdicts (:func:`add_verdicts`); the ``lottery`` stage
(:mod:`promptlottery.analysis.stage`) runs them all and writes tables, figures and report.md.

Aggregation across judges (:mod:`promptlottery.judging.aggregate`: :func:`plurality`,
:func:`majority`, :func:`mean_score`, :func:`median_score`, :func:`convergence`) takes plain
items x judges matrices and is importable without the rest.
"""

from promptlottery.judging.aggregate import (
    AGGREGATORS,
    aggregate,
    convergence,
    convergence_summary,
    majority,
    mean_score,
    median_score,
    plurality,
    plurality_details,
)

# the analyses import the statistics stack (scipy, scikit-learn, statsmodels): loaded on first use
_LAZY = {
    "agreement_by_task_type": "agreement",
    "agreement_collapse": "agreement",
    "agreement_measures": "agreement",
    "variant_agreement": "agreement",
    "OBJECTIVE_FAMILIES": "promptlottery.judging.table",
    "SUBJECTIVE_FAMILIES": "promptlottery.judging.table",
    "AnalysisError": "promptlottery.judging.table",
    "add_verdicts": "promptlottery.judging.table",
    "family_type": "promptlottery.judging.table",
    "label_table": "labels",
    "load_judgments": "promptlottery.judging.table",
    "aggregation_vs_humans": "ensembles",
    "convergence_analysis": "ensembles",
    "ensemble_designs": "ensembles",
    "best_variant_counts": "humans",
    "variant_human_correlation": "humans",
    "rank_reversals": "ranks",
    "prompt_similarities": "wording",
    "similarity_vs_stability": "wording",
    "variant_texts": "wording",
    "wording_dimensions": "wording",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module = _LAZY[name] if "." in _LAZY[name] else f"promptlottery.analysis.{_LAZY[name]}"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'promptlottery.analysis' has no attribute {name!r}")


__all__ = [
    "AGGREGATORS",
    "OBJECTIVE_FAMILIES",
    "SUBJECTIVE_FAMILIES",
    "AnalysisError",
    "add_verdicts",
    "aggregate",
    "aggregation_vs_humans",
    "agreement_by_task_type",
    "agreement_collapse",
    "agreement_measures",
    "best_variant_counts",
    "convergence",
    "convergence_analysis",
    "convergence_summary",
    "ensemble_designs",
    "family_type",
    "label_table",
    "load_judgments",
    "majority",
    "mean_score",
    "median_score",
    "plurality",
    "plurality_details",
    "prompt_similarities",
    "rank_reversals",
    "similarity_vs_stability",
    "variant_agreement",
    "variant_human_correlation",
    "variant_texts",
    "wording_dimensions",
]
