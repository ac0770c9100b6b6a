"""Formatting helpers of the judge card's Markdown page and figure."""

from __future__ import annotations

import numpy as np


def fmt_num(x, d: int = 2) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if np.isnan(x):
        return "n/a"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{d}f}"


def ci_text(c, d: int = 2) -> str:
    return f"[{fmt_num(c[0], d)}, {fmt_num(c[1], d)}]"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def section_text(title: str, sec: dict, body: str) -> str:
    if "missing" in sec:
        return f"## {title}\n\nMissing: {sec['missing']}\n"
    return f"## {title}\n\n{body}\n\nSource: {sec.get('source', '')}\n"
