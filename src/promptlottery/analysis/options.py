"""The options of the ``lottery`` stage: the ``analysis:`` node of ``conf/analysis/lottery.yaml``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from promptlottery.analysis.agreement import DEFAULT_THRESHOLDS
from promptlottery.judging.table import AnalysisError

#: the valid values of each option with a fixed set of choices
CHOICES = {
    "embeddings": ("minilm", "none"),
    "rank_score": ("value", "cont"),
    "best_by": ("kendall", "pearson"),
}


@dataclass
class LotteryOptions:
    """The ``analysis:`` node of ``conf/analysis/lottery.yaml`` (see there for each key)."""

    runs: Any = None
    verdict: str = "argmax"
    sampled_verdict: str = "parsed"
    reference: str = "P1"
    temperature: float | None = None
    n_resamples: int = 1000
    n_permutations: int = 1000
    seed: int = 0
    level: float = 0.95
    thresholds: dict = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    embeddings: str = "minilm"
    rank_score: str = "value"
    max_ensemble_judges: int = 5
    best_by: str = "kendall"
    plots: bool = True
    report: str = "report.md"
    tables_dir: str = "tables"
    figures_dir: str = "figures"
    name: str = "lottery"
    #: analyse configurations with failed / killed / never-run jobs (the report says so)
    allow_partial: bool = False
    #: analyse one backbone's judgments in different dtypes together
    allow_mixed_dtypes: bool = False
    n_jobs: int = 1

    @classmethod
    def from_dict(cls, d: dict | None) -> LotteryOptions:
        d = dict(d or {})
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - valid)
        if unknown:
            raise AnalysisError(f"unknown analysis option(s) {unknown}; valid: {sorted(valid)}")
        opts = cls(**d)
        opts.thresholds = {**DEFAULT_THRESHOLDS, **(opts.thresholds or {})}
        for name, choices in CHOICES.items():
            value = getattr(opts, name)
            if value not in choices:
                raise AnalysisError(
                    f"analysis.{name} must be {' or '.join(repr(c) for c in choices)}, got {value!r}"
                )
        n_jobs = opts.n_jobs
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or (n_jobs < 1 and n_jobs != -1):
            raise AnalysisError(
                f"analysis.n_jobs must be a positive integer or -1 (all cores), got {opts.n_jobs!r}"
            )
        return opts
