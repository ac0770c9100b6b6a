"""The budget report's rows for the PromptEval-style wording model (:mod:`.wording_model`).

For one full configuration: the cell outcome (verdict agrees with the human label mapped onto the
scale, given ``analysis.human_range``; else with the item's plurality verdict), the wordings'
covariates (their tags and an embedding of their text, from the configuration's prompt group), the
simulation over budgets, and the full grid's own quantiles with their interval.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.wording_model import (
    QUANTILES,
    agreement_matrix,
    agreement_quantiles,
    wording_covariates,
)
from promptlottery.analysis.budget.wording_model_simulation import (
    simulate_wording_model,
    split_items,
    tune_penalties,
)
from promptlottery.judging.table import AnalysisError
from promptlottery.prompts.groups import load_group, load_group_file
from promptlottery.prompts.requests import to_scale_label
from promptlottery.prompts.validation import variant_texts
from promptlottery.tracking.tables import markdown_table

logger = logging.getLogger(__name__)

__all__ = [
    "covariates_of",
    "group_of_rows",
    "model_full_rows",
    "model_sparse_summaries",
    "wording_model_rows",
    "wording_model_section",
    "wording_model_sparse",
    "wording_sparse_lines",
]


def _group_of(config):
    return group_of_rows(config.paraphrases)


def group_of_rows(rows: pd.DataFrame):
    """The prompt group a configuration's judgment rows were judged with (its file where one was given)."""
    file = rows["group_file"].dropna().unique() if "group_file" in rows else []
    file = [f for f in file if f]
    return load_group_file(file[0]) if file else load_group(str(rows["prompt_group"].iloc[0]))


def _outcome(config, labels: pd.DataFrame, codes: np.ndarray, human_range) -> tuple[np.ndarray, str]:
    if human_range is None:
        return agreement_matrix(codes)
    humans = config.humans(labels.index)
    if not np.isfinite(humans).all():
        raise AnalysisError(
            f"{config.config_id}: analysis.human_range is set but some items have no human label"
        )
    want = np.array(
        [to_scale_label(float(h), tuple(human_range), config.scale) for h in humans], dtype=object
    )
    agree = (labels.to_numpy(dtype=object) == want[:, None]).astype(float)
    return (
        agree,
        f"argmax label == the human score mapped onto the scale from {list(human_range)} (nearest label)",
    )


def _covariates(config, variants, opts):
    return covariates_of(config.config_id, _group_of(config), variants, opts)


def covariates_of(config_id: str, group, variants, opts):
    """The wordings' covariates (tags, embedding) from their prompt group, and what they are."""
    texts = variant_texts(group)
    missing = [v for v in variants if v not in group.variants]
    if missing:
        raise AnalysisError(f"{config_id}: wordings {missing} are not in prompt group {group.id}")
    return wording_covariates(
        [texts[v] for v in variants],
        [group.variants[v].tags for v in variants],
        embedding=opts.model_embedding,
    )


def wording_model_sparse(config, labels: pd.DataFrame, codes: np.ndarray, opts) -> list[dict[str, Any]]:
    """The model on a **sparse** grid's judged cells (no full grid to compare with): per rank of
    ``analysis.model_ranks``, the penalties tuned on the validation items, and on the reported items
    each wording's agreement (judged cells as judged, the rest predicted), its quantiles over the
    wordings with their item-bootstrap interval (``analysis.model_resamples`` refits), and the
    no-model baseline (each wording's mean over its judged cells)."""
    agree, outcome = _outcome(config, labels, codes, opts.human_range)
    agree = np.where(np.isfinite(codes), agree, np.nan)  # an unjudged cell is unknown, not a miss
    variants = list(labels.columns)
    x, what = _covariates(config, variants, opts)
    calls = (int(np.isfinite(codes).sum()), float(np.isfinite(codes).mean()))
    return model_sparse_summaries(config.config_id, agree, variants, x, what, outcome, calls, opts)


def model_sparse_summaries(config_id, agree, variants, x, what, outcome, calls, opts) -> list[dict[str, Any]]:
    """:func:`wording_model_sparse` on an items x wordings 0/1 outcome (NaN: not judged); ``calls``:
    the grid's judged calls and their share of the full grid's."""
    val, rep = split_items(len(agree), opts.model_validation_share, opts.seed)
    out = []
    with np.errstate(invalid="ignore"):
        observed = np.nanmean(agree[rep], axis=0)
    for rank in opts.model_ranks:
        pen = tune_penalties(agree[val], x, rank=rank, seed=opts.seed)
        est = agreement_quantiles(
            agree[rep], x, rank=rank, n_resamples=opts.model_resamples, level=opts.level, seed=opts.seed,
            lam=pen["lam"], lam_rank=pen["lam_rank"],
        )  # fmt: skip
        out.append({
            "config_id": config_id, "outcome": outcome, "covariates": what, "rank": int(rank),
            "calls": calls[0], "calls_share": calls[1],
            "n_reported": len(rep), "n_validation": len(val), "lam": pen["lam"], "lam_rank": pen["lam_rank"],
            "tuned": pen["tuned"], "judged_per_wording": dict(zip(variants, np.isfinite(agree[rep]).sum(0).tolist())),
            "per_wording": dict(zip(variants, np.round(est["per_wording"], 4).tolist())),
            "observed_per_wording": dict(zip(variants, np.round(observed, 4).tolist())),
            "quantiles": {f"q{round(100 * q):02d}": float(v) for q, v in zip(QUANTILES, est["quantiles"])},
            "lo": est["lo"].tolist(), "hi": est["hi"].tolist(), "converged": bool(est["converged"]),
            "observed_quantiles": np.quantile(observed[np.isfinite(observed)], QUANTILES).tolist(),
        })  # fmt: skip
    return out


def wording_sparse_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """The sparse report's lines for :func:`wording_model_sparse`."""
    lines = [
        "",
        "## Many wordings: the PromptEval-style model on this sparse grid",
        "",
        "Per wording, its agreement (judged cells as judged, the rest predicted by item + wording + "
        "covariate effects [+ a rank-r interaction]; ours, after PromptEval's ExtendedRaschModel), on the "
        "reported items (penalties tuned on the validation items); quantiles over the wordings with their "
        "item-bootstrap interval (model refitted). `observed`: each wording's mean over its judged cells "
        "(no model). Every wording's value: `tables/wording_model_sparse.json`.",
        "",
    ]
    for s in summaries:
        qs = ", ".join(
            f"{k} {v:.3f} [{lo:.3f}, {hi:.3f}]"
            for (k, v), lo, hi in zip(s["quantiles"].items(), s["lo"], s["hi"])
        )
        obs = ", ".join(f"{k} {v:.3f}" for k, v in zip(s["quantiles"], s["observed_quantiles"]))
        lines.append(
            f"- `{s['config_id']}`, rank {s['rank']}: {s['calls']} judged cells ({100 * s['calls_share']:.1f}% "
            f"of the grid); outcome {s['outcome']}; covariates {s['covariates']}; {s['n_reported']} reported "
            f"items, {s['n_validation']} validation items (lam = {s['lam']:g}"
            + (f", lam_rank = {s['lam_rank']:g}" if s["rank"] else "")
            + f"). Quantiles over the {len(s['per_wording'])} wordings: {qs}. Observed cells' means: {obs}."
        )
    return lines


def wording_model_rows(
    config, labels: pd.DataFrame, codes: np.ndarray, opts
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The simulation's rows and the full grid's own estimate (``summary``) for one configuration."""
    agree, outcome = _outcome(config, labels, codes, opts.human_range)
    variants = list(labels.columns)
    x, what = _covariates(config, variants, opts)
    return model_full_rows(config.config_id, agree, list(labels.index), variants, x, what, outcome, opts)


def model_full_rows(
    config_id, agree, items, variants, x, what, outcome, opts, mask_of=None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`wording_model_rows` on a full items x wordings 0/1 outcome; ``mask_of(budget, seed)``:
    a plan's observed cells and its share of the calls (default: random cells of the grid)."""
    logger.info("wording model config=%s covariates=%s outcome=%s", config_id, what, outcome)
    table = simulate_wording_model(
        agree, x, items=items, variants=variants, budgets=[float(b) for b in opts.budgets],
        ranks=tuple(opts.model_ranks), n_sim=opts.model_n_sim, n_resamples=opts.model_resamples,
        level=opts.level, seed=opts.seed, validation_share=opts.model_validation_share, mask_of=mask_of,
    )  # fmt: skip
    # the full grid's own figures: penalties tuned on the validation items, reported on the others
    val, rep = split_items(len(agree), opts.model_validation_share, opts.seed)
    pen = tune_penalties(agree[val], x, rank=0, seed=opts.seed)
    full = agreement_quantiles(
        agree[rep], x, rank=0, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed,
        lam=pen["lam"], lam_rank=pen["lam_rank"],
    )  # fmt: skip
    summary = {
        "config_id": config_id,
        "outcome": outcome,
        "covariates": what,
        "items": "reported",
        "n_reported": len(rep),
        "n_validation": len(val),
        "validation_items": [str(items[i]) for i in val],
        "lam": pen["lam"],
        "tuned": pen["tuned"],
        "per_wording": dict(zip(variants, np.round(full["per_wording"], 4).tolist())),
        "quantiles": {f"q{round(100 * q):02d}": float(v) for q, v in zip(QUANTILES, full["quantiles"])},
        "lo": full["lo"].tolist(),
        "hi": full["hi"].tolist(),
    }
    return table.assign(config_id=config_id, n_items=len(items)), summary


def wording_model_section(table: pd.DataFrame, summaries: list[dict[str, Any]]) -> list[str]:
    """The budget report's markdown section for the wording model."""
    lines = [
        "## Many wordings: the PromptEval-style model",
        "",
        "Per wording, its agreement (the cell outcome below) estimated from a sparse grid by a logistic "
        "model of item effect + wording effect + wording covariates (tags, embedding) [+ a rank-r item x "
        "wording interaction] (ours, after PromptEval's ExtendedRaschModel; judged cells kept, unjudged "
        "ones predicted), and the quantiles 5/25/50/75/95% of that agreement over the wordings. Plans: "
        "random cells at each budget (no anchor, no fully judged items); `coverage`: the share of plans "
        "whose interval (items resampled, model refitted) holds the full grid's empirical quantile. "
        "`observed cells' means (no model)`: each wording's mean over its judged cells, the baseline. "
        "`n_plans_without_cells`: plans that judged no cell of the reported items (no estimate; the "
        "figures are over the other plans, n/a when none is left).",
        "",
    ]
    for s in summaries:
        qs = ", ".join(
            f"{k} {v:.3f} [{lo:.3f}, {hi:.3f}]"
            for (k, v), lo, hi in zip(s["quantiles"].items(), s["lo"], s["hi"])
        )
        lines += [
            f"- `{s['config_id']}`: outcome {s['outcome']}; covariates {s['covariates']}. Full grid's "
            f"quantiles over wordings on the {s['n_reported']} reported items (penalty lam = {s['lam']:g}, "
            f"tuned on the {s['n_validation']} validation items) [95% item bootstrap]: {qs}.",
        ]
    cols = ("config_id", "items", "n_reported", "n_validation", "method", "budget", "calls_share", "lam",
            "lam_rank", "statistic", "full", "mean_estimate", "rmse", "coverage",
            "n_plans_without_cells")  # fmt: skip
    lines += ["", markdown_table(table, {c: c for c in cols})]
    return lines
