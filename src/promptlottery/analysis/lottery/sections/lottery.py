"""The lottery section: analyses 1-8 of the prompt-lottery paper on the pointwise configurations
(agreement collapse, task types, no prompt wins, similarity vs stability, wording dimensions, rank
reversals, aggregation, convergence), the verdict and the headline rows beside the paper's."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.agreement import agreement_by_task_type, agreement_collapse
from promptlottery.analysis.lottery.ensembles import convergence_analysis, ensemble_designs
from promptlottery.analysis.lottery.headlines import headlines
from promptlottery.analysis.lottery.human_correlation import best_variant_counts
from promptlottery.analysis.lottery.labels import label_table
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.parallel import analyse_configurations
from promptlottery.analysis.lottery.repeats import repeats_vs_wordings
from promptlottery.analysis.lottery.sections.base import ReportContext, Section
from promptlottery.analysis.lottery.similarity import (
    cross_model_agreement,
    prompt_similarities,
    similarity_vs_stability,
    strictness_regression,
    variant_texts,
    wording_dimensions,
)
from promptlottery.analysis.lottery.verdict import item_table, verdict_summary
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import UndefinedMetricWarning

logger = logging.getLogger(__name__)


def _similarities(grid: JudgmentGrid, opts: LotteryOptions, texts: pd.DataFrame, encode, extra: dict):
    """Analysis 4's prompt similarities; the encoder is optional: without it, NaN and the reason."""
    try:
        if opts.embeddings == "none":
            raise AnalysisError("analysis.embeddings=none")
        sims = prompt_similarities(texts, reference=opts.reference, encode=encode)
        extra["similarity_error"] = None
    except Exception as exc:  # noqa: BLE001 - the encoder is optional: say why and go on
        logger.warning("prompt similarities unavailable: %s", exc)
        sims = texts[["prompt_group", "variant"]].assign(similarity_to_ref=np.nan)
        extra["similarity_error"] = f"{type(exc).__name__}: {exc}"
    return sims


def _agreement_tables(grid: JudgmentGrid, opts: LotteryOptions, tables: dict, extra: dict) -> dict:
    """Analyses 1-3 (and the per-configuration results the later ones reuse)."""
    tables[lt.CONFIGURATIONS] = configuration_table(grid)
    tables[lt.LABEL_DISTRIBUTIONS] = label_table(grid, opts)
    per = analyse_configurations(grid, opts)
    collapse, dists = per["tables"][lt.AGREEMENT_COLLAPSE], per["distributions"]
    tables[lt.AGREEMENT_COLLAPSE] = collapse
    extra["distributions"] = dists
    tables[lt.AGREEMENT_BY_TASK_TYPE] = agreement_by_task_type(collapse, dists, level=opts.level)
    corr = per["tables"][lt.VARIANT_HUMAN_CORRELATION]
    tables[lt.VARIANT_HUMAN_CORRELATION] = corr
    tables[lt.BEST_VARIANT_COUNTS] = best_variant_counts(corr, by=opts.best_by, reference=opts.reference)
    tables[lt.VARIANT_AGREEMENT] = per["tables"][lt.VARIANT_AGREEMENT]
    return per


def _wording_tables(grid: JudgmentGrid, opts: LotteryOptions, tables: dict, extra: dict, encode) -> None:
    """Analyses 4-5: similarity vs stability, the wording dimensions (ours and the paper's outcome)."""
    va = tables[lt.VARIANT_AGREEMENT]
    texts = variant_texts(grid.prompt_groups(), files=grid.group_files())
    sims = tables[lt.PROMPT_SIMILARITIES] = _similarities(grid, opts, texts, encode, extra)
    sim_summary, sim_points = similarity_vs_stability(va, sims, reference=opts.reference, level=opts.level)
    tables[lt.SIMILARITY_STABILITY] = sim_summary
    tables[lt.SIMILARITY_POINTS] = sim_points
    tables[lt.WORDING_DIMENSIONS] = wording_dimensions(
        va, texts, n_permutations=opts.n_permutations, seed=opts.seed, level=opts.level
    )
    # Appendix B / Table 12's outcome: cross-model score agreement per paraphrase
    cross = cross_model_agreement(grid)
    tables[lt.CROSS_MODEL_AGREEMENT] = cross
    tables[lt.WORDING_DIMENSIONS_CROSS_MODEL] = wording_dimensions(
        cross,
        texts,
        metric="cross_model",
        n_permutations=opts.n_permutations,
        seed=opts.seed,
        level=opts.level,
    )
    tables[lt.FORMAT_STRICTNESS_REGRESSION] = strictness_regression(cross, texts)


def _later_tables(grid: JudgmentGrid, opts: LotteryOptions, tables: dict, extra: dict, per: dict) -> None:
    """Analyses 6-8, the verdict and the headlines."""
    for name in lt.RANK_TABLES:
        tables[name] = per["tables"][name]
    rank_dists = extra["rank_distributions"] = per["rank_distributions"]
    tables[lt.AGGREGATION_VS_HUMANS] = per["tables"][lt.AGGREGATION_VS_HUMANS]
    tables[lt.ENSEMBLE_DESIGNS] = ensemble_designs(grid, opts)
    tables[lt.REPEATS_VS_WORDINGS] = repeats_vs_wordings(grid, opts)  # §6: repeated judging vs wordings
    conv_summary, conv_items = convergence_analysis(grid, opts)
    tables[lt.CONVERGENCE_SUMMARY] = conv_summary
    tables[lt.CONVERGENCE_ITEMS] = conv_items
    tables[lt.UNSTABLE_ITEMS] = item_table(grid)
    tables[lt.VERDICT] = verdict_summary(tables[lt.UNSTABLE_ITEMS], tables, opts)
    agreement_dists = {lt.AGREEMENT_COLLAPSE: extra["distributions"]}
    parsed = parsed_collapse(grid, opts)
    if parsed is not None:
        tables[lt.PARSED_COLLAPSE], agreement_dists[lt.PARSED_COLLAPSE] = parsed
    tables[lt.HEADLINES] = headlines(tables, agreement_dists, opts, rank_dists)


def analyse_pointwise(grid: JudgmentGrid, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Analyses 1-8 on the pointwise configurations of ``grid``: ``{"tables": ..., ...}``."""
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        per = _agreement_tables(grid, opts, tables, extra)
        _wording_tables(grid, opts, tables, extra, encode)
        _later_tables(grid, opts, tables, extra, per)
    return {"tables": tables, **extra}


def no_pointwise(opts: LotteryOptions) -> dict[str, Any]:
    """Sections 1-8 on a grid without pointwise judgments (a pairwise judge alone): n/a tables."""
    tables = {name: pd.DataFrame() for name in lt.POINTWISE_TABLES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        tables[lt.HEADLINES] = headlines(tables, {lt.AGREEMENT_COLLAPSE: {}}, opts, {})
    return {
        "tables": tables,
        "distributions": {},
        "similarity_error": "no pointwise judgments",
        "rank_distributions": {},
    }


def parsed_collapse(grid: JudgmentGrid, opts: LotteryOptions):
    """The paraphrase rows' agreement on labels parsed from the text, when a sampled fixed-prompt
    baseline uses that source (``sampled_verdict=parsed``): its comparison on the same source."""
    if opts.sampled_verdict != "parsed" or not grid.sampled_reference:
        return None
    # the repeats are not needed again: the paraphrase settings alone, under the parsed verdict
    table, dists = agreement_collapse(grid.paraphrase_grid("parsed"), opts, return_distributions=True)
    keep = table["setting"] == "paraphrases"
    return table[keep].reset_index(drop=True), {k: v for k, v in dists.items() if k[1] == "paraphrases"}


def configuration_table(grid: JudgmentGrid) -> pd.DataFrame:
    """One row per pointwise configuration: what it is, its variants, items and fixed baselines."""
    rows = []
    for conf in grid:
        g, para, first = conf.rows, conf.paraphrases, conf.first
        fixed = [f"{f.name.removeprefix('fixed ')} x{f.rows['sample_index'].nunique()}" for f in conf.fixed]
        rows.append(
            {
                "config_id": conf.config_id,
                "dataset": first["dataset"],
                "judge_family": first["judge_family"],
                "family_type": first["family_type"],
                "prompt_group": first["prompt_group"],
                "criterion": first["criterion"],
                "scale": first["scale"],
                "backbone": first["backbone"],
                "model": first["model"],
                "main_temperature": conf.main_temperature,
                "variants": ",".join(conf.order),
                "n_items": int(para["item_id"].nunique()),
                "fixed_baselines": "; ".join(fixed) or "none",
                "n_judgments": len(g),
                "n_with_human": int(para.drop_duplicates("item_id")["human"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)


class LotterySection(Section):
    """Analyses 1-8 and the headlines: the report's opening and sections 1-8."""

    name = "lottery"
    mode = None  # the label matrix
    tables = lt.TABLES

    def compute(
        self, grid: JudgmentGrid, opts: LotteryOptions, *, checked: Any = None, encode=None
    ) -> dict[str, Any]:
        return analyse_pointwise(grid, opts, encode=encode) if len(grid) else no_pointwise(opts)

    def metrics(self, tables: dict[str, pd.DataFrame]) -> dict[str, float]:
        out: dict[str, float] = {}
        for _, r in tables[lt.HEADLINES].iterrows():
            for suffix, col in (("", "ours"), ("_lo", "ours_lo"), ("_hi", "ours_hi")):
                v = r[col]
                if v is not None and np.isfinite(v):
                    out[f"{r['key']}{suffix}"] = float(v)
        return out

    def in_report(self, ctx: ReportContext) -> bool:
        """With a label-matrix configuration, or another mode's verdict rows: the report's opening (the
        verdict, the runs) is this section's, and a pairwise-only report leads with it."""
        return super().in_report(ctx) or not ctx.tables[lt.VERDICT].empty

    def render(self, R, ctx: ReportContext) -> None:
        from promptlottery.analysis.lottery.sections.lottery_report import render_lottery

        render_lottery(R, ctx)
