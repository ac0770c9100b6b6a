"""Analyses 1-8 of the lottery stage on a judgments table with verdicts (no I/O)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.agreement import agreement_by_task_type, agreement_collapse
from promptlottery.analysis.ensembles import convergence_analysis, ensemble_designs, paraphrase_rows_all
from promptlottery.analysis.headlines import headlines
from promptlottery.analysis.humans import best_variant_counts
from promptlottery.analysis.labels import label_table
from promptlottery.analysis.options import LotteryOptions
from promptlottery.analysis.parallel import analyse_configurations
from promptlottery.analysis.verdict import item_table, verdict_summary
from promptlottery.analysis.wording import (
    cross_model_agreement,
    prompt_similarities,
    similarity_vs_stability,
    strictness_regression,
    variant_texts,
    wording_dimensions,
)
from promptlottery.judging.table import (
    GREEDY_BELOW,
    AnalysisError,
    add_verdicts,
    configurations,
    fixed_settings,
    group_files,
    main_temperature,
    paraphrase_rows,
    variant_order,
)
from promptlottery.metrics import UndefinedMetricWarning

logger = logging.getLogger(__name__)


def analyse(df: pd.DataFrame, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Run analyses 1-8 on a judgments table with verdicts; returns ``{"tables": ..., ...}``."""
    kw = dict(reference=opts.reference, temperature=opts.temperature)
    boot = dict(n_resamples=opts.n_resamples, seed=opts.seed, level=opts.level)
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        tables["configurations"] = configuration_table(df, opts)
        tables["label_distributions"] = label_table(
            df, collapse_share=opts.thresholds["collapse_share"], **kw
        )
        per = analyse_configurations(
            df, opts.n_jobs, thresholds=opts.thresholds, rank_score=opts.rank_score, kw=kw, boot=boot
        )
        collapse, dists = per["tables"]["agreement_collapse"], per["distributions"]
        tables["agreement_collapse"] = collapse
        extra["distributions"] = dists
        tables["agreement_by_task_type"] = agreement_by_task_type(collapse, dists, level=opts.level)
        corr = per["tables"]["variant_human_correlation"]
        tables["variant_human_correlation"] = corr
        tables["best_variant_counts"] = best_variant_counts(corr, by=opts.best_by, reference=opts.reference)
        va = per["tables"]["variant_agreement"]
        tables["variant_agreement"] = va
        texts = variant_texts(df["prompt_group"].unique(), files=group_files(df))
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
        cross = cross_model_agreement(df, temperature=opts.temperature)
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
        tables["ensemble_designs"] = ensemble_designs(df, max_judges=opts.max_ensemble_judges, **kw, **boot)
        conv_summary, conv_items = convergence_analysis(df, **kw, **boot)
        tables["convergence_summary"] = conv_summary
        tables["convergence_items"] = conv_items
        tables["unstable_items"] = item_table(df, **kw)
        tables["verdict"] = verdict_summary(tables["unstable_items"], tables, opts)
        agreement_dists = {"agreement_collapse": dists}
        parsed = parsed_collapse(df, opts, kw, boot)
        if parsed is not None:
            tables["agreement_collapse_parsed"], agreement_dists["agreement_collapse_parsed"] = parsed
        tables["headlines"] = headlines(tables, agreement_dists, opts, rank_dists)
        if opts.human_ratings or opts.human_raters:  # the human-baseline section (issue 26)
            from promptlottery.human.analysis import human_tables_for_report

            tables.update(human_tables_for_report(df, opts))
    return {"tables": tables, **extra}


def parsed_collapse(df: pd.DataFrame, opts: LotteryOptions, kw: dict, boot: dict):
    """The paraphrase rows' agreement on labels parsed from the text, when a sampled fixed-prompt
    baseline uses that source (``sampled_verdict=parsed``): its comparison on the same source."""
    sampled = df["temperature"].astype(float) >= GREEDY_BELOW
    if opts.sampled_verdict != "parsed" or not (sampled & (df["variant"] == opts.reference)).any():
        return None
    para = paraphrase_rows_all(df, opts.temperature)  # the repeats are not needed again
    table, dists = agreement_collapse(
        add_verdicts(para, "parsed"), **kw, **boot, thresholds=opts.thresholds, return_distributions=True
    )
    keep = table["setting"] == "paraphrases"
    return table[keep].reset_index(drop=True), {k: v for k, v in dists.items() if k[1] == "paraphrases"}


def configuration_table(df: pd.DataFrame, opts: LotteryOptions) -> pd.DataFrame:
    rows = []
    for cid, g in configurations(df):
        para = paraphrase_rows(g, opts.temperature)
        first = g.iloc[0]
        fixed = [
            f"{f.name.removeprefix('fixed ')} x{f.rows['sample_index'].nunique()}"
            for f in fixed_settings(g, opts.reference)
        ]
        rows.append(
            {
                "config_id": cid,
                "dataset": first["dataset"],
                "judge_family": first["judge_family"],
                "family_type": first["family_type"],
                "prompt_group": first["prompt_group"],
                "criterion": first["criterion"],
                "scale": first["scale"],
                "backbone": first["backbone"],
                "model": first["model"],
                "main_temperature": main_temperature(g, opts.temperature),
                "variants": ",".join(variant_order(para["variant"], opts.reference)),
                "n_items": int(para["item_id"].nunique()),
                "fixed_baselines": "; ".join(fixed) or "none",
                "n_judgments": len(g),
                "n_with_human": int(para.drop_duplicates("item_id")["human"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)
