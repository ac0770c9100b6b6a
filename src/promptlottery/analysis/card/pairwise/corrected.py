"""The pairwise judge card's human-corrected estimate: PPI++ of the share of pairs won by response 1 and
each system's win rate over its pairs (:mod:`promptlottery.analysis.card.corrected` for the label matrix)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from promptlottery.analysis.card.corrected import coverage, per_system, rank_changes, slice_sizes
from promptlottery.analysis.card.pairwise.sections import pref_value
from promptlottery.analysis.card.sections import SOURCES


def corrected_pairwise(para, wordings, opts) -> dict:
    """PPI++ of the share of pairs won by response 1 (ties 0.5): ``y`` the human majority, ``f`` the
    judge's preference averaged over the two orders; coverage over random human-labelled slices."""
    y = para.drop_duplicates("item_id").set_index("item_id")["human_preferred"].map(pref_value)
    f_by_w = {}
    for w in wordings:
        rows = para[para["variant"] == w].assign(p=lambda d: d["preferred"].map(pref_value))
        f_by_w[w] = rows.groupby("item_id")["p"].mean().reindex(y.index)
    keep = y.notna() & pd.concat(f_by_w.values(), axis=1).notna().all(axis=1)
    if keep.sum() < 10:
        return {
            "missing": f"only {int(keep.sum())} pairs with a human preference and every wording's verdict (< 10)"
        }
    yv = y[keep].to_numpy(float)
    sizes = slice_sizes(yv.size, opts.slices)
    per = {
        w: [
            coverage(
                yv, f[keep].to_numpy(float), n, n_draws=opts.n_draws, level=opts.ppi_level, seed=opts.seed
            )
            for n in sizes
        ]
        for w, f in f_by_w.items()
    }
    out = {
        "per_wording": per,
        "level": opts.ppi_level,
        "all_human_mean": float(yv.mean()),
        "n_items": int(yv.size),
        "unit": "the share of pairs won by response 1 (ties 0.5; the judge's two orders averaged)",
        "source": SOURCES["corrected"],
    }
    first = para.drop_duplicates("item_id").set_index("item_id").reindex(y.index[keep])
    f_kept = {w: f[keep].to_numpy(float) for w, f in f_by_w.items()}
    return {**out, **pairwise_systems(first, yv, f_kept, opts)}


def pairwise_systems(first: pd.DataFrame, y: np.ndarray, f_by_w: dict, opts) -> dict:
    """Each system's win rate over the pairs it is in (ties 1/2): every pair counted once for each of its
    two systems, oriented to it (``y`` and ``f`` for response 1's system, ``1 - y`` and ``1 - f`` for
    response 2's); the per-system PPI++ estimates and the rank changes as pointwise, the labelled slice
    drawn from each system's own pairs (a pair may be labelled for one of its systems only)."""
    if (
        not {"system_1", "system_2"} <= set(first.columns)
        or first[["system_1", "system_2"]].isna().any().any()
    ):
        missing = {"missing": "the pairs carry no system identities (system_1 / system_2): no ranking"}
        return {"ranks": missing, "per_system": missing}
    systems = np.r_[first["system_1"].to_numpy(object), first["system_2"].to_numpy(object)]
    y2 = np.r_[y, 1 - y]
    f2 = {w: np.r_[f, 1 - f] for w, f in f_by_w.items()}
    kw = {"share": opts.rank_share, "level": opts.ppi_level, "seed": opts.seed}
    ranks = rank_changes(y2, f2, systems, n_draws=min(opts.n_draws, 100), **kw)
    per = per_system(y2, f2, systems, **kw)
    unit = {"unit": "pairs"}
    estimand = {"estimand": "win rate over the pairs it is in, ties 1/2"}
    return {"ranks": {**ranks, **unit}, "per_system": {**per, **unit, **estimand}}
