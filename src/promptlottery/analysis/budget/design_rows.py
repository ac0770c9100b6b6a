"""The design a configuration of a design sweep (``judge.design=sparse`` or ``adaptive``) was judged
under, read back from the ``design_*`` columns of its rows: every job of a configuration must carry the
same one, and (where the rows record it) the number of items it planned."""

from __future__ import annotations

import pandas as pd

from promptlottery.judging.table import AnalysisError

__all__ = ["one_design", "design_items"]


def one_design(cid: str, rows: pd.DataFrame, params: list[str], what: str) -> pd.Series:
    """The one row of ``params`` values of a configuration's ``rows``; two or more are refused,
    naming the configuration and the ``what`` (``"sparse plans"``) it was judged under."""
    found = rows[params].drop_duplicates()
    if len(found) != 1:
        raise AnalysisError(f"{cid}: its jobs were judged under different {what}: {found.to_dict('records')}")
    return found.iloc[0]


def design_items(cid: str, rows: pd.DataFrame, design: pd.Series, missing: str) -> list[str]:
    """The item ids of ``rows``, sorted, when they are all ``design["design_items"]`` the design
    planned; otherwise refused with ``missing`` (what lacks, and what to do) after the count."""
    items = sorted({str(i) for i in rows["item_id"]})
    planned = int(design["design_items"])
    if len(items) != planned:
        raise AnalysisError(f"{cid}: {planned - len(items)} of {planned} {missing}")
    return items
