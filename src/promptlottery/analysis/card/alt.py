"""The judge card's alt-test section (:mod:`promptlottery.analysis.card.build`): can the judge replace the
annotators? :func:`~promptlottery.metrics.alt_test.alt_test` per wording, on items with >= 3 raters.
Pointwise the judge's score is mapped onto the humans' range and aligned by negative RMSE; pairwise
the order-12 verdict is one of three discrete labels (response 1, response 2, tie) aligned by
accuracy (the paper's alignment for discrete labels, §3: the share of the other annotators with the
same label; a tie is a label like the others)."""

from __future__ import annotations

import warnings

import numpy as np

from promptlottery.analysis.card.sections import EPSILON_BY_DATASET, SOURCES, rater_columns, rater_matrix
from promptlottery.metrics.alt_test import EPSILON, alt_test


def epsilon_for(dataset: str, opts) -> tuple[float, str]:
    if opts.epsilon is not None:
        return float(opts.epsilon), "given (--epsilon)"
    return EPSILON_BY_DATASET.get(
        dataset, (EPSILON["skilled"], "skilled annotators (rule of thumb; dataset not listed)")
    )


def alt_test_pointwise(para, wordings, dataset, to_human, opts) -> dict:
    raters = rater_columns(para)
    if raters.empty or raters.notna().sum(axis=1).max() < 3:
        return {"missing": "fewer than 3 human raters per item (the alt-test asks for >= 3)"}
    eps, why = epsilon_for(dataset, opts)
    m = rater_matrix(para, wordings).reindex(raters.index)
    per = {}
    for w in wordings:
        r = alt_test(
            to_human(m[w].to_numpy(float)),
            raters.to_numpy(float),
            epsilon=eps,
            scoring="neg_rmse",
            min_items_per_human=min(30, len(raters)),
        )
        f = to_human(m[w].to_numpy(float))
        per[w] = {
            "winning_rate": r.winning_rate,
            "advantage_probability": r.advantage_probability,
            "rho_ci": rho_ci(f, raters.to_numpy(float), eps, "neg_rmse", opts),
            "passed": r.passed,
            "n_items": r.n_items,
            "n_annotators": r.n_annotators,
            "p_values": [v["p_value"] for v in r.per_annotator.values()],
        }
    return {
        **few_items_note(len(raters)),
        "per_wording": per,
        "epsilon": eps,
        "epsilon_reason": why,
        "scoring": "neg_rmse (judge mapped onto the humans' range)",
        "source": SOURCES["alt_test"],
    }


def few_items_note(n: int) -> dict:
    if n >= 30:
        return {}
    return {
        "note": f"{n} items < the paper's 30 a annotator: each annotator is tested on all {n}, and the t-test's normality is doubtful"
    }


def rho_ci(
    f: np.ndarray, h: np.ndarray, eps: float, scoring: str, opts, n_resamples: int = 200
) -> list[float]:
    """Percentile bootstrap interval of the advantage probability rho, resampling items."""
    rng = np.random.default_rng(opts.seed)
    vals = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_resamples):
            idx = rng.integers(0, f.size, f.size)
            r = alt_test(f[idx], h[idx], epsilon=eps, scoring=scoring, min_items_per_human=min(30, f.size))
            vals.append(r.advantage_probability)
    vals = np.asarray(vals, float)
    vals = vals[np.isfinite(vals)]
    if not vals.size:
        return [float("nan"), float("nan")]
    lo, hi = np.percentile(vals, [50 * (1 - opts.level), 50 * (1 + opts.level)])
    return [float(lo), float(hi)]
