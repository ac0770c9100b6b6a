"""The pair table: one row per configuration x wording x pair, its two single-order verdicts and
the verdicts built from them (:mod:`promptlottery.metrics.preference`)."""

from __future__ import annotations

import pandas as pd

from promptlottery.analysis.common.pairwise.contract import ORDERS, PROBS, check_pairwise_table, source_of
from promptlottery.judging.table import (
    AnalysisError,
    config_ids,
    is_repeat_source,
    natural_key,
    ordinary_first,
    paraphrase_setting,
    variant_order,
)
from promptlottery.metrics import preference as pm

#: one judgment per (wording, pair, order) in the paraphrase setting
KEY = ("variant", "item_id", "order")
_DEFAULTS = (("temperature", 0.0), ("sample_index", 0), ("seed", 0), ("repeat_source", "none"))


def selected(
    rows: pd.DataFrame, temperature: float | None, df: pd.DataFrame, source: str | None
) -> pd.DataFrame:
    """The paraphrase setting of one configuration (:func:`judging.table.paraphrase_rows`, with the
    order in the key); two ordinary judgments of one key raise a one-line error naming the file."""
    rows = rows.copy()
    for col, default in _DEFAULTS:
        if col not in rows.columns:
            rows[col] = default
    if rows["temperature"].dtype == object:
        rows["temperature"] = rows["temperature"].astype(float)
    sel = paraphrase_setting(rows, temperature)
    dup = sel[~is_repeat_source(sel)].duplicated(list(KEY))
    if dup.any():
        i = dup.index[dup.to_numpy()][0]
        r = sel.loc[i]
        raise AnalysisError(
            f"{source_of(df, [i], source)}: two judgments of item_id={r['item_id']!r} "
            f"variant={r['variant']!r} order={r['order']!r} in configuration {r['config_id']} (one expected)"
        )
    return ordinary_first(sel, KEY)  # a repeat row only where no ordinary one


def _verdicts(rows: pd.DataFrame, verdict: str) -> pd.Series:
    """The single-order verdict of each row: ``preferred`` (argmax; the parsed label where no label
    probabilities were read, as ``add_verdicts`` falls back), or ``preferred_parsed``."""
    if verdict == "parsed":
        return rows["preferred_parsed"]
    return rows["preferred"].where(rows["preferred"].notna(), rows["preferred_parsed"])


def _normalised(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in ("dataset", "judge_family", "prompt_group", "criterion", "rubric"):
        df[col] = df[col].fillna("").astype(str) if col in df.columns else ""
    ids = pd.Series(config_ids(df), index=df.index)
    df["config_id"] = (
        df["config_id"].where(df["config_id"].notna(), ids) if "config_id" in df.columns else ids
    )
    df["cluster_id"] = df["cluster_id"].where(df["cluster_id"].notna(), df["item_id"]).astype(str)
    df["item_id"] = df["item_id"].astype(str)
    df["order"] = df["order"].astype(str)
    return df


def _wording_part(df: pd.DataFrame, g: pd.DataFrame, cid: str, var: str, source: str | None) -> pd.DataFrame:
    """The pair-table rows of one configuration's wording ``var`` (``g``: its selected rows)."""
    by = {o: g[g["order"] == o].set_index("item_id") for o in ORDERS}
    items = sorted(set(g["item_id"]), key=natural_key)
    first = by[ORDERS[0]].reindex(items)
    second = by[ORDERS[1]].reindex(items)
    meta = first.combine_first(second)
    h12, h21 = first["human_preferred"], second["human_preferred"]
    clash = h12.notna() & h21.notna() & (h12.astype(str) != h21.astype(str))
    if clash.any():
        item = clash.idxmax()
        raise AnalysisError(
            f"{source_of(df, g.index[g['item_id'] == item], source)}: item_id={item!r} variant={var!r} has "
            f"human_preferred={h12[item]!r} in order 12 but {h21[item]!r} in order 21 (the pair's own "
            "terms are the same in both orders)"
        )
    p12 = first[list(PROBS)].to_numpy(dtype=float)
    p21 = second[list(PROBS)].to_numpy(dtype=float)
    resolved = pm.order_resolved(first["_v"].to_numpy(object), second["_v"].to_numpy(object))
    return pd.DataFrame(
        {
            "config_id": cid,
            "dataset": meta["dataset"].to_numpy(object) if "dataset" in meta else "",
            "backbone": meta["backbone"].to_numpy(object),
            "variant": var,
            "item_id": items,
            "cluster_id": meta["cluster_id"].to_numpy(object),
            "system_1": meta["system_1"].to_numpy(object),
            "system_2": meta["system_2"].to_numpy(object),
            "human": meta["human_preferred"].to_numpy(object),
            "raters": meta["human_raters"].to_numpy(object),
            "first": first["_v"].to_numpy(object),
            "second": second["_v"].to_numpy(object),
            **{f"p12_{c[7:]}": p12[:, k] for k, c in enumerate(PROBS)},
            **{f"p21_{c[7:]}": p21[:, k] for k, c in enumerate(PROBS)},
            "resolved": resolved,
            "two_order": pm.two_order_verdict(resolved),
            "averaged": pm.order_averaged(p12, p21),
        }
    )


def pair_table(
    df: pd.DataFrame,
    *,
    verdict: str = "argmax",
    reference: str = "P1",
    temperature: float | None = None,
    source: str | None = None,
) -> pd.DataFrame:
    """One row per configuration x wording x pair: the two single-order verdicts and what they make.

    Columns: ``config_id``, ``dataset``, ``backbone``, ``variant``, ``item_id``, ``cluster_id``,
    ``system_1``, ``system_2``, ``human``, ``raters``, ``first`` / ``second`` (the verdicts of
    orders 12 / 21 in the pair's terms; None if missing), ``p12_*`` / ``p21_*`` (the probabilities),
    ``resolved`` (order-resolved, with ``"inconsistent"``), ``two_order`` (inconsistent = tie) and
    ``averaged``. ``verdict``: ``"argmax"`` (``preferred``) or ``"parsed"`` (``preferred_parsed``);
    ``"weighted"`` reads as argmax (a preference has no scale score to round). Bad input raises a
    one-line :class:`AnalysisError` naming the file and row.
    """
    check_pairwise_table(df, source=source)
    df = _normalised(df)
    out = []
    for cid in sorted(df["config_id"].unique(), key=natural_key):
        rows = selected(df[df["config_id"] == cid], temperature, df, source)
        rows = rows.assign(_v=_verdicts(rows, verdict))
        for var in variant_order(rows["variant"], reference):
            out.append(_wording_part(df, rows[rows["variant"] == var], cid, var, source))
    if not out:
        return pd.DataFrame()
    t = pd.concat(out, ignore_index=True)
    for c in ("first", "second", "human", "resolved", "two_order", "averaged", "system_1", "system_2"):
        t[c] = t[c].astype(object).where(t[c].notna(), None)
    return t
