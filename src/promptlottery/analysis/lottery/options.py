"""The options of the ``lottery`` stage: the ``analysis:`` node of ``conf/analysis/lottery.yaml``.

``RunConfig.analysis`` stays free-form (``Any``): the ``analysis:`` node is shared with the compare
stage (``conf/analysis/compare.yaml``), whose keys differ. The lottery stage checks the node when it
builds :class:`LotteryOptions` (``from_dict``) before any output; every bad key or value is a one-line
ConfigError naming the option and its valid choices or range.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from promptlottery.checks import check_choice, check_int, check_open, fail, is_int, known_options

#: reference thresholds on kappa (Landis & Koch style bands used by the paper)
DEFAULT_THRESHOLDS = {"robust": 0.80, "usable": 0.61, "collapse_share": 0.95}


class Embeddings(StrEnum):
    """The encoder of the semantic-similarity analysis (``none`` skips it)."""

    minilm = "minilm"
    none = "none"


class RankScore(StrEnum):
    value = "value"
    cont = "cont"


class BestBy(StrEnum):
    kendall = "kendall"
    pearson = "pearson"


class KappaInterval(StrEnum):
    """The interval of each configuration's Fleiss' kappa (docs/analysis.md, "Intervals of Fleiss' kappa")."""

    studentized = "studentized"
    percentile = "percentile"


#: the valid values of each option with a fixed set of choices
CHOICES: dict[str, type[StrEnum]] = {
    "embeddings": Embeddings,
    "rank_score": RankScore,
    "best_by": BestBy,
    "kappa_interval": KappaInterval,
}


@dataclass
class LotteryOptions:
    """The ``analysis:`` node of ``conf/analysis/lottery.yaml`` (see there for each key).

    The one options object every analysis takes beside the :class:`~promptlottery.judging.grid.JudgmentGrid`
    (whose ``verdict``, ``sampled_verdict``, ``reference`` and ``temperature`` it was built with).
    """

    runs: Any = None
    verdict: str = "argmax"
    sampled_verdict: str = "parsed"
    reference: str = "P1"
    temperature: float | None = None
    n_resamples: int = 1000
    n_permutations: int = 1000
    seed: int = 0
    level: float = 0.95
    #: studentized (bootstrap-t) or percentile interval of Fleiss' kappa per configuration
    kappa_interval: KappaInterval = KappaInterval.studentized
    thresholds: dict = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    embeddings: Embeddings = Embeddings.minilm
    rank_score: RankScore = RankScore.value
    max_ensemble_judges: int = 5
    best_by: BestBy = BestBy.kendall
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
    #: BLAS threads during the analysis: 1 (default) pins OpenBLAS / MKL to one thread (its many small
    #: matrix products ran about 3x slower with BLAS's threads spinning on a shared 2-core machine);
    #: null leaves BLAS as the environment set it
    blas_threads: int | None = 1
    #: a human_ratings.parquet (python -m run +human=import): the human-baseline section (promptlottery.human)
    human_ratings: str | None = None
    #: the datasets' own per-rater labels: human agreement under one wording beside the fixed prompt's
    human_raters: bool = False
    #: budget simulations to link from the report (a glob or list): the newest that read these same files
    budget_runs: Any = None

    def __post_init__(self) -> None:
        # a StrEnum member is a str: asdict / json / the report record the plain value
        for name, enum in CHOICES.items():
            value = getattr(self, name)
            check_choice(f"analysis.{name}", value, [e.value for e in enum])
            setattr(self, name, enum(value))
        self.thresholds = {**DEFAULT_THRESHOLDS, **(self.thresholds or {})}
        if not (is_int(self.n_jobs) and self.n_jobs == -1):
            check_int("analysis.n_jobs", self.n_jobs, lo=1, what="a positive integer or -1 (all cores)")
        if self.blas_threads is not None:
            check_int("analysis.blas_threads", self.blas_threads, lo=1, what="a positive integer or null")
        check_open("analysis.level", self.level, 0, 1)
        runs = self.budget_runs
        if runs is not None and not isinstance(runs, str | list | tuple):
            raise fail("analysis.budget_runs", runs, "a glob or a list of them")
        for key in ("n_resamples", "n_permutations", "max_ensemble_judges"):
            check_int(f"analysis.{key}", getattr(self, key), lo=1)

    @property
    def resampling(self) -> dict[str, Any]:
        """``n_resamples``, ``seed`` and ``level``: the keywords of every bootstrap CI."""
        return {"n_resamples": self.n_resamples, "seed": self.seed, "level": self.level}

    @classmethod
    def from_dict(cls, d: dict | None) -> LotteryOptions:
        """The checked options of a plain ``analysis`` dict (one-line ConfigError if bad)."""
        d = dict(d or {})
        known_options(d, (f.name for f in fields(cls)), "analysis")
        return cls(**d)
