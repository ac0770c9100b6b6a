"""The rubric tables' building blocks: statistics settings, one cell, one table and its layouts.

A cell that cannot be computed says why ("n/a: ..."); "—" marks a cell that does not apply to
its row (a human-only row in a backbone column, or the reverse).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from promptlottery.tracking.tables import fmt, markdown_table

HUMAN = "human"
NOT_APPLICABLE = "—"
UNTESTED = "§"  # a paired test of this cell could not run (too few resamples with a defined tau)
STRATA_DIFFER = "°"  # the two rater-agreement strata differ significantly (Table 4)
TITLES = {
    # the paper's tables, numbered and laid out as the rubric paper's (Table 5 there lists the prompts)
    "table1": "Table 1. Kendall's tau on AES: Delta rater and Delta rubric",
    "table2": "Table 2. Kendall's tau on IF: Delta rater and Delta rubric",
    "table3": "Table 3. Kendall's tau between the two models",
    "table4": "Table 4. Kendall's tau for Delta rater + rubric",
    "table6": "Table 6. Kendall's tau on AES: raters agree vs disagree (holistic prompts)",
    "table7": "Table 7. Kendall's tau on IF: full / partial / no human agreement (Delta rater)",
    # ours, each under a name of its own
    "ours_agree_disagree": "Ours: every human comparison on items where the two raters agree vs disagree",
    "ours_agreement_levels": "Ours: human comparisons by rater agreement level (full / partial / none)",
    "ours_if_gpt4_reference": "Ours: instruction following, model-only comparisons and the GPT-4 (not human) reference",
    "ours_positional_bias": "Ours: positional bias in batch mode, agreement by criterion position",
    "ours_if_yes_skew": "Ours: instruction following, yes-skew of the analytic answers by condition (§5.1)",
    "ours_separate_vs_batch": "Ours: criteria where the separate prompt beats the batch prompt, model vs model (§A.1)",
    "ours_if_analytic_agreement": "Ours: instruction following, full vs partial agreement of three annotators' "
    "analytic answers (§5.3)",
}
PAPER = "paper"  # Cell.source of a value printed in the paper


@dataclass
class Settings:
    """``rubric.stats``: bootstrap resamples, CI level, items needed for a cell, seed.

    ``n_comparisons`` None (the default) sets the Bonferroni correction per block from the number
    of conditions it compares (``ci.comparisons_in_block``); an integer forces it for every block.
    """

    n_resamples: int = 1000
    level: float = 0.95
    n_comparisons: int | None = None
    min_items: int = 5
    seed: int = 0


@dataclass
class Cell:
    table: str
    block: str
    row: str
    column: str
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    marks: str = ""
    note: str = ""  # why there is no number ("n/a: ...") or what the number is
    condition: str = ""
    source: str = "ours"  # "ours" (measured here) or "paper" (the rubric paper's printed value)
    #: "k/R" when the interval rests on the k of R resamples where the statistic is defined
    ci_resamples: str = ""

    def text(self) -> str:
        if self.estimate is None:
            return self.note or NOT_APPLICABLE
        if self.low is None or self.high is None:
            ci = " (no CI)" if self.note.startswith("no CI") else ""
        else:
            ci = f" [{fmt(self.low)}, {fmt(self.high)}]"
            ci += f" (CI on {self.ci_resamples} resamples)" if self.ci_resamples else ""
        return f"{fmt(self.estimate)}{ci}{self.marks}"


@dataclass
class Table:
    id: str
    title: str
    cells: list[Cell] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)
    n_in_column_order: bool = False  # the n column lists a row's item counts by column, not sorted
    #: the columns' order (the paper's: per model, its conditions); others follow in insertion order
    column_order: list[str] = field(default_factory=list)

    def long(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(c) for c in self.cells])

    def wide(self) -> pd.DataFrame:
        """Rows (block, row) x columns, each cell its text; rows and columns in insertion order."""
        if not self.cells:
            return pd.DataFrame()
        rows = list(dict.fromkeys((c.block, c.row) for c in self.cells))
        seen = list(dict.fromkeys(c.column for c in self.cells))
        cols = [c for c in self.column_order if c in seen] + [c for c in seen if c not in self.column_order]
        grid = {(c.block, c.row, c.column): c for c in self.cells}
        out = []
        for block, row in rows:
            found = [
                grid[(block, row, col)].n
                for col in cols
                if (block, row, col) in grid and grid[(block, row, col)].source != PAPER
            ]
            ns = (
                list(dict.fromkeys(n for n in found if n))
                if self.n_in_column_order
                else sorted(set(found) - {0})
            )
            rec = {"block": block, "row": row, "n": "/".join(map(str, ns)) if ns else ""}
            for col in cols:
                cell = grid.get((block, row, col))
                rec[col] = cell.text() if cell is not None else NOT_APPLICABLE
            out.append(rec)
        return pd.DataFrame(out)

    def markdown(self) -> str:
        wide = self.wide()
        lines = [f"### {self.title}", ""]
        if wide.empty:
            return "\n".join(lines + ["(no rows)", ""])
        # a block's name on its first row only
        shown = wide.assign(block=wide["block"].where(wide["block"] != wide["block"].shift(), ""))
        header = {"block": "Block", "row": "Condition", "n": "n", **{c: c for c in wide.columns[3:]}}
        lines += [markdown_table(shown, header), ""]
        lines.extend(self.footer)
        return "\n".join(lines) + "\n"
