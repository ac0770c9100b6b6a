"""The one table writer of every report (the lottery analysis, the gate, the rubric study).

A value prints the same way in every report (:func:`fmt`): None -> ``""``, a bool -> ``yes`` /
``no``, an integer as it is, NaN -> ``n/a``, an infinity -> ``inf`` / ``-inf``, a float with
``digits`` decimals, text as it is. What a report chooses is the precision of its floats: its
``digits`` and, with ``small="significant"``, a non-zero float smaller than ``10**(1 - digits)``
written with ``digits`` significant digits (a learning rate ``0.0005``, not ``0.001``). In a
Markdown cell a ``|`` is escaped and a line break becomes a space. Everything written is a
deterministic function of the table: the same table writes the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "ON_OURS",
    "ci",
    "fmt",
    "left_out_lines",
    "markdown_cell",
    "markdown_table",
    "pct_ci",
    "write_table",
]

#: the words of every report (and of the paper ledger) for a row that measures what a paper defines
#: on our population (our items, configurations, backbones), as opposed to the paper's own population
ON_OURS = "paper's definition on our population"


def fmt(x: Any, digits: int = 3, *, small: str = "fixed") -> str:
    """The text of one value (see the module docstring); ``small``: ``fixed`` or ``significant``."""
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if digits == 0 and float(x).is_integer() and abs(x) < 1e6:
            return str(int(x))
        if small == "significant" and x != 0 and abs(x) < 10 ** (1 - digits):
            return f"{x:.{digits}g}"
        return f"{x:.{digits}f}"
    return str(x)


def ci(est: Any, lo: Any, hi: Any, digits: int = 3) -> str:
    """``0.243 [0.120, 0.350]``; ``n/a`` when the estimate is undefined, ``[n/a]`` for an undefined CI."""
    if est is None or (isinstance(est, (float, np.floating)) and not np.isfinite(est)):
        return "n/a"
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{est:.{digits}f} [n/a]"
    return f"{est:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def pct_ci(est: Any, lo: Any, hi: Any) -> str:
    """``24.3% [12.0, 35.0]``: a share and its CI in percent."""
    if est is None or not np.isfinite(est):
        return "n/a"
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{100 * est:.1f}% [n/a]"
    return f"{100 * est:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def markdown_cell(x: Any, digits: int = 3, *, small: str = "fixed") -> str:
    """:func:`fmt`, made safe inside a Markdown table row."""
    return fmt(x, digits, small=small).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    df: pd.DataFrame | None,
    columns: Mapping[Any, str] | None = None,
    *,
    digits: int = 3,
    small: str = "fixed",
    formats: Mapping[Any, Callable[[Any], str]] | None = None,
) -> str:
    """A GitHub Markdown table (no trailing newline); ``columns`` maps source columns to headers
    (default: all, by name); ``formats`` gives a column its own text function (then escaped)."""
    if df is None or df.empty:
        return "_(empty table)_"
    columns = columns or {c: str(c) for c in df.columns}
    cols = [c for c in columns if c in df.columns]
    formats = formats or {}
    lines = ["| " + " | ".join(str(columns[c]) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df[cols].itertuples(index=False):
        cells = (
            _escape(formats[c](v)) if c in formats else markdown_cell(v, digits, small=small)
            for c, v in zip(cols, row)
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def left_out_lines(skipped: Mapping[str, str], why: str) -> list[str]:
    """The closing lines of a report that left configurations out: a blank line, ``Left out (<why>):``
    and one bullet per configuration id (sorted) with its own reason; none when ``skipped`` is empty."""
    if not skipped:
        return []
    return ["", f"Left out ({why}):", *(f"- `{k}`: {v}" for k, v in sorted(skipped.items()))]


def write_table(
    df: pd.DataFrame,
    folder: str | Path,
    name: str,
    *,
    markdown: str | None = None,
    float_format: str | None = None,
    csv_formats: Mapping[Any, Callable[[Any], str]] | None = None,
) -> dict[str, Path]:
    """``<name>.csv`` (every column; ``float_format`` as pandas takes it, ``csv_formats`` per column)
    and ``<name>.md`` (``markdown``, default :func:`markdown_table` of ``df``) in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv = folder / f"{name}.csv"
    own = {c: df[c].map(f) for c, f in (csv_formats or {}).items() if c in df.columns}
    df.assign(**own).to_csv(csv, index=False, float_format=float_format, lineterminator="\n")
    md = folder / f"{name}.md"
    md.write_text(markdown_table(df) + "\n" if markdown is None else markdown, encoding="utf-8")
    return {"csv": csv, "md": md}


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
