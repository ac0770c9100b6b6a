"""The judge card's sections (:mod:`promptlottery.analysis.card.build`): each a dict with its number, its
interval, its n and its source definition, or ``{"missing": reason}``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from promptlottery.metrics.alt_test import EPSILON
from promptlottery.metrics.bootstrap import bootstrap_ci
from promptlottery.metrics.correlation import spearman
from promptlottery.metrics.length_bias import length_slope

#: the alt-test's epsilon per dataset and why (Calderon et al. 2025, FAQ: experts 0.2, skilled 0.15,
#: crowd 0.1); a dataset not listed gets the skilled value
EPSILON_BY_DATASET = {
    "summeval": (EPSILON["expert"], "expert annotators (the alt-test paper's own SummEval choice)"),
    "topical_chat_usr": (EPSILON["skilled"], "USR's three trained annotators: skilled (rule of thumb)"),
    "hanna": (EPSILON["crowd"], "HANNA's Mechanical Turk raters: crowd"),
    "mt_bench_pairs": (EPSILON["expert"], "MT-Bench's expert votes (the alt-test paper's MT-Bench choice)"),
    "pandalm": (EPSILON["skilled"], "PandaLM's three annotators: skilled (rule of thumb)"),
}
SOURCES = {
    "lottery": "share of items whose verdict differs between two paraphrases (the lottery's `changed`); "
    "Spearman of each wording's verdict with the human mean",
    "position": "MT-Bench (Zheng et al. 2023, §3.3): a pair judged in both orders; inconsistent = the two "
    "verdicts differ; first-position rate = share of non-tie verdicts for the answer shown first",
    "length_pointwise": "within-human-label OLS slope of the judge's score on standardised response length "
    "(metrics.length_bias.length_slope); human label = the rounded human mean",
    "length_pairwise": "AlpacaEval 2 (Dubois et al. 2024, §3): logit P(1 wins) = theta + phi tanh(delta / sd), "
    "delta = len(2) - len(1); LC win rate = logistic(theta); phi < 0: the longer answer is favoured",
    "controls": "signal = shift under meaning-changing controls in their direction, noise = shift between "
    "paraphrase pairs, both on a [0, 1] scale (metrics.controls; Policy Invariance, arXiv 2605.06161)",
    "alt_test": "Calderon, Reichart & Dror (ACL 2025) §3: leave-one-annotator-out, one-sided paired t-tests "
    "against epsilon, Benjamini-Yekutieli at q = 0.05; pass: winning rate omega >= 0.5; rho = advantage probability",
    "corrected": "PPI++ (Angelopoulos, Duchi & Zrnic 2023, §2, Example 1) with the power-tuned lambda; "
    "human-only = CLT interval on the slice, judge-only = CLT interval on all judge scores",
}


#: the judged text whose length is measured, the first an item has (STS-B judges a `prediction`)
RESPONSE_FIELDS = ("response", "prediction")


def ci_bounds(r) -> list[float]:
    return [float(r.low), float(r.high)]


# ----------------------------------------------------------------------------- inputs


def item_texts(cfg: dict, item_ids) -> tuple[dict[str, dict], str | None]:
    """``{item_id: inputs}`` loaded with the run's dataset config, or ``({}, reason)``."""
    from promptlottery.data.registry import load_items

    ds = cfg.get("dataset") or {}
    name = ds.get("name")
    if not name:
        return {}, "the run's results.json names no dataset"
    opts = dict(ds.get("options") or {})
    if ds.get("path"):
        opts["path"] = ds["path"]
        opts["fields"] = ds.get("fields") or {}
    try:
        items = load_items(name, data_dir=(cfg.get("paths") or {}).get("data_dir"), **opts)
    except Exception as exc:  # noqa: BLE001 - the card names what it could not measure
        return {}, f"could not load the items of {name} ({type(exc).__name__}: {exc})"
    wanted = set(map(str, item_ids))
    return {it.id: it.inputs for it in items if it.id in wanted}, None


def scale_mapper(scale: tuple[float, float], human_range: tuple[float, float]):
    """Judge scores mapped linearly from the judge's scale onto the humans' range."""
    lo, hi = scale
    hlo, hhi = human_range
    if not (np.isfinite(hlo) and np.isfinite(hhi)):
        return lambda v: np.asarray(v, float)
    return lambda v: hlo + (np.asarray(v, float) - lo) / (hi - lo) * (hhi - hlo)


def observed_range(para: pd.DataFrame) -> tuple[float, float] | None:
    """The lowest and highest label the raters gave (``human_raters``), or None without raters."""
    r = rater_columns(para)
    vals = (
        pd.to_numeric(pd.Series(r.to_numpy().ravel()), errors="coerce").dropna()
        if not r.empty
        else pd.Series(dtype=float)
    )
    return (float(vals.min()), float(vals.max())) if len(vals) and vals.max() > vals.min() else None


def rater_matrix(para: pd.DataFrame, wordings: list[str], column: str = "value") -> pd.DataFrame:
    return para.pivot_table(index="item_id", columns="variant", values=column, aggfunc="first").reindex(
        columns=wordings
    )


def rater_columns(para: pd.DataFrame) -> pd.DataFrame:
    """Items x raters (by position in ``human_raters``) of the first wording's rows."""
    first = para.drop_duplicates("item_id").set_index("item_id")
    rows = {}
    for item, raw in first["human_raters"].items() if "human_raters" in first.columns else []:
        if isinstance(raw, str) and raw:
            vals = json.loads(raw)
            rows[item] = [np.nan if v is None else v for v in vals]
    if not rows:
        return pd.DataFrame()
    width = max(len(v) for v in rows.values())
    return pd.DataFrame({k: v + [np.nan] * (width - len(v)) for k, v in rows.items()}).T


# ----------------------------------------------------------------------------- lottery


def lottery_pointwise(para, wordings, scale, opts) -> dict:
    m = rater_matrix(para, wordings)
    lab = para.pivot_table(index="item_id", columns="variant", values="label", aggfunc="first").reindex(
        columns=wordings
    )
    ok = lab.notna().sum(axis=1) >= 2
    changed = np.array([len(set(r.dropna())) > 1 for _, r in lab[ok].iterrows()], dtype=float)
    if changed.size < 2:
        return {"missing": "fewer than 2 items with two paraphrase verdicts"}
    ch = bootstrap_ci(np.mean, changed, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
    human = para.drop_duplicates("item_id").set_index("item_id")["human"].reindex(m.index).astype(float)
    per = {}
    for w in wordings:
        x, y = m[w].to_numpy(float), human.to_numpy(float)
        keep = ~np.isnan(x) & ~np.isnan(y)
        if keep.sum() >= 3 and np.std(x[keep]) > 0 and np.std(y[keep]) > 0:
            r = bootstrap_ci(
                lambda a, b: spearman(a, b),
                x[keep],
                y[keep],
                n_resamples=opts.n_resamples,
                level=opts.level,
                seed=opts.seed,
                vectorized=False,
            )
            per[w] = {
                "spearman": r.estimate,
                "ci": ci_bounds(r),
                "n": int(keep.sum()),
                "mean": float(np.nanmean(x)),
            }
        else:
            per[w] = {
                "spearman": float("nan"),
                "ci": [float("nan")] * 2,
                "n": int(keep.sum()),
                "mean": float(np.nanmean(x)),
                "note": "undefined: a constant verdict or human label",
            }
    return {
        "changed": ch.estimate,
        "changed_ci": ci_bounds(ch),
        "n": int(changed.size),
        "per_wording": per,
        "source": SOURCES["lottery"],
    }


# ----------------------------------------------------------------------------- length


def length_pointwise(para, wordings, texts, note, opts) -> dict:
    if not texts:
        return {"missing": note or "no item texts"}
    per = {}
    for w in wordings:
        rows = para[para["variant"] == w]
        field = next((f for f in RESPONSE_FIELDS if any(f in t for t in texts.values())), None)
        if field is None:
            return {"missing": f"the items have none of the texts {', '.join(RESPONSE_FIELDS)}"}
        length = np.array([len(texts.get(i, {}).get(field, "")) or np.nan for i in rows["item_id"]], float)
        r = length_slope(
            rows["cont"].to_numpy(float),
            length,
            rows["human"].round().to_numpy(),
            n_resamples=opts.n_resamples,
            level=opts.level,
            seed=opts.seed,
        )
        per[w] = {"slope": r.estimate, "ci": ci_bounds(r), "n": r.n, "sd_length_chars": r.extra["sd_length"]}
    return {
        "per_wording": per,
        "unit": f"judge score points per sd of the `{field}` text's length in characters (logprob-weighted score `cont`)",
        "source": SOURCES["length_pointwise"],
    }
