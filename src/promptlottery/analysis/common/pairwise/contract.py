"""The pairwise table contract (``docs/pairwise.md``): the columns a pairwise judging job writes
and the one-line errors that name the file and the row breaking it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from promptlottery.judging.table import AnalysisError
from promptlottery.metrics import preference as pm
from promptlottery.modes.pairwise import NAME, ORDERS  # declared once, by the mode

#: the columns a pairwise judging job writes besides the usual ones (docs/pairwise.md)
CONTRACT_COLUMNS = (
    "judge_mode",
    "order",
    "preferred",
    "preferred_parsed",
    "p_pref_1",
    "p_pref_2",
    "p_pref_tie",
    "human_preferred",
    "human_raters",
    "system_1",
    "system_2",
    "cluster_id",
)
REQUIRED = ("item_id", "variant", "backbone", *CONTRACT_COLUMNS)
PROBS = ("p_pref_1", "p_pref_2", "p_pref_tie")


def is_pairwise(df: pd.DataFrame) -> pd.Series:
    """True for the rows of a pairwise judge (``judge_mode`` the pairwise mode's name; none without the column)."""
    if "judge_mode" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["judge_mode"].fillna("").astype(str) == NAME


def source_of(df: pd.DataFrame, rows: Any = None, source: str | None = None) -> str:
    """The judgments file(s) of ``rows`` (the ``run_dir`` column) for an error message."""
    if source:
        return source
    if "run_dir" in df.columns:
        dirs = sorted({str(d) for d in (df["run_dir"] if rows is None else df.loc[rows, "run_dir"]) if d})
        if dirs:
            shown = ", ".join(str(Path(d) / "judgments.parquet") for d in dirs[:3])
            return shown + (f" (+{len(dirs) - 3} more)" if len(dirs) > 3 else "")
    return "the judgments table"


def check_pairwise_table(df: pd.DataFrame, *, source: str | None = None) -> None:
    """Raise a one-line :class:`AnalysisError` naming the file and the column or row that breaks the
    pairwise contract: a missing column, an order other than 12 / 21, a preference outside
    ``"1"`` / ``"2"`` / ``"tie"``, two rows of one pair, wording and order, a pair whose human label
    differs between its orders."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise AnalysisError(
            f"{source_of(df, source=source)}: pairwise judgments lack the column(s) {missing} "
            "(the pairwise table contract, docs/pairwise.md)"
        )
    checks = [("order", ORDERS)] + [
        (c, pm.PREFERENCES) for c in ("preferred", "preferred_parsed", "human_preferred")
    ]
    for col, allowed in checks:
        vals = df[col]
        bad = vals.notna() & ~vals.astype(str).isin(allowed)
        if col == "order":
            bad = ~vals.astype(str).isin(allowed)
        if bad.any():
            i = bad.idxmax()
            r = df.loc[i]
            raise AnalysisError(
                f"{source_of(df, [i], source)}: row item_id={r['item_id']!r} variant={r['variant']!r} "
                f"has {col}={r[col]!r}; expected one of {list(allowed)}"
                + ("" if col == "order" else " or empty")
            )
