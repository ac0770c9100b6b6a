"""Agreement and correlation statistics for judge-vs-human and judge-vs-judge comparisons.

Plain array inputs (lists, numpy, pandas); options are keyword-only and checked up front; bad
input raises ValueError saying what is wrong; an undefined measure (no variance, no complete pair)
returns ``nan`` with an :class:`UndefinedMetricWarning`.

* raw agreement: :func:`overlap`, :func:`mean_pairwise_overlap`
* chance-corrected agreement: :func:`cohen_kappa`, :func:`mean_pairwise_cohen_kappa`,
  :func:`fleiss_kappa`, :func:`krippendorff_alpha`
* correlation: :func:`kendall_tau`, :func:`pearson`, :func:`spearman`, and for analytic rubrics
  :func:`pareto_dominance_tau`, :func:`ratio_tau`
* the mean over items (a share, for 0/1 indicators): :func:`item_mean`
* inference: :func:`bootstrap_ci`, :func:`paired_bootstrap_test`, the cluster bootstrap
  (:func:`clustered_bootstrap_ci`, :func:`clustered_ratio_ci`),
  :func:`dependent_correlation_test` (Williams / Steiger), :func:`compare_dependent_correlations`
"""

from ._validation import UndefinedMetricWarning
from .agreement import (
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
    overlap,
)
from .bootstrap import BootstrapResult, bootstrap_ci, item_mean, resample_indices
from .cluster_bootstrap import (
    cluster_resample,
    cluster_resample_counts,
    clustered_bootstrap_ci,
    clustered_ratio_ci,
)
from .correlation import (
    DependentCorrelationResult,
    compare_dependent_correlations,
    dependent_correlation_test,
    kendall_tau,
    pareto_dominance_tau,
    pearson,
    ratio_tau,
    spearman,
)
from .paired_test import PairedBootstrapResult, paired_bootstrap_test

__all__ = [
    "UndefinedMetricWarning",
    "overlap",
    "mean_pairwise_overlap",
    "cohen_kappa",
    "mean_pairwise_cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
    "kendall_tau",
    "pearson",
    "spearman",
    "pareto_dominance_tau",
    "ratio_tau",
    "DependentCorrelationResult",
    "compare_dependent_correlations",
    "dependent_correlation_test",
    "BootstrapResult",
    "PairedBootstrapResult",
    "resample_indices",
    "item_mean",
    "bootstrap_ci",
    "paired_bootstrap_test",
    "cluster_resample",
    "cluster_resample_counts",
    "clustered_bootstrap_ci",
    "clustered_ratio_ci",
]
