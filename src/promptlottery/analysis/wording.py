"""Analyses 4-5: is a paraphrase's stability explained by how close it is to P1, or by its wording?

Both work on :func:`~promptlottery.analysis.agreement.variant_agreement`: each variant's mean
agreement (Cohen's kappa, or raw overlap) with the other variants of its configuration.
"""

from __future__ import annotations

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
    rows = []
    if pts.empty:
        for d in WORDING_DIMENSIONS:
            rows.append(
                {
                    "dimension": d,
                    "n_points": 0,
                    "n_levels": 0,
                    "levels": "",
                    "eta_squared": np.nan,
                    "null_mean": np.nan,
                    "null_hi": np.nan,
                    "p": np.nan,
                    "note": f"n/a: no variant with a defined {metric} agreement",
                }
            )
        return pd.DataFrame(rows)
    y = (pts[col] - pts.groupby("config_id")[col].transform("mean")).to_numpy(float)
    # permutation of variants within each prompt group, applied to the tag lookup
    group_variants = {g: sorted(set(v)) for g, v in pts.groupby("prompt_group")["variant"]}
    tag_lookup = tags.set_index(["prompt_group", "variant"])
    rng = np.random.default_rng(seed)
    perms = []
    for _ in range(n_permutations):
        mapping = {}
        for g, vs in sorted(group_variants.items()):
            shuffled = list(rng.permutation(vs))
            mapping.update({(g, a): (g, b) for a, b in zip(vs, shuffled)})
        perms.append(mapping)
    keys = list(zip(pts["prompt_group"], pts["variant"]))
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
            rec.update(
                eta_squared=np.nan,
                null_mean=np.nan,
                null_hi=np.nan,
                p=np.nan,
                note=f"n/a: one level only ({distinct[0] if distinct else 'none'})",
            )
            rows.append(rec)
            continue
        obs = _eta_squared(y, levels)
        if not np.isfinite(obs):
            rec.update(
                eta_squared=np.nan,
                null_mean=np.nan,
                null_hi=np.nan,
                p=np.nan,
                note="n/a: no variation of agreement within configurations",
            )
            rows.append(rec)
            continue
        dim_tags = tag_lookup[d].astype(object).fillna("(none)").to_dict()
        null = np.array(
            [_eta_squared(y, np.array([dim_tags[m[k]] for k in keys], dtype=object)) for m in perms]
        )
        rec.update(
            eta_squared=obs,
            null_mean=float(np.nanmean(null)),
            null_hi=float(np.nanquantile(null, level)),
            p=float((1 + np.sum(null >= obs - 1e-12)) / (1 + len(null))),
            note="",
        )
        rows.append(rec)
    return pd.DataFrame(rows)
