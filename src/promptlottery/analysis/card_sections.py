"""The judge card's sections (:mod:`promptlottery.analysis.card`): each a dict with its number, its
interval, its n and its source definition, or ``{"missing": reason}``."""

from __future__ import annotations

import json
import warnings
from itertools import combinations

import numpy as np
import pandas as pd

from promptlottery.metrics.alt_test import EPSILON, alt_test
from promptlottery.metrics.bootstrap import bootstrap_ci
from promptlottery.metrics.correlation import spearman
from promptlottery.metrics.human_corrected import human_only_mean, judge_only_mean, ppi_mean, rogan_gladen
from promptlottery.metrics.length_bias import length_controlled_win_rate, length_slope

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


def _ci(r) -> list[float]:
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
    r = _raters(para)
    vals = (
        pd.to_numeric(pd.Series(r.to_numpy().ravel()), errors="coerce").dropna()
        if not r.empty
        else pd.Series(dtype=float)
    )
    return (float(vals.min()), float(vals.max())) if len(vals) and vals.max() > vals.min() else None


def _matrix(para: pd.DataFrame, wordings: list[str], column: str = "value") -> pd.DataFrame:
    return para.pivot_table(index="item_id", columns="variant", values=column, aggfunc="first").reindex(
        columns=wordings
    )


def _raters(para: pd.DataFrame) -> pd.DataFrame:
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
    m = _matrix(para, wordings)
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
                "ci": _ci(r),
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
        "changed_ci": _ci(ch),
        "n": int(changed.size),
        "per_wording": per,
        "source": SOURCES["lottery"],
    }


def _pref_value(preferred) -> float:
    return {"1": 1.0, "2": 0.0, "tie": 0.5}.get(preferred, np.nan)


def lottery_pairwise(para, wordings, opts) -> dict:
    p12 = para[para["order"] == "12"]
    lab = p12.pivot_table(index="item_id", columns="variant", values="preferred", aggfunc="first").reindex(
        columns=wordings
    )
    ok = lab.notna().sum(axis=1) >= 2
    changed = np.array([len(set(r.dropna())) > 1 for _, r in lab[ok].iterrows()], dtype=float)
    if changed.size < 2:
        return {"missing": "fewer than 2 pairs with two paraphrase verdicts"}
    ch = bootstrap_ci(np.mean, changed, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
    hum = p12.drop_duplicates("item_id").set_index("item_id")["human_preferred"].reindex(lab.index)
    per = {}
    for w in wordings:
        keep = lab[w].notna() & hum.notna()
        agree = (lab[w][keep] == hum[keep]).to_numpy(float)
        if agree.size >= 2:
            r = bootstrap_ci(np.mean, agree, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
            per[w] = {"agreement": r.estimate, "ci": _ci(r), "n": int(agree.size)}
    return {
        "changed": ch.estimate,
        "changed_ci": _ci(ch),
        "n": int(changed.size),
        "per_wording": per,
        "source": SOURCES["lottery"].replace(
            "Spearman of each wording's verdict with the human mean",
            "agreement with the human majority (order 12)",
        ),
    }


def position_bias(para, wordings, opts) -> dict:
    per = {}
    for w in wordings:
        rows = para[para["variant"] == w]
        wide = rows.pivot_table(index="item_id", columns="order", values="preferred", aggfunc="first")
        if not {"12", "21"} <= set(wide.columns):
            continue
        wide = wide.dropna()
        incons = (wide["12"] != wide["21"]).to_numpy(float)
        shown_first = np.r_[(wide["12"] == "1").to_numpy(float), (wide["21"] == "2").to_numpy(float)]
        decided = np.r_[(wide["12"] != "tie").to_numpy(bool), (wide["21"] != "tie").to_numpy(bool)]
        if incons.size < 2 or decided.sum() < 2:
            continue
        a = bootstrap_ci(np.mean, incons, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed)
        b = bootstrap_ci(
            np.mean, shown_first[decided], n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed
        )
        per[w] = {
            "inconsistent": a.estimate,
            "inconsistent_ci": _ci(a),
            "first_rate": b.estimate,
            "first_rate_ci": _ci(b),
            "n": int(incons.size),
        }
    if not per:
        return {"missing": "no wording judged in both orders (judge.position_swap=false?)"}
    return {"per_wording": per, "source": SOURCES["position"]}


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
        per[w] = {"slope": r.estimate, "ci": _ci(r), "n": r.n, "sd_length_chars": r.extra["sd_length"]}
    return {
        "per_wording": per,
        "unit": f"judge score points per sd of the `{field}` text's length in characters (logprob-weighted score `cont`)",
        "source": SOURCES["length_pointwise"],
    }


def length_pairwise(para, wordings, texts, note, opts) -> dict:
    if not texts:
        return {"missing": note or "no item texts"}
    per = {}
    for w in wordings:
        rows = para[para["variant"] == w].assign(p=lambda d: d["preferred"].map(_pref_value))
        pref = rows.groupby("item_id")["p"].mean()  # the two orders averaged
        l1 = np.array([len(texts.get(i, {}).get("response_a", "")) for i in pref.index], float)
        l2 = np.array([len(texts.get(i, {}).get("response_b", "")) for i in pref.index], float)
        hum = (
            rows.drop_duplicates("item_id")
            .set_index("item_id")["human_preferred"]
            .reindex(pref.index)
            .map(_pref_value)
        )
        r = length_controlled_win_rate(
            pref.to_numpy(), l1, l2, n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed
        )
        longer1 = l1 > l2
        dec = (pref.to_numpy() != 0.5) & (l1 != l2) & ~np.isnan(pref.to_numpy())
        longer_wins = (
            float(np.mean((pref.to_numpy()[dec] > 0.5) == longer1[dec])) if dec.any() else float("nan")
        )
        hdec = (hum.to_numpy() != 0.5) & (l1 != l2) & ~np.isnan(hum.to_numpy())
        h_longer = (
            float(np.mean((hum.to_numpy()[hdec] > 0.5) == longer1[hdec])) if hdec.any() else float("nan")
        )
        per[w] = {
            "lc_win_rate_1": r.estimate,
            "ci": _ci(r),
            "win_rate_1": r.extra["win_rate"],
            "phi": r.extra["phi"],
            "phi_ci": [r.extra["phi_low"], r.extra["phi_high"]],
            "longer_wins_judge": longer_wins,
            "longer_wins_humans": h_longer,
            "n": r.n,
        }
    return {"per_wording": per, "source": SOURCES["length_pairwise"]}


# ----------------------------------------------------------------------------- alt-test


def _epsilon(dataset: str, opts) -> tuple[float, str]:
    if opts.epsilon is not None:
        return float(opts.epsilon), "given (--epsilon)"
    return EPSILON_BY_DATASET.get(
        dataset, (EPSILON["skilled"], "skilled annotators (rule of thumb; dataset not listed)")
    )


def alt_test_pointwise(para, wordings, dataset, to_human, opts) -> dict:
    raters = _raters(para)
    if raters.empty or raters.notna().sum(axis=1).max() < 3:
        return {"missing": "fewer than 3 human raters per item (the alt-test asks for >= 3)"}
    eps, why = _epsilon(dataset, opts)
    m = _matrix(para, wordings).reindex(raters.index)
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
            "rho_ci": _rho_ci(f, raters.to_numpy(float), eps, "neg_rmse", opts),
            "passed": r.passed,
            "n_items": r.n_items,
            "n_annotators": r.n_annotators,
            "p_values": [v["p_value"] for v in r.per_annotator.values()],
        }
    return {
        **_few_items_note(len(raters)),
        "per_wording": per,
        "epsilon": eps,
        "epsilon_reason": why,
        "scoring": "neg_rmse (judge mapped onto the humans' range)",
        "source": SOURCES["alt_test"],
    }


def _few_items_note(n: int) -> dict:
    if n >= 30:
        return {}
    return {
        "note": f"{n} items < the paper's 30 a annotator: each annotator is tested on all {n}, and the t-test's normality is doubtful"
    }


def _rho_ci(
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


def alt_test_pairwise(para, wordings, dataset, opts) -> dict:
    raters = _raters(para[para["order"] == "12"])
    if raters.empty or raters.notna().sum(axis=1).max() < 3:
        return {"missing": "fewer than 3 human votes per pair (the alt-test asks for >= 3)"}
    code = {"1": 0.0, "2": 1.0, "tie": 2.0}
    h = raters.apply(lambda col: col.map(code))
    eps, why = _epsilon(dataset, opts)
    per = {}
    for w in wordings:
        f = (
            para[(para["variant"] == w) & (para["order"] == "12")]
            .set_index("item_id")["preferred"]
            .reindex(h.index)
            .map(code)
        )
        r = alt_test(
            f.to_numpy(float),
            h.to_numpy(float),
            epsilon=eps,
            scoring="accuracy",
            min_items_per_human=min(30, len(h)),
        )
        per[w] = {
            "winning_rate": r.winning_rate,
            "advantage_probability": r.advantage_probability,
            "rho_ci": _rho_ci(f.to_numpy(float), h.to_numpy(float), eps, "accuracy", opts),
            "passed": r.passed,
            "n_items": r.n_items,
            "n_annotators": r.n_annotators,
        }
    return {
        **_few_items_note(len(h)),
        "per_wording": per,
        "epsilon": eps,
        "epsilon_reason": why,
        "scoring": "accuracy (order 12 verdict)",
        "source": SOURCES["alt_test"],
    }


# ----------------------------------------------------------------------------- corrected estimate


def _covers(r, truth) -> float:
    return float(r.low <= truth <= r.high)


def coverage(y: np.ndarray, f: np.ndarray, n: int, *, n_draws: int, level: float, seed: int) -> dict:
    """Coverage of the all-human mean ``y.mean()`` by PPI++, human-only and judge-only intervals over
    ``n_draws`` random labelled slices of ``n`` items (the rest judge-only)."""
    truth = float(y.mean())
    rng = np.random.default_rng(seed)
    judge = judge_only_mean(f, level=level)
    cov = {"ppi": [], "human": []}
    width = {"ppi": [], "human": []}
    for _ in range(n_draws):
        idx = rng.permutation(y.size)
        lab, unl = idx[:n], idx[n:]
        p = ppi_mean(y[lab], f[lab], f[unl], level=level)
        h = human_only_mean(y[lab], level=level)
        for k, r in (("ppi", p), ("human", h)):
            cov[k].append(_covers(r, truth))
            width[k].append(r.high - r.low)
    return {
        "n": n,
        "N": int(y.size),
        "truth": truth,
        "ppi_coverage": float(np.mean(cov["ppi"])),
        "ppi_width": float(np.mean(width["ppi"])),
        "human_coverage": float(np.mean(cov["human"])),
        "human_width": float(np.mean(width["human"])),
        "judge_covers": _covers(judge, truth),
        "judge_width": judge.high - judge.low,
        "judge_mean": judge.estimate,
        "draws": n_draws,
    }


def _discordant(a: pd.Series, b: pd.Series) -> float:
    pairs = list(combinations(a.index, 2))
    if not pairs:
        return float("nan")
    return float(np.mean([np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) < 0 for i, j in pairs]))


def rank_changes(
    y, f_by_w: dict, systems: np.ndarray, *, share: float, n_draws: int, level: float, seed: int
) -> dict:
    """Mean share of system pairs ordered oppositely by two wordings, judge-only vs PPI-corrected (each
    system's items labelled at ``share``, the same slice for every wording), and vs the humans."""
    sys_ids = pd.unique(systems)
    human = pd.Series({s: y[systems == s].mean() for s in sys_ids})
    raw = {w: pd.Series({s: f[systems == s].mean() for s in sys_ids}) for w, f in f_by_w.items()}
    wpairs = list(combinations(f_by_w, 2))
    before = float(np.mean([_discordant(raw[a], raw[b]) for a, b in wpairs])) if wpairs else float("nan")
    before_h = float(np.mean([_discordant(raw[w], human) for w in f_by_w]))
    rng = np.random.default_rng(seed)
    after, after_h = [], []
    for _ in range(n_draws):
        labelled = np.zeros(y.size, bool)
        for s in sys_ids:
            idx = np.flatnonzero(systems == s)
            k = max(2, int(round(share * idx.size)))
            if idx.size - k < 2:
                return {
                    "missing": f"system {s} has too few items ({idx.size}) for a labelled slice and a judge-only rest"
                }
            labelled[rng.choice(idx, k, replace=False)] = True
        est = {}
        for w, f in f_by_w.items():
            est[w] = pd.Series(
                {
                    s: ppi_mean(
                        y[(systems == s) & labelled],
                        f[(systems == s) & labelled],
                        f[(systems == s) & ~labelled],
                        level=level,
                    ).estimate
                    for s in sys_ids
                }
            )
        after.append(np.mean([_discordant(est[a], est[b]) for a, b in wpairs]) if wpairs else np.nan)
        after_h.append(np.mean([_discordant(est[w], human) for w in f_by_w]))
    return {
        "n_systems": int(len(sys_ids)),
        "share_labelled": share,
        "draws": n_draws,
        "between_wordings_before": before,
        "between_wordings_after": float(np.nanmean(after)),
        "vs_humans_before": before_h,
        "vs_humans_after": float(np.nanmean(after_h)),
    }


def corrected_section(para, wordings, to_human, opts) -> dict:
    m = _matrix(para, wordings)
    first = para.drop_duplicates("item_id").set_index("item_id").reindex(m.index)
    y_all = first["human"].to_numpy(float)
    keep = ~np.isnan(y_all) & m.notna().all(axis=1).to_numpy()
    if keep.sum() < 10:
        return {
            "missing": f"only {int(keep.sum())} items with a human label and every wording's verdict (< 10)"
        }
    y = y_all[keep]
    f_by_w = {w: to_human(m[w].to_numpy(float)[keep]) for w in wordings}
    # slices of at most half the items (the rest judge-only); with fewer than 50 items: a quarter and a half
    sizes = [n for n in opts.slices if n <= y.size // 2] or sorted({max(5, y.size // 4), y.size // 2})
    per = {}
    for w, f in f_by_w.items():
        rows = [coverage(y, f, n, n_draws=opts.n_draws, level=opts.ppi_level, seed=opts.seed) for n in sizes]
        per[w] = rows
    out = {
        "per_wording": per,
        "level": opts.ppi_level,
        "all_human_mean": float(y.mean()),
        "n_items": int(y.size),
        "unit": "the humans' scale (judge scores mapped linearly onto the card's human_scale)",
        "source": SOURCES["corrected"],
    }
    systems = first["system"].to_numpy(object)[keep] if "system" in first.columns else None
    if systems is not None and pd.notna(systems).all() and len(pd.unique(systems)) >= 2:
        out["ranks"] = rank_changes(
            y,
            f_by_w,
            systems,
            share=opts.rank_share,
            n_draws=min(opts.n_draws, 100),
            level=opts.ppi_level,
            seed=opts.seed,
        )
        out["per_system"] = per_system(
            y, f_by_w, systems, share=opts.rank_share, level=opts.ppi_level, seed=opts.seed
        )
    else:
        out["ranks"] = {"missing": "the items carry no system (or one): no ranking to change"}
    out["rogan_gladen"] = rogan_gladen_section(y, f_by_w, opts)
    return out


def corrected_pairwise(para, wordings, opts) -> dict:
    """PPI++ of the share of pairs won by response 1 (ties 0.5): ``y`` the human majority, ``f`` the
    judge's preference averaged over the two orders; coverage over random human-labelled slices."""
    y = para.drop_duplicates("item_id").set_index("item_id")["human_preferred"].map(_pref_value)
    f_by_w = {}
    for w in wordings:
        rows = para[para["variant"] == w].assign(p=lambda d: d["preferred"].map(_pref_value))
        f_by_w[w] = rows.groupby("item_id")["p"].mean().reindex(y.index)
    keep = y.notna() & pd.concat(f_by_w.values(), axis=1).notna().all(axis=1)
    if keep.sum() < 10:
        return {
            "missing": f"only {int(keep.sum())} pairs with a human preference and every wording's verdict (< 10)"
        }
    yv = y[keep].to_numpy(float)
    sizes = [n for n in opts.slices if n <= yv.size // 2] or sorted({max(5, yv.size // 4), yv.size // 2})
    per = {
        w: [
            coverage(
                yv, f[keep].to_numpy(float), n, n_draws=opts.n_draws, level=opts.ppi_level, seed=opts.seed
            )
            for n in sizes
        ]
        for w, f in f_by_w.items()
    }
    return {
        "per_wording": per,
        "level": opts.ppi_level,
        "all_human_mean": float(yv.mean()),
        "n_items": int(yv.size),
        "unit": "the share of pairs won by response 1 (ties 0.5; the judge's two orders averaged)",
        "source": SOURCES["corrected"],
        "ranks": {"missing": "pairwise system rankings (Bradley-Terry) are not corrected here"},
    }


def per_system(y, f_by_w: dict, systems: np.ndarray, *, share: float, level: float, seed: int) -> dict:
    """Per wording and system: the judge-only mean, the PPI++ estimate and interval from one seeded
    slice (``share`` of each system's items human-labelled, the same slice for every wording) and the
    all-human mean."""
    rng = np.random.default_rng(seed)
    labelled = np.zeros(y.size, bool)
    for s in pd.unique(systems):
        idx = np.flatnonzero(systems == s)
        k = max(2, int(round(share * idx.size)))
        if idx.size - k < 2:
            return {
                "missing": f"system {s} has too few items ({idx.size}) for a labelled slice and a judge-only rest"
            }
        labelled[rng.choice(idx, k, replace=False)] = True
    out = {}
    for w, f in f_by_w.items():
        rows = {}
        for s in pd.unique(systems):
            m = systems == s
            r = ppi_mean(y[m & labelled], f[m & labelled], f[m & ~labelled], level=level)
            rows[str(s)] = {
                "judge_only": float(f[m].mean()),
                "ppi": r.estimate,
                "ci": [r.low, r.high],
                "n_labelled": r.n_labelled,
                "n": int(m.sum()),
                "human": float(y[m].mean()),
            }
        out[w] = rows
    return {"per_wording": out, "share_labelled": share}


def rogan_gladen_section(y, f_by_w: dict, opts) -> dict:
    """Rogan-Gladen corrected share of the top label, where judge and human labels are both binary
    (the two ends of the human scale); coverage of the all-human share over ``n_draws // 5`` slices."""
    ends = np.unique(y)
    if ends.size != 2 or any(np.unique(f).size > 2 or not np.isin(f, ends).all() for f in f_by_w.values()):
        return {"missing": "not a binary verdict against binary human labels (PPI++ above covers any scale)"}
    yb = (y == ends[1]).astype(float)
    n = min(opts.slices[0], yb.size // 2)
    rng = np.random.default_rng(opts.seed)
    draws = max(20, opts.n_draws // 5)
    per = {}
    for w, f in f_by_w.items():
        fb = (f == ends[1]).astype(float)
        cov, est = [], []
        for _ in range(draws):
            idx = rng.permutation(yb.size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = rogan_gladen(
                    yb[idx[:n]],
                    fb[idx[:n]],
                    fb[idx[n:]],
                    level=opts.ppi_level,
                    n_resamples=200,
                    seed=opts.seed,
                )
            if np.isfinite(r.estimate):
                cov.append(float(r.low <= yb.mean() <= r.high))
                est.append(r.estimate)
        per[w] = {
            "n": n,
            "defined_draws": len(cov),
            "coverage": float(np.mean(cov)) if cov else float("nan"),
            "mean_estimate": float(np.mean(est)) if est else float("nan"),
            "judge_share": float(fb.mean()),
        }
    return {
        "per_wording": per,
        "human_share": float(yb.mean()),
        "draws": draws,
        "source": "Rogan & Gladen (1978): (p + Sp - 1) / (Se + Sp - 1), Se and Sp from the labelled slice",
    }


# ----------------------------------------------------------------------------- words


def _pct(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def headline(card: dict) -> str:
    k = card["key"]
    parts = [
        f"{'FAKE judge ' if card['fake'] else ''}{k['backbone']} x {k['prompt_group']} on {k['dataset']}/{k['criterion']}"
    ]
    lot = card["lottery"]
    if "changed" in lot:
        parts.append(
            f"{_pct(lot['changed'])} of {lot['n']} items change verdict across {len(card['wordings'])} wordings"
        )
    ctl = card["controls"]
    parts.append(f"controls: {ctl['verdict']}" if "verdict" in ctl else "controls: not judged")
    alt = card["alt_test"]
    if "per_wording" in alt:
        passed = sum(v["passed"] for v in alt["per_wording"].values())
        parts.append(
            f"alt-test passed under {passed}/{len(alt['per_wording'])} wordings (eps {alt['epsilon']})"
        )
    cor = card["corrected"]
    if "per_wording" in cor:
        first = next(iter(cor["per_wording"].values()))[0]
        parts.append(
            f"PPI++ at n={first['n']} covers the human mean in {_pct(first['ppi_coverage'])} of draws"
        )
    return "; ".join(parts) + f" [verdict: {card['verdict']}]"


def verdict_paragraph(card: dict) -> str:
    s = []
    lot, ctl, alt, cor, ln = (
        card["lottery"],
        card["controls"],
        card["alt_test"],
        card["corrected"],
        card["length"],
    )
    if "changed" in lot:
        s.append(
            f"Rewording the prompt changes the verdict on {_pct(lot['changed'])} of items "
            f"(95% CI {_pct(lot['changed_ci'][0])}-{_pct(lot['changed_ci'][1])}, n={lot['n']})."
        )
    if "verdict" in ctl:
        if ctl["deaf"]:
            s.append(
                f"It does not follow its meaning-changing controls ({ctl['verdict']}: signal {ctl['signal']:.2f} vs "
                f"paraphrase noise {ctl['noise']:.2f}), so its stability is not evidence that it reads the rubric."
            )
        else:
            s.append(
                f"It follows its controls (signal {ctl['signal']:.2f} above paraphrase noise {ctl['noise']:.2f}, margin CI "
                f"{ctl['margin_ci'][0]:.2f}-{ctl['margin_ci'][1]:.2f})."
            )
    else:
        s.append(
            "Whether it follows meaning-changing controls is not measured here ("
            + ctl.get("missing", "")
            + ")."
        )
    if "per_wording" in ln:
        key = "slope" if "slope" in next(iter(ln["per_wording"].values())) else "phi"
        sig = [
            w
            for w, v in ln["per_wording"].items()
            if np.isfinite(v[key])
            and (lambda c: c[0] > 0 or c[1] < 0)(v["ci"] if key == "slope" else v["phi_ci"])
        ]
        s.append(f"A length effect is significant under {len(sig)} of {len(ln['per_wording'])} wordings.")
    if "per_wording" in alt:
        passed = [w for w, v in alt["per_wording"].items() if v["passed"]]
        s.append(
            f"It could replace the human annotators (alt-test, epsilon {alt['epsilon']}) under "
            f"{len(passed)} of {len(alt['per_wording'])} wordings{': ' + ', '.join(passed) if passed else ''}."
        )
    if "per_wording" in cor:
        covs = [rows[0]["ppi_coverage"] for rows in cor["per_wording"].values()]
        jc = [rows[0]["judge_covers"] for rows in cor["per_wording"].values()]
        n = next(iter(cor["per_wording"].values()))[0]["n"]
        s.append(
            f"With {n} human labels, PPI++ intervals cover the all-human mean in {_pct(min(covs))}-{_pct(max(covs))} of draws "
            f"(target {_pct(cor['level'])}); the judge-only interval covers it under {int(sum(jc))} of {len(jc)} wordings."
        )
        rk = cor.get("ranks", {})
        if "between_wordings_before" in rk:
            s.append(
                f"Between two wordings {_pct(rk['between_wordings_before'])} of system pairs swap order before correction and "
                f"{_pct(rk['between_wordings_after'])} after ({_pct(rk['share_labelled'])} of each system's items human-labelled)."
            )
    if card["fake"]:
        s.append("This is a FAKE judge (the fake backend): the numbers test the pipeline, not a model.")
    return " ".join(s)
