"""Analyses 1-8 of the lottery stage on a judgments table with verdicts (no I/O)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.agreement import agreement_by_task_type, agreement_collapse
from promptlottery.analysis.ensembles import convergence_analysis, ensemble_designs
from promptlottery.analysis.headlines import headlines
from promptlottery.analysis.humans import best_variant_counts
from promptlottery.analysis.labels import label_table
from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.sections.pairwise import pairwise_tables
from promptlottery.analysis.parallel import analyse_configurations
from promptlottery.analysis.repeats import repeats_vs_wordings
from promptlottery.analysis.verdict import item_table, verdict_summary
from promptlottery.analysis.wording import (
    cross_model_agreement,
    prompt_similarities,
    similarity_vs_stability,
    strictness_regression,
    variant_texts,
    wording_dimensions,
)
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import UndefinedMetricWarning

logger = logging.getLogger(__name__)


def analyse(grid: JudgmentGrid, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Run analyses 1-8 on a judgment grid; returns ``{"tables": ..., ...}``.

    Pairwise judgments (the grid's own verdict kind, ``grid.pairwise``) get the "Pairwise judges"
    tables (:mod:`~promptlottery.analysis.pairwise`); analyses 1-8 run on the pointwise configurations.
    """
    pairwise = {}
    if grid.pairwise:
        rows = pd.concat(list(grid.pairwise.values()), ignore_index=True)
        pairwise = pairwise_tables(
            rows,
            verdict=grid.verdict,
            reference=grid.reference,
            temperature=grid.temperature,
            **opts.resampling,
        )
        if not len(grid):  # a pairwise judge alone: sections 1-8 say n/a
            return _with_pairwise(_no_pointwise(opts), pairwise)
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        tables["configurations"] = configuration_table(grid)
        tables["label_distributions"] = label_table(grid, opts)
        per = analyse_configurations(grid, opts)
        collapse, dists = per["tables"]["agreement_collapse"], per["distributions"]
        tables["agreement_collapse"] = collapse
        extra["distributions"] = dists
        tables["agreement_by_task_type"] = agreement_by_task_type(collapse, dists, level=opts.level)
        corr = per["tables"]["variant_human_correlation"]
        tables["variant_human_correlation"] = corr
        tables["best_variant_counts"] = best_variant_counts(corr, by=opts.best_by, reference=opts.reference)
        va = per["tables"]["variant_agreement"]
        tables["variant_agreement"] = va
        texts = variant_texts(grid.prompt_groups(), files=grid.group_files())
        try:
            if opts.embeddings == "none":
                raise AnalysisError("analysis.embeddings=none")
            sims = prompt_similarities(texts, reference=opts.reference, encode=encode)
            extra["similarity_error"] = None
        except Exception as exc:  # noqa: BLE001 - the encoder is optional: say why and go on
            logger.warning("prompt similarities unavailable: %s", exc)
            sims = texts[["prompt_group", "variant"]].assign(similarity_to_ref=np.nan)
            extra["similarity_error"] = f"{type(exc).__name__}: {exc}"
        tables["prompt_similarities"] = sims
        sim_summary, sim_points = similarity_vs_stability(
            va, sims, reference=opts.reference, level=opts.level
        )
        tables["similarity_stability"] = sim_summary
        tables["similarity_points"] = sim_points
        tables["wording_dimensions"] = wording_dimensions(
            va, texts, n_permutations=opts.n_permutations, seed=opts.seed, level=opts.level
        )
        # Appendix B / Table 12's outcome: cross-model score agreement per paraphrase
        cross = cross_model_agreement(grid)
        tables["cross_model_agreement"] = cross
        tables["wording_dimensions_cross_model"] = wording_dimensions(
            cross,
            texts,
            metric="cross_model",
            n_permutations=opts.n_permutations,
            seed=opts.seed,
            level=opts.level,
        )
        tables["format_strictness_regression"] = strictness_regression(cross, texts)
        for k in ("summary", "pairs", "systems", "trajectories"):
            tables[f"rank_{k}"] = per["tables"][f"rank_{k}"]
        rank_dists = extra["rank_distributions"] = per["rank_distributions"]
        tables["aggregation_vs_humans"] = per["tables"]["aggregation_vs_humans"]
        tables["ensemble_designs"] = ensemble_designs(grid, opts)
        tables["repeats_vs_wordings"] = repeats_vs_wordings(grid, opts)  # §6: repeated judging vs wordings
        conv_summary, conv_items = convergence_analysis(grid, opts)
        tables["convergence_summary"] = conv_summary
        tables["convergence_items"] = conv_items
        tables["unstable_items"] = item_table(grid)
        tables["verdict"] = verdict_summary(tables["unstable_items"], tables, opts)
        agreement_dists = {"agreement_collapse": dists}
        parsed = parsed_collapse(grid, opts)
        if parsed is not None:
            tables["agreement_collapse_parsed"], agreement_dists["agreement_collapse_parsed"] = parsed
        tables["headlines"] = headlines(tables, agreement_dists, opts, rank_dists)
        if opts.human_ratings or opts.human_raters:  # the human-baseline section (issue 26)
            from promptlottery.human.analysis import human_tables_for_report

            tables.update(human_tables_for_report(grid.judgments, opts))
    return _with_pairwise({"tables": tables, **extra}, pairwise)


#: the tables of analyses 1-8 (empty when there is no pointwise judgment)
POINTWISE_TABLES = (
    "configurations label_distributions agreement_collapse agreement_by_task_type variant_human_correlation "
    "best_variant_counts variant_agreement prompt_similarities similarity_stability similarity_points "
    "wording_dimensions cross_model_agreement wording_dimensions_cross_model format_strictness_regression "
    "rank_summary rank_pairs rank_systems rank_trajectories aggregation_vs_humans "
    "ensemble_designs convergence_summary convergence_items unstable_items verdict"
).split()


def _no_pointwise(opts: LotteryOptions) -> dict[str, Any]:
    tables = {name: pd.DataFrame() for name in POINTWISE_TABLES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        tables["headlines"] = headlines(tables, {"agreement_collapse": {}}, opts, {})
    return {
        "tables": tables,
        "distributions": {},
        "similarity_error": "no pointwise judgments",
        "rank_distributions": {},
    }


def _with_pairwise(result: dict[str, Any], pairwise: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """The pairwise tables added; their verdict sentences follow the pointwise ones."""
    tables = result["tables"]
    if not pairwise.get("pairwise_verdict", pd.DataFrame()).empty:
        tables["verdict"] = pd.concat([tables["verdict"], pairwise["pairwise_verdict"]], ignore_index=True)
    tables.update(pairwise)
    return result


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
