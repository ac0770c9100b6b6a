"""The pairwise section's estimates with cluster-bootstrap CIs over pairs: the human agreement of
each verdict kind, the plurality cluster of the wordings, the per-configuration kappa and the
shares of verdicts changed by swapping the order or the wording."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd

from promptlottery.judging.table import natural_key
from promptlottery.metrics import (
    UndefinedMetricWarning,
    cluster_resample_counts,
    clustered_ratio_ci,
    fleiss_kappa,
)
from promptlottery.metrics import preference as pm
from promptlottery.metrics import preference_humans as ph
from promptlottery.metrics._resampled import fleiss_kappa_resampled
from promptlottery.metrics.aggregate import plurality_cluster
from promptlottery.metrics.kappa_interval import fleiss_interval

#: the verdicts of one (pair, wording) compared on human agreement
KINDS = {
    "order_12": "single order 12 (response_a shown first)",
    "order_21": "single order 21 (response_b shown first)",
    "single_order": "single order, either (both orders pooled)",
    "resolved": "order-resolved (inconsistent = tie)",
    "averaged": "order-averaged probabilities (ours)",
}
#: the aggregations over wordings (and orders): (judges label, verdict kind)
AGGREGATIONS = (
    ("plurality cluster of the wordings", "resolved"),
    ("plurality cluster of the wordings", "averaged"),
    ("plurality cluster of the wordings", "order_12"),
    ("plurality cluster of the wordings x orders", "single_order"),
)


def share_ci(
    rec: dict, name: str, num: np.ndarray, den: np.ndarray, clusters: np.ndarray, boot: dict
) -> None:
    """``rec[name]``, ``_lo``, ``_hi`` and ``_n`` (events) of a pooled share, cluster bootstrap."""
    rec[f"{name}_n"] = int(den.sum())
    if den.sum() == 0:
        rec[name] = rec[f"{name}_lo"] = rec[f"{name}_hi"] = np.nan
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        r = clustered_ratio_ci(num, den, clusters=clusters, **boot)
    rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = r.estimate, r.low, r.high


def kind_verdicts(p: pd.DataFrame, kind: str) -> list[np.ndarray]:
    """The verdict arrays of one kind (two for ``single_order``: each order counts once)."""
    return {
        "order_12": [p["first"].to_numpy(object)],
        "order_21": [p["second"].to_numpy(object)],
        "single_order": [p["first"].to_numpy(object), p["second"].to_numpy(object)],
        "resolved": [p["resolved"].to_numpy(object)],
        "averaged": [p["averaged"].to_numpy(object)],
    }[kind]


def summed(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return sum(n for n, _ in parts), sum(d for _, d in parts)


def human_row(
    rec: dict, verdicts: list[np.ndarray], p: pd.DataFrame, boot: dict, *, both_orders: bool = False
) -> dict:
    """The human-agreement measures of one set of verdicts on the pairs ``p`` (one row per pair);
    ``both_orders``: also the rules that read the two orders of a pair (Auto-J's, JudgeBench's)."""
    cl = p["cluster_id"].to_numpy(object)
    human = p["human"].to_numpy(object)
    for name, ties in (
        ("human_agreement", "exclude_human"),
        ("human_agreement_with_ties", "class"),
        ("human_agreement_fastchat", "exclude_both"),
    ):
        share_ci(rec, name, *summed([ph.agreement_counts(v, human, ties) for v in verdicts]), cl, boot)
    if both_orders:
        orders = (p["first"].to_numpy(object), p["second"].to_numpy(object))
        share_ci(rec, "human_agreement_autoj", *ph.autoj_counts(*orders, human), cl, boot)
        share_ci(rec, "human_agreement_judgebench", *ph.judgebench_counts(*orders, human), cl, boot)
    raters = p["raters"].to_numpy(object)
    if any(r is not None and not (isinstance(r, float) and np.isnan(r)) for r in raters):
        for name, ties in (
            ("judge_rater_agreement", "exclude"),
            ("judge_rater_agreement_with_ties", "class"),
        ):
            share_ci(rec, name, *summed([ph.judge_rater_counts(v, raters, ties) for v in verdicts]), cl, boot)
    return rec


def cluster_verdict(p: pd.DataFrame, kind: str, order: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """The plurality cluster of the wordings (x orders) for each pair, and the pairs (one row each)."""
    col = {"resolved": "two_order", "averaged": "averaged", "order_12": "first"}.get(kind)
    if col is not None:
        m = p.pivot(index="item_id", columns="variant", values=col).reindex(columns=order)
        n_judges = len(order)
    else:  # both orders of every wording: 2J judges
        m = pd.concat(
            [
                p.pivot(index="item_id", columns="variant", values=c)
                .reindex(columns=order)
                .add_suffix(f"/{c}")
                for c in ("first", "second")
            ],
            axis=1,
        )
        n_judges = 2 * len(order)
    m = m.astype(object).where(m.notna(), None)
    cluster = plurality_cluster(m.to_numpy(object), n_judges=n_judges)
    pairs = p.drop_duplicates("item_id").set_index("item_id").loc[m.index].reset_index()
    return np.array([None if pd.isna(c) else c for c in cluster], dtype=object), pairs


def _fleiss(matrix: np.ndarray) -> float:
    return fleiss_kappa(matrix, labels=list(pm.PREFERENCES))


def _changes(
    p: pd.DataFrame, order: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, pd.DataFrame]:
    """Per pair: verdicts changed by swapping the order (of those compared) and by swapping the wording."""
    pairs = p.drop_duplicates("item_id").set_index("item_id")
    items = sorted(pairs.index, key=natural_key)
    f = p.pivot(index="item_id", columns="variant", values="first").reindex(index=items, columns=order)
    s = p.pivot(index="item_id", columns="variant", values="second").reindex(index=items, columns=order)
    fa, sa = f.to_numpy(object), s.to_numpy(object)
    ok = pd.notna(fa) & pd.notna(sa)
    pos_den = ok.sum(axis=1).astype(float)
    pos_num = ((fa != sa) & ok).sum(axis=1).astype(float)
    w_num, w_den = np.zeros(len(items)), np.zeros(len(items))
    for a, b in itertools.combinations(range(len(order)), 2):
        for m in (fa, sa):
            both = pd.notna(m[:, a]) & pd.notna(m[:, b])
            w_den += both
            w_num += both & (m[:, a] != m[:, b])
    return pos_num, pos_den, w_num, w_den, pairs.loc[items].reset_index()


def percentiles(dist: np.ndarray, level: float) -> tuple[float, float]:
    ok = dist[np.isfinite(dist)]
    if ok.size == 0:
        return np.nan, np.nan
    lo, hi = np.percentile(ok, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return float(lo), float(hi)


def config_row(c: pd.DataFrame, order: list[str], rec0: dict, boot: dict, kappa_interval: str) -> dict:
    rec = {
        **rec0,
        "n_wordings": len(order),
        "wordings": ",".join(order),
        "n_pairs": c["item_id"].nunique(),
        "n_clusters": c["cluster_id"].nunique(),
    }
    m = c.pivot(index="item_id", columns="variant", values="two_order").reindex(columns=order)
    complete = m.notna().all(axis=1)
    mm = m[complete].to_numpy(object)
    cl = (
        c.drop_duplicates("item_id")
        .set_index("item_id")
        .loc[m.index[complete], "cluster_id"]
        .to_numpy(object)
    )
    rec["kappa_n"] = int(complete.sum())
    rec["kappa_note"] = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndefinedMetricWarning)
        try:
            est = _fleiss(mm) if len(order) >= 2 and len(mm) >= 2 else np.nan
        except ValueError as exc:
            est, rec["kappa_note"] = np.nan, f"n/a: {exc}"
    rec["pairwise_paraphrase_kappa"] = est
    rec["pairwise_paraphrase_kappa_lo"] = rec["pairwise_paraphrase_kappa_hi"] = np.nan
    if np.isfinite(est):
        # every cluster resample at once from its item counts: the loop of clustered_bootstrapshare_ci(_fleiss, ...)
        w = cluster_resample_counts(cl, boot["n_resamples"], seed=boot["seed"])
        codes = np.vectorize(pm.PREFERENCES.index, otypes=[int])(mm)
        dist = fleiss_kappa_resampled(w, codes, len(pm.PREFERENCES))
        lo, hi = percentiles(dist, boot["level"])
        undefined = int(np.isnan(dist).sum())
        if undefined:
            rec["kappa_note"] = f"undefined on {undefined} of {len(dist)} resamples (left out of the CI)"
        lo, hi, notes = fleiss_interval(
            codes, len(pm.PREFERENCES), kappa_interval, percentile=(lo, hi), clusters=cl, noun="pairs", **boot
        )
        rec["pairwise_paraphrase_kappa_lo"], rec["pairwise_paraphrase_kappa_hi"] = lo, hi
        rec["kappa_note"] = "; ".join([n for n in (rec["kappa_note"], *notes) if n])
    elif not rec["kappa_note"]:
        rec["kappa_note"] = "n/a: " + (
            "one wording"
            if len(order) < 2
            else str(caught[0].message)
            if caught
            else "fewer than 2 complete pairs"
        )
    pos_num, pos_den, w_num, w_den, pairs = _changes(c, order)
    cl_pairs = pairs["cluster_id"].to_numpy(object)
    share_ci(rec, "position_change_share", pos_num, pos_den, cl_pairs, boot)
    share_ci(rec, "wording_change_share", w_num, w_den, cl_pairs, boot)
    f, s = (
        c.pivot(index="item_id", columns="variant", values=k).reindex(index=pairs["item_id"], columns=order)
        for k in ("first", "second")
    )
    fp = [pm.first_counts(f[v].to_numpy(object), s[v].to_numpy(object)) for v in order]
    share_ci(rec, "first_position_rate", *summed(fp), cl_pairs, boot)
    changed = m.apply(lambda r: r.dropna().nunique() > 1 if r.notna().sum() >= 2 else np.nan, axis=1)
    rec["changed_by_wording"] = (
        float(changed.dropna().astype(float).mean()) if changed.notna().any() else np.nan
    )
    raters = pairs["raters"].to_numpy(object)
    if any(r is not None and not (isinstance(r, float) and np.isnan(r)) for r in raters):
        share_ci(rec, "annotator_agreement", *ph.rater_counts(raters, "exclude"), cl_pairs, boot)
        share_ci(rec, "annotator_agreement_with_ties", *ph.rater_counts(raters, "class"), cl_pairs, boot)
    return rec
