"""Analyses 4-5: is a paraphrase's stability explained by how close it is to P1, or by its wording?

Both work on :func:`~promptlottery.analysis.lottery.agreement.variant_agreement`: each variant's mean
agreement (Cohen's kappa, or raw overlap) with the other variants of its configuration.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from promptlottery.metrics import pearson
from promptlottery.prompts.groups import WORDING_DIMENSIONS, load_group, load_group_file

AGREEMENT_COLUMNS = {"kappa": "kappa_with_others", "overlap": "overlap_with_others"}


def variant_texts(groups: Iterable[str], files: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The text of each variant (system + user template) with its wording tags, per prompt group.

    ``files`` maps a group id to its group file (groups judged with ``judge.group_file``); the
    others are built-in groups.
    """
    files = files or {}
    rows = []
    for gid in sorted(set(groups)):
        group = load_group_file(files[gid]) if gid in files else load_group(gid)
        for vid, v in group.variants.items():
            rows.append(
                {
                    "prompt_group": gid,
                    "variant": vid,
                    "text": ((v.system or "") + "\n" + v.user).strip(),
                    **{d: v.tags.get(d) for d in WORDING_DIMENSIONS},
                }
            )
    return pd.DataFrame(rows)


def prompt_similarities(
    texts: pd.DataFrame, *, reference: str = "P1", encode: Callable[[list[str]], np.ndarray] | None = None
) -> pd.DataFrame:
    """Cosine similarity of each variant's text to the reference variant of its group.

    ``encode`` maps texts to L2-normalised embeddings; default
    :func:`promptlottery.embeddings.encode` (all-MiniLM-L6-v2).
    """
    if encode is None:
        from promptlottery.embeddings import encode
    out = texts[["prompt_group", "variant"]].copy()
    out["similarity_to_ref"] = np.nan
    for _, g in texts.groupby("prompt_group", sort=True):
        if reference not in set(g["variant"]):
            continue
        emb = np.asarray(encode(g["text"].tolist()), dtype=np.float64)
        emb = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
        ref = emb[g["variant"].tolist().index(reference)]
        out.loc[g.index, "similarity_to_ref"] = emb @ ref
    return out


def similarity_vs_stability(
    agreement: pd.DataFrame,
    similarities: pd.DataFrame,
    *,
    reference: str = "P1",
    metrics: tuple[str, ...] = ("kappa", "overlap"),
    level: float = 0.95,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Analysis 4: correlation across variants between similarity to P1 and agreement with the others.

    Each (configuration, variant other than the reference) is one point: x = the variant's
    embedding similarity to P1, y = its mean agreement with the other variants. Returns
    ``(summary, points)``; the summary has one row per agreement measure with Pearson's ``r``, its
    p-value and a Fisher-z CI (``r_lo`` / ``r_hi``), or a note saying why it is n/a.
    """
    pts = agreement.merge(similarities, on=["prompt_group", "variant"], how="left")
    pts = pts[pts["variant"] != reference].reset_index(drop=True)
    rows = []
    for m in metrics:
        col = AGREEMENT_COLUMNS[m]
        ok = pts[np.isfinite(pts[col].astype(float)) & np.isfinite(pts["similarity_to_ref"].astype(float))]
        rec: dict[str, Any] = {"agreement": m, "n_points": len(ok), "n_configs": ok["config_id"].nunique()}
        x, y = ok["similarity_to_ref"].to_numpy(float), ok[col].to_numpy(float)
        if len(ok) < 3:
            rec.update(r=np.nan, p=np.nan, r_lo=np.nan, r_hi=np.nan)
            rec["note"] = f"n/a: {len(ok)} variants with both a similarity and a defined {m} (need >= 3)"
        elif np.ptp(x) == 0 or np.ptp(y) == 0:
            rec.update(r=np.nan, p=np.nan, r_lo=np.nan, r_hi=np.nan)
            rec["note"] = f"n/a: no variance in {'similarity' if np.ptp(x) == 0 else m}"
        else:
            r = pearson(x, y)
            res = stats.pearsonr(x, y)
            ci = res.confidence_interval(confidence_level=level) if len(ok) > 3 else None
            rec.update(r=r, p=float(res.pvalue))
            rec["r_lo"], rec["r_hi"] = (float(ci.low), float(ci.high)) if ci else (np.nan, np.nan)
            rec["note"] = "" if ci else "CI n/a: needs >= 4 points"
        rows.append(rec)
    return pd.DataFrame(rows), pts


def _eta_squared(y: np.ndarray, groups: np.ndarray) -> float:
    total = ((y - y.mean()) ** 2).sum()
    if total <= 0:
        return np.nan
    between = sum(((y[groups == g].mean() - y.mean()) ** 2) * (groups == g).sum() for g in np.unique(groups))
    return float(between / total)


def _null_etas(y: np.ndarray, tags: list, at: np.ndarray, perm_at: np.ndarray) -> np.ndarray:
    """:func:`_eta_squared` of ``y`` under each permutation's tags (``tags`` of the distinct keys;
    point ``i`` takes ``tags[perm_at[p, at[i]]]``). The tags become their ranks among the sorted
    distinct tags, so each eta-squared sums the same terms in the same order as on the tags."""
    distinct = sorted(set(tags))
    rank = np.array([distinct.index(t) for t in tags], dtype=np.int64)
    return np.array([_eta_squared(y, rank[row][at]) for row in perm_at], dtype=float)


def wording_dimensions(
    agreement: pd.DataFrame,
    tags: pd.DataFrame,
    *,
    metric: str = "kappa",
    n_permutations: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Analysis 5: eta-squared of agreement by each wording dimension against a permutation null.

    Points are (configuration, variant) with ``y`` = the variant's agreement with the others,
    centred within its configuration (so configurations that agree more overall do not count as a
    wording effect). For each of the seven dimensions, eta-squared = between-level sum of squares /
    total sum of squares of ``y`` grouped by the variant's tag. The null permutes the variants' tags
    within each prompt group (the same permutation for every configuration of the group);
    ``p = (1 + #{null >= observed}) / (1 + n_permutations)``. ``null_hi`` is the null's
    ``level`` quantile.
    """
    col = AGREEMENT_COLUMNS[metric]
    pts = agreement.merge(tags, on=["prompt_group", "variant"], how="left")
    pts = pts[np.isfinite(pts[col].astype(float))].reset_index(drop=True)
    if pts.empty:
        note = f"n/a: no variant with a defined {metric} agreement"
        empty = {"n_points": 0, "n_levels": 0, "levels": ""}
        return pd.DataFrame([{"dimension": d, **empty, **_no_eta(note)} for d in WORDING_DIMENSIONS])
    y = (pts[col] - pts.groupby("config_id")[col].transform("mean")).to_numpy(float)
    perms = _tag_permutations(pts, n_permutations, seed)
    tag_lookup = tags.set_index(["prompt_group", "variant"])
    keys = list(zip(pts["prompt_group"], pts["variant"]))
    # each permutation as positions: point i takes the tags of distinct key perm_at[p, at[i]]
    distinct_keys = list(dict.fromkeys(keys))
    pos = {k: i for i, k in enumerate(distinct_keys)}
    at = np.array([pos[k] for k in keys], dtype=np.int64)
    perm_at = np.array([[pos[m[k]] for k in distinct_keys] for m in perms], dtype=np.int64)
    rows = []
    for d in WORDING_DIMENSIONS:
        levels = pts[d].astype(object).fillna("(none)").to_numpy()
        distinct = sorted(set(levels))
        rec: dict[str, Any] = {
            "dimension": d,
            "n_points": len(pts),
            "n_levels": len(distinct),
            "levels": ",".join(map(str, distinct)),
        }
        if len(distinct) < 2:
            rows.append({**rec, **_no_eta(f"n/a: one level only ({distinct[0] if distinct else 'none'})")})
            continue
        obs = _eta_squared(y, levels)
        if not np.isfinite(obs):
            rows.append({**rec, **_no_eta("n/a: no variation of agreement within configurations")})
            continue
        dim_tags = tag_lookup[d].astype(object).fillna("(none)").to_dict()
        null = _null_etas(y, [dim_tags[k] for k in distinct_keys], at, perm_at)
        rec.update(
            eta_squared=obs,
            null_mean=float(np.nanmean(null)),
            null_hi=float(np.nanquantile(null, level)),
            p=float((1 + np.sum(null >= obs - 1e-12)) / (1 + len(null))),
            note="",
        )
        rows.append(rec)
    return pd.DataFrame(rows)


def _no_eta(note: str) -> dict[str, Any]:
    """The columns of a dimension without an eta-squared, and why."""
    return {"eta_squared": np.nan, "null_mean": np.nan, "null_hi": np.nan, "p": np.nan, "note": note}


def _tag_permutations(pts: pd.DataFrame, n_permutations: int, seed: int) -> list[dict]:
    """The null's permutations of the variants within each prompt group, as tag-lookup maps
    ``(group, variant) -> (group, variant whose tags it takes)``."""
    group_variants = {g: sorted(set(v)) for g, v in pts.groupby("prompt_group")["variant"]}
    rng = np.random.default_rng(seed)
    perms = []
    for _ in range(n_permutations):
        mapping = {}
        for g, vs in sorted(group_variants.items()):
            shuffled = list(rng.permutation(vs))
            mapping.update({(g, a): (g, b) for a, b in zip(vs, shuffled)})
        perms.append(mapping)
    return perms


# --- Appendix B / Table 12: the paper's outcome, cross-model score agreement per paraphrase --------

#: a paraphrase's output-format strictness as steps (Appendix B: "+0.076 kappa per step")
STRICTNESS_STEPS = {"loose": 0, "plain": 1, "strict": 2}


def cross_model_agreement(grid) -> pd.DataFrame:
    """Each paraphrase's cross-model score agreement: Fleiss' kappa among the backbones judging the
    same items with that variant (Appendix B / Table 12 test "whether [the dimensions] are associated
    with cross-model score agreement"; the summary names no measure: Fleiss' kappa, the paper's
    agreement measure of §3.2, is ours to choose here).

    One row per task (a configuration without its backbone, ``config_id``) x variant with
    ``cross_model_kappa`` on the items every backbone judged (``n_items``), ``n_backbones``; NaN with a
    ``note`` where fewer than 2 backbones or 2 complete items, or every verdict is one label. The
    table has the columns :func:`wording_dimensions` reads (``metric="cross_model"``).
    """
    from promptlottery.judging.table import CONFIG_KEYS
    from promptlottery.metrics import UndefinedMetricWarning, fleiss_kappa
    from promptlottery.prompts.scales import get_scale

    if not len(grid):
        return pd.DataFrame(columns=["config_id", "prompt_group", "variant", "cross_model_kappa"])
    # the grid's paraphrase setting of every configuration (each variant once, at its main temperature)
    work = pd.concat([conf.paraphrases for conf in grid], ignore_index=True)
    keys = [k for k in CONFIG_KEYS if k != "backbone"]
    task = [
        "/".join(p for p in row if p and p != "None") for row in zip(*(work[k].astype(str) for k in keys))
    ]
    rows = []
    for tid, g in sorted(work.groupby(pd.Series(task, index=work.index)), key=lambda t: t[0]):
        labels = sorted(get_scale(g["scale"].iloc[0]).scores)
        for v, gv in sorted(g.groupby("variant"), key=lambda t: t[0]):
            m = gv.pivot_table(index="item_id", columns="backbone", values="value", aggfunc="first").dropna()
            rec: dict[str, Any] = {
                "config_id": tid,
                "dataset": g["dataset"].iloc[0],
                "prompt_group": g["prompt_group"].iloc[0],
                "variant": v,
                "n_backbones": int(gv["backbone"].nunique()),
                "n_items": len(m),
                "cross_model_kappa": np.nan,
                "note": "",
            }
            if m.shape[1] < 2 or len(m) < 2:
                rec["note"] = (
                    f"n/a: need >= 2 backbones and >= 2 complete items, have {m.shape[1]} x {len(m)}"
                )
            else:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UndefinedMetricWarning)
                    rec["cross_model_kappa"] = float(fleiss_kappa(m.to_numpy(float), labels=labels))
                if not np.isfinite(rec["cross_model_kappa"]):
                    rec["note"] = f"n/a: {caught[0].message}" if caught else "n/a: undefined"
            rows.append(rec)
    return pd.DataFrame(rows)


AGREEMENT_COLUMNS["cross_model"] = "cross_model_kappa"


def strictness_regression(points: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """Appendix B: output-format strictness against cross-model agreement (OLS, statsmodels).

    The paper: "Output-format strictness had a univariate slope of +0.076 kappa per step, but the
    effect weakened to +0.031 with other features fixed and was not significant (p = 0.17). The
    MT-Bench family designed to span those phrases had a +0.005 slope." Here: ``y`` = each
    paraphrase's ``cross_model_kappa`` (:func:`cross_model_agreement`) centred within its task (as in
    :func:`wording_dimensions`, ours), ``x`` = strictness in steps (:data:`STRICTNESS_STEPS`, loose 0,
    plain 1, strict 2). Rows: ``univariate`` (y ~ x), ``adjusted`` (y ~ x + the other six dimensions,
    one-hot, first level dropped), ``mt_bench`` (univariate on the MT-Bench task's paraphrases), each
    with ``slope``, ``se``, ``p``, ``n_points`` or a note saying why not.
    """
    import statsmodels.api as sm

    from promptlottery.prompts.groups import WORDING_DIMENSIONS

    pts = points.merge(tags, on=["prompt_group", "variant"], how="left")
    pts = pts[np.isfinite(pts["cross_model_kappa"].astype(float))].reset_index(drop=True)
    pts["x"] = pts["format_strictness"].map(STRICTNESS_STEPS)
    pts = pts[pts["x"].notna()].reset_index(drop=True)
    pts["y"] = pts["cross_model_kappa"] - pts.groupby("config_id")["cross_model_kappa"].transform("mean")
    others = [d for d in WORDING_DIMENSIONS if d != "format_strictness"]
    rows = []
    for model, sub, covars in (
        ("univariate", pts, []),
        ("adjusted", pts, others),
        ("mt_bench", pts[pts["dataset"] == "mt_bench"], []),
    ):
        rec: dict[str, Any] = {
            "model": model,
            "n_points": len(sub),
            "slope": np.nan,
            "se": np.nan,
            "p": np.nan,
        }
        X = pd.DataFrame({"x": sub["x"].astype(float)})
        if covars:
            dummies = pd.get_dummies(
                sub[covars].astype(object).fillna("(none)"), drop_first=True, dtype=float
            )
            X = pd.concat([X, dummies.loc[:, dummies.std() > 0]], axis=1)
        X = sm.add_constant(X, has_constant="add")
        if len(sub) < X.shape[1] + 1 or sub["x"].nunique() < 2:
            why = "no variation in strictness" if len(sub) and sub["x"].nunique() < 2 else "too few points"
            rec["note"] = f"n/a: {why} ({len(sub)} paraphrases with a defined cross-model kappa)"
        elif np.linalg.matrix_rank(X.to_numpy(float)) < X.shape[1]:
            rec["note"] = "n/a: strictness is collinear with the other dimensions on these paraphrases"
        else:
            fit = sm.OLS(sub["y"].to_numpy(float), X.to_numpy(float)).fit()
            rec.update(slope=float(fit.params[1]), se=float(fit.bse[1]), p=float(fit.pvalues[1]), note="")
            if model == "adjusted":
                rec["note"] = f"other dimensions held fixed: {', '.join(X.columns[2:]) or 'none vary'}"
        rows.append(rec)
    return pd.DataFrame(rows)
