"""Tables (CSV + Markdown) and ``report.md`` of the prompt-lottery analysis.

Everything written is a deterministic function of the tables: rows in a fixed order, floats with a
fixed format (``%.4f`` in CSV, 3 decimals in Markdown), no timestamps; re-running the analysis on
the same judgments writes byte-identical files. Values are written by the one table writer of every
report (:mod:`promptlottery.tracking.tables`); this module holds the lottery's conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.tracking import tables

CSV_FLOAT = "%.4f"
#: columns whose values are small by nature (T = 1e-05, the batch noise of a repeat source): written
#: with 4 significant digits instead of 4 decimals, which would print them as 0.0000
CSV_SIGNIFICANT = ("temperature", "cont_range_max", "cont_range_mean")

#: the paper's headline values (Prompt Lottery paper, 2610.38076v1), with the section they come from
PAPER = {
    # §3.2: "Fixed-prompt repeated runs established Cohen's kappa = 0.86 and Fleiss' kappa = 0.89" at the
    # study's T = 10^-5 (§3), and "At T = 0.7, fixed-prompt runs had lower Fleiss' kappa = 0.39"
    "fixed_kappa": "0.89 (at T = 1e-5)",
    "fixed_kappa_cohen": "0.86 (at T = 1e-5)",
    "fixed_kappa_t07": "0.39 (at T = 0.7)",
    "fixed_kappa_cohen_t07": "not reported at T = 0.7 (0.86 is at T = 1e-5)",
    "fixed_kappa_other_t": "not reported at this T (0.89 at T = 1e-5, 0.39 at T = 0.7)",
    # §C.3: "Agreement falls from kappa = 0.89 with a fixed prompt to kappa = 0.24 across paraphrastic variants"
    "paraphrase_kappa": "about 0.24",
    "paraphrase_kappa_cohen": "not reported",
    # §C.3: "Objective tasks show greater invariance (kappa = 0.47-0.69) than subjective tasks (0.26-0.28)"
    "objective_kappa": "0.47-0.69",
    "subjective_kappa": "0.26-0.28",
    # §4.3: "The similarity-stability correlation was r = -0.11 (p = 0.157)"
    "similarity_r": "r = -0.11 (p = 0.157)",
    # §4.4: "SQuAD v2 had tau = 0.176 and 43.3% rank changes"
    "squad_tau": "tau = 0.176",
    "squad_rank_changes": "43.3% rank changes",
    # App. E: "SQuAD v2 and SummEval exhibit reversals, while MTBench retains its ordering" (no number)
    "summeval_reversals": "reversals (App. E, no number printed)",
    # §5.2: "The default prompt matches plurality in 94.7% of binary cases but only 44.0% overall"
    "p1_match_binary": "94.7%",
    "p1_match_all": "44.0%",
    # §5.2 / §5.2.1, non-binary tasks: 58.73% strict plurality = 37.68% by the third call + 21.05% by
    # the fifth; 41.27% never converge; full (adaptive) aggregation costs 4.247 calls
    "cluster_share": "58.73% (non-binary)",
    "converged_by_3": "37.68% (non-binary)",
    "converged_by_5": "21.05% (non-binary)",
    "never_converged": "41.27% (non-binary)",
    "adaptive_calls": "4.247 calls (non-binary)",
}
#: the paper column of a row of our own beside a paper row measured on another population
OURS_ALL_SCALES = "(ours: all scales pooled; the paper's figure is for non-binary tasks)"


def write_table(
    df: pd.DataFrame,
    name: str,
    tables_dir: str | Path,
    *,
    columns: dict[str, str] | None = None,
    note: str | None = None,
) -> dict:
    """``<name>.csv`` (all columns) and ``<name>.md`` (``columns``: source -> header, or all; ``note``
    a line above the table), in the lottery's conventions: CSV floats ``%.4f``
    (:data:`CSV_SIGNIFICANT` columns 4 significant digits). With a ``note`` (a fake judge's run,
    :func:`~promptlottery.analysis.lottery.render.fake_judge_line`) the CSV also carries
    :data:`FAKE_COLUMN` (true on every row; in the header of an empty table), so no CSV of a fake
    run, pooled or empty, reads as a model's."""
    small = {c: _csv_small for c in CSV_SIGNIFICANT}
    markdown = (f"{note}\n\n" if note else "") + markdown_table(df, columns) + "\n"
    return tables.write_table(
        mark_fake(df, bool(note)),
        tables_dir,
        name,
        markdown=markdown,
        float_format=CSV_FLOAT,
        csv_formats=small,
    )


#: the column every CSV of a fake judge's run carries (true on every row)
FAKE_COLUMN = "judge_is_fake"


def mark_fake(df: pd.DataFrame, fake: bool) -> pd.DataFrame:
    """``df`` with :data:`FAKE_COLUMN` (true) appended when ``fake``; ``df`` itself otherwise."""
    return df.assign(**{FAKE_COLUMN: True}) if fake else df


def markdown_table(df: pd.DataFrame, columns: dict[str, str] | None = None) -> str:
    """A Markdown table of the one writer (``tracking.tables``); ``columns`` maps source columns to
    headers (default: all); :data:`CSV_SIGNIFICANT` columns with 4 significant digits."""
    return tables.markdown_table(df, columns, formats={c: _small for c in CSV_SIGNIFICANT})


def _csv_small(v: Any) -> str:
    return "" if pd.isna(v) else f"{v:.4g}"


def _small(x: Any) -> str:
    """A value of a :data:`CSV_SIGNIFICANT` column: 4 significant digits (``1e-05``, ``4.1e-06``)."""
    return f"{x:.4g}" if isinstance(x, (float, np.floating)) and np.isfinite(x) else tables.fmt(x)


def with_ci_columns(
    df: pd.DataFrame, measures: Sequence[str], *, pct: bool = False, with_n: bool = False
) -> pd.DataFrame:
    """A copy with each ``m`` replaced by the string ``est [lo, hi]`` (for Markdown); ``with_n``:
    ``est [lo, hi] (n=k)`` from the measure's own ``m_n`` column, where it has one."""
    out = df.copy()
    f = tables.pct_ci if pct else tables.ci
    for m in measures:
        if m in out.columns:
            n = len(out)
            cells = [
                f(e, lo, hi)
                for e, lo, hi in zip(_f(out[m], n), _f(out.get(f"{m}_lo"), n), _f(out.get(f"{m}_hi"), n))
            ]
            if with_n and f"{m}_n" in out.columns:
                cells = [c if pd.isna(k) else f"{c} (n={int(k)})" for c, k in zip(cells, out[f"{m}_n"])]
            out[m] = cells
    return out


def _f(s: pd.Series | None, n: int) -> list[float]:
    if s is None:
        return [np.nan] * n
    return pd.to_numeric(s, errors="coerce").astype(float).tolist()


def na_paragraph(why: str) -> str:
    return f"n/a: {why}"


class Report:
    """Accumulates the Markdown of ``report.md`` section by section."""

    def __init__(self, title: str):
        self.parts: list[str] = [f"# {title}", ""]

    def h(self, text: str, level: int = 2) -> None:
        self.parts += ["#" * level + " " + text, ""]

    def p(self, text: str) -> None:
        self.parts += [text, ""]

    def bullets(self, items: Sequence[str]) -> None:
        self.parts += [f"- {i}" for i in items] + [""]

    def table(
        self, df: pd.DataFrame, columns: dict[str, str] | None = None, *, empty: str | None = None
    ) -> None:
        if df is None or df.empty:
            self.p(na_paragraph(empty or "no rows"))
        else:
            self.p(markdown_table(df, columns))

    def figure(self, path: Path | None, out_dir: Path, alt: str, *, missing: str) -> None:
        if path is None:
            self.p(na_paragraph(f"no figure: {missing}"))
        else:
            self.p(f"![{alt}]({Path(path).relative_to(out_dir).as_posix()})")

    def notes(self, df: pd.DataFrame, key: str, note_col: str) -> None:
        if df is None or df.empty or note_col not in df.columns:
            return
        rows = [(k, n) for k, n in zip(df[key], df[note_col]) if isinstance(n, str) and n]
        if rows:
            self.p("Notes:")
            self.bullets([f"{k}: {n}" for k, n in rows])

    def text(self) -> str:
        return "\n".join(self.parts).rstrip() + "\n"
