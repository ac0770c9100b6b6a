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
from promptlottery.analysis.pairwise import is_pairwise, pairwise_tables
from promptlottery.analysis.parallel import analyse_configurations
from promptlottery.analysis.verdict import item_table, verdict_summary
from promptlottery.analysis.wording import (
    prompt_similarities,
    similarity_vs_stability,
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
    """Run analyses 1-8 on a judgments table with verdicts; returns ``{"tables": ..., ...}``.

    Pairwise rows (``judge_mode == "pairwise"``) get the "Pairwise judges" tables instead
    (:mod:`~promptlottery.analysis.pairwise`); analyses 1-8 run on the other rows.
    """
    kw = dict(reference=opts.reference, temperature=opts.temperature)
    boot = dict(n_resamples=opts.n_resamples, seed=opts.seed, level=opts.level)
    pair = is_pairwise(df)
    pairwise = pairwise_tables(df[pair], verdict=opts.verdict, **kw, **boot) if pair.any() else {}
    if pair.any():
        df = df[~pair]
        if df.empty:  # a pairwise judge alone: sections 1-8 say n/a
            return _with_pairwise(_no_pointwise(opts), pairwise)
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
    return _with_pairwise({"tables": tables, **extra}, pairwise)


#: the tables of analyses 1-8 (empty when there is no pointwise judgment)
POINTWISE_TABLES = (
    "configurations label_distributions agreement_collapse agreement_by_task_type variant_human_correlation "
    "best_variant_counts variant_agreement prompt_similarities similarity_stability similarity_points "
    "wording_dimensions rank_summary rank_pairs rank_systems rank_trajectories aggregation_vs_humans "
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
