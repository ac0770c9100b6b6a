"""The rubric study's comparisons and its paper-shaped tables.

Every number is Kendall's tau-b (``metrics.kendall_tau``) between two rankings of the same items,
with a 95% percentile bootstrap interval over items (``metrics.bootstrap_ci``). Analytic scores
become one ranking by Pareto dominance (essays, ``metrics.pareto_dominance_tau``: A is above B only
if no criterion is lower and one is higher) or by the yes-ratio (instruction following: the mean
logprob-weighted yes rating of an item's questions; with hard argmax answers,
``metrics.ratio_tau``). Conditions inside one block of a table are compared pairwise with the
paired bootstrap test (``metrics.paired_bootstrap_test``, Bonferroni over ``n_comparisons``); a
cell carries the mark of every condition it differs from significantly.

Tables (numbered like the paper's; Table 5 there is not a results table):

1. Delta rater: human vs model, holistic and per criterion.
2. Delta rubric: holistic vs analytic (aggregated), for the humans and for each model.
3. Delta rater + rubric (human holistic vs model analytic, model holistic vs human analytic), and
   model-vs-model agreement between backbones.
4. Tables 1-3's human comparisons stratified by the raters' agreement (full / partial / none).
6. Instruction following: model-only comparisons and the non-human (GPT-4) reference.
7. Positional bias of batch mode: agreement by criterion position, batch vs separate.

A cell that cannot be computed says why ("n/a: ..."); "—" marks a cell that does not apply to
its row (a human-only row in a backbone column, or the reverse).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.data.schema import Item
from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    kendall_tau,
    paired_bootstrap_test,
    pareto_dominance_tau,
    ratio_tau,
)
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.tasks import STRATA, RubricTask

HUMAN = "human"
NOT_APPLICABLE = "—"
UNTESTED = "§"  # a paired test of this cell could not run (too few resamples with a defined tau)
TITLES = {
    "table1": "Table 1. Delta rater: human vs model agreement (Kendall tau-b)",
    "table2": "Table 2. Delta rubric: holistic vs analytic agreement within a rater",
    "table3": "Table 3. Delta rater + rubric, and model-vs-model agreement",
    "table4": "Table 4. Human comparisons by rater agreement level",
    "table6": "Table 6. Instruction following: model-only comparisons and the non-human reference",
    "table7": "Table 7. Positional bias in batch mode: agreement by criterion position",
}


@dataclass
class Settings:
    n_resamples: int = 1000
    level: float = 0.95
    n_comparisons: int = 3
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

    def text(self) -> str:
        if self.estimate is None:
            return self.note or NOT_APPLICABLE
        ci = "" if self.low is None or self.high is None else f" [{self.low:.3f}, {self.high:.3f}]"
        return f"{self.estimate:.3f}{ci}{self.marks}"


@dataclass
class Table:
    id: str
    title: str
    cells: list[Cell] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)

    def long(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(c) for c in self.cells])

    def wide(self) -> pd.DataFrame:
        """Rows (block, row) x columns, each cell its text; rows and columns in insertion order."""
        if not self.cells:
            return pd.DataFrame()
        rows = list(dict.fromkeys((c.block, c.row) for c in self.cells))
        cols = list(dict.fromkeys(c.column for c in self.cells))
        grid = {(c.block, c.row, c.column): c for c in self.cells}
        out = []
        for block, row in rows:
            ns = sorted({grid[(block, row, col)].n for col in cols if (block, row, col) in grid} - {0})
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
        header = ["Block", "Condition", "n", *wide.columns[3:]]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join(["---"] * len(header)) + "|")
        last = None
        for rec in wide.itertuples(index=False):
            block = rec[0] if rec[0] != last else ""
            last = rec[0]
            lines.append("| " + " | ".join(str(v).replace("|", "/") for v in (block, *rec[1:])) + " |")
        lines.append("")
        lines.extend(self.footer)
        return "\n".join(lines) + "\n"


# ============================================================================ the study's arrays
class StudyData:
    """The sample's human labels and every model's scores as aligned arrays (NaN = missing)."""

    def __init__(
        self,
        task: RubricTask,
        items: list[Item],
        scores: pd.DataFrame,
        conditions: list[RubricCondition],
        backbones: list[str],
    ):
        self.task, self.items, self.conditions, self.backbones = task, items, conditions, backbones
        self.ids = [it.id for it in items]
        self.n = len(items)
        crits = [task.criteria(it) for it in items]
        self.width = max((len(c) for c in crits), default=0)
        first = crits[0] if crits else []
        self.criterion_names = (
            [c.name for c in first]
            if task.fixed_criteria
            else [f"position {k}" for k in range(1, self.width + 1)]
        )
        self.has_human = task.human_note is None
        nan = np.full((self.n, self.width), np.nan)
        self.human_holistic = np.array([_num(task.human_holistic(it)) for it in items], dtype=float)
        self.human_analytic = nan.copy()
        self.reference_holistic = np.array([_num(task.reference_holistic(it)) for it in items], dtype=float)
        self.reference_analytic = nan.copy()
        for i, (it, cs) in enumerate(zip(items, crits)):
            for j, c in enumerate(cs):
                self.human_analytic[i, j] = _num(task.human_criterion(it, c.id))
                self.reference_analytic[i, j] = _num(task.reference_criterion(it, c.id))
        self.strata = [task.agreement(it) for it in items]
        self.scores = scores
        self._cache: dict[tuple, np.ndarray] = {}

    def holistic_conditions(self) -> list[RubricCondition]:
        return [c for c in self.conditions if c.kind == "holistic"]

    def analytic_conditions(self) -> list[RubricCondition]:
        return [c for c in self.conditions if c.kind == "analytic"]

    def _matrix(self, backbone: str, condition: str, column: str) -> np.ndarray:
        key = (backbone, condition, column)
        if key not in self._cache:
            df = self.scores[(self.scores["backbone"] == backbone) & (self.scores["condition"] == condition)]
            out = np.full((self.n, max(self.width, 1)), np.nan)
            pos = {iid: i for i, iid in enumerate(self.ids)}
            for iid, p, v in zip(df["item_id"], df["position"], df[column]):
                if iid in pos and v is not None and not pd.isna(v):
                    out[pos[iid], max(int(p), 1) - 1] = float(v)
            self._cache[key] = out
        return self._cache[key]

    def holistic(self, backbone: str, cond: RubricCondition) -> np.ndarray:
        return self._matrix(backbone, cond.name, "score")[:, 0]

    def analytic(self, backbone: str, cond: RubricCondition, column: str = "score") -> np.ndarray:
        return self._matrix(backbone, cond.name, column)[:, : self.width]

    # -- the analytic aggregate: a matrix for Pareto dominance, a vector for the yes-ratio --------
    def aggregate(self, matrix: np.ndarray) -> np.ndarray:
        if self.task.aggregate == "pareto":
            return matrix
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(matrix, axis=1)

    @property
    def aggregate_stat(self) -> Callable:
        return pareto_dominance_tau if self.task.aggregate == "pareto" else kendall_tau

    @property
    def aggregate_name(self) -> str:
        return "Pareto dominance" if self.task.aggregate == "pareto" else "yes-ratio"


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


# ================================================================================ computations
def _complete(a: np.ndarray) -> np.ndarray:
    """Items with a value (a vector) or with every criterion scored (a matrix)."""
    return ~np.isnan(a) if a.ndim == 1 else ~np.isnan(a).any(axis=1)


def _answered(a: np.ndarray) -> np.ndarray:
    """Items with at least one answer: a ragged yes/no matrix (items have different question counts)."""
    return ~np.isnan(a).all(axis=1)


def _undefined_reason(caught: list) -> str:
    msgs = [str(w.message) for w in caught if issubclass(w.category, UndefinedMetricWarning)]
    return f"n/a: {msgs[-1]}" if msgs else "n/a: undefined on these items"


def _flip(stat: Callable) -> Callable:
    """``stat(a, b)`` called as ``stat(b, a)``: the fixed reference then comes first."""

    def flipped(ref, cond):
        return stat(cond, ref)

    batch = getattr(stat, "batch", None)
    if batch is not None:  # keep the vectorised bootstrap of ``stat``
        flipped.batch = lambda idx, ref, cond: batch(idx, cond, ref)  # type: ignore[attr-defined]
    return flipped


def _columns_tau(_ref, pair: np.ndarray) -> float:
    """Kendall tau between the two columns of ``pair`` (model-vs-model; ``_ref`` is unused)."""
    return kendall_tau(pair[:, 0], pair[:, 1])


def _mean_shift(_ref, pair: np.ndarray) -> float:
    """Mean difference between the two columns of ``pair`` (``_ref`` is unused)."""
    return float(np.mean(pair[:, 0] - pair[:, 1]))


# vectorised forms over bootstrap resamples (metrics.bootstrap uses ``stat.batch`` when present)
_columns_tau.batch = lambda idx, _ref, pair: kendall_tau.batch(idx, pair[:, 0], pair[:, 1])  # type: ignore[attr-defined]
_mean_shift.batch = lambda idx, _ref, pair: (pair[:, 0] - pair[:, 1])[idx].mean(axis=1)  # type: ignore[attr-defined]


def block_cells(
    table: str,
    block: str,
    column: str,
    stat: Callable,
    ref: np.ndarray | None,
    conds: list[tuple[RubricCondition | None, str, np.ndarray | None]],
    s: Settings,
    *,
    note: str | None = None,
    test: bool = True,
    tests: list[dict] | None = None,
    complete: Callable[[np.ndarray], np.ndarray] = _complete,
) -> list[Cell]:
    """One block of one column: ``stat(ref, cond)`` per condition, CIs, pairwise paired tests.

    ``conds`` holds (condition, row label, values); values None or ``note`` given: the row is n/a.
    Items are those complete in ``ref`` and in every condition with enough complete items, so the
    conditions of a block are compared on the same items.
    """
    cells = [Cell(table, block, label, column, condition=c.name if c else "") for c, label, _ in conds]
    if note is not None or ref is None:
        for cell in cells:
            cell.note = note or "n/a: no reference labels"
        return cells
    base = _complete(ref)
    usable = []
    for k, (_c, _label, values) in enumerate(conds):
        if values is None:
            cells[k].note = "n/a: not run"
            continue
        n_k = int((base & complete(values)).sum())
        if n_k < s.min_items:
            cells[k].n, cells[k].note = n_k, f"n/a: n={n_k} complete items, need {s.min_items}"
        else:
            usable.append(k)
    mask = base.copy()
    for k in usable:
        mask &= complete(conds[k][2])
    if usable and mask.sum() < s.min_items:
        for k in usable:
            cells[k].n, cells[k].note = (
                int(mask.sum()),
                f"n/a: n={int(mask.sum())} items complete in every condition, need {s.min_items}",
            )
        return cells
    r = ref[mask]
    for k in usable:
        v = conds[k][2][mask]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = stat(r, v)
        cells[k].n = int(mask.sum())
        if est is None or not math.isfinite(est):
            cells[k].note = _undefined_reason(caught)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            ci = bootstrap_ci(stat, r, v, n_resamples=s.n_resamples, level=s.level, seed=s.seed)
        cells[k].estimate = float(est)
        cells[k].low = None if not math.isfinite(ci.low) else ci.low
        cells[k].high = None if not math.isfinite(ci.high) else ci.high
    if not test:
        return cells
    defined = [k for k in usable if cells[k].estimate is not None]
    for a, b in itertools.combinations(defined, 2):
        ca, cb = conds[a][0], conds[b][0]
        pair = {"table": table, "block": block, "column": column, "a": ca.name, "b": cb.name}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            try:
                res = paired_bootstrap_test(
                    stat,
                    conds[a][2][mask],
                    conds[b][2][mask],
                    r,
                    n_resamples=s.n_resamples,
                    n_comparisons=s.n_comparisons,
                    level=s.level,
                    seed=s.seed,
                )
            except ValueError as exc:  # too few defined resamples for the Bonferroni ranks
                cells[a].marks += UNTESTED
                cells[b].marks += UNTESTED
                if tests is not None:
                    tests.append({**pair, "error": str(exc)})
                continue
        if res.significant:
            cells[a].marks += cb.mark
            cells[b].marks += ca.mark
        if tests is not None:
            tests.append(
                {
                    **pair,
                    "difference": res.difference,
                    "low": res.low,
                    "high": res.high,
                    "significant": res.significant,
                    "n": int(mask.sum()),
                    "n_comparisons": res.n_comparisons,
                    "n_resamples": res.n_resamples,
                }
            )
    for k in range(len(cells)):
        cells[k].marks = "".join(sorted(set(cells[k].marks), key=cells[k].marks.index))
    return cells


def _cond_rows(conds: list[RubricCondition], values: Callable[[RubricCondition], np.ndarray | None]):
    return [(c, c.display, values(c)) for c in conds]


def _marks_footer(conds: list[RubricCondition], scope: str) -> str:
    marks = ", ".join(f"{c.mark} = differs significantly from {c.display}" for c in conds if c.mark)
    return f"{scope}: {marks}."


def _block_footers(d: StudyData, s: Settings) -> list[str]:
    """The marks of the holistic and the analytic blocks, then the statistics footer."""
    return [
        _marks_footer(d.holistic_conditions(), "Holistic blocks"),
        _marks_footer(d.analytic_conditions(), "Analytic blocks"),
        _stats_footer(s),
    ]


def _stats_footer(s: Settings) -> str:
    alpha = (1 - s.level) / s.n_comparisons
    return (
        f"Significance: paired bootstrap over items ({s.n_resamples} resamples, two-sided, Bonferroni over "
        f"{s.n_comparisons} comparisons: alpha = {alpha:.4f}); {UNTESTED} = a paired test could not run (tau "
        f"undefined on too many resamples). Cells: Kendall tau-b [95% bootstrap CI]; n = items compared; "
        f"{NOT_APPLICABLE} = not applicable to the row."
    )


# ====================================================================================== tables
def table1(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    t = Table("table1", TITLES["table1"])
    note = None if d.has_human else f"n/a: {d.task.human_note}"
    for b in d.backbones:
        t.cells += block_cells(
            "table1",
            "Holistic",
            b,
            kendall_tau,
            d.human_holistic,
            _cond_rows(d.holistic_conditions(), lambda c, b=b: d.holistic(b, c)),
            s,
            note=note,
            tests=tests,
        )
        if d.task.fixed_criteria:
            for j, name in enumerate(d.criterion_names):
                t.cells += block_cells(
                    "table1",
                    name,
                    b,
                    kendall_tau,
                    d.human_analytic[:, j],
                    _cond_rows(d.analytic_conditions(), lambda c, b=b, j=j: d.analytic(b, c)[:, j]),
                    s,
                    note=note,
                    tests=tests,
                )
        else:
            t.cells += block_cells(
                "table1",
                f"Analytic ({d.aggregate_name})",
                b,
                d.aggregate_stat,
                d.aggregate(d.human_analytic),
                _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
                s,
                note=note,
                tests=tests,
            )
    t.footer = _block_footers(d, s)
    return t


def table2(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    t = Table("table2", TITLES["table2"])
    note = None if d.has_human else f"n/a: {d.task.human_note}"
    t.cells += block_cells(
        "table2",
        f"Human holistic vs human analytic ({d.aggregate_name})",
        HUMAN,
        d.aggregate_stat,
        d.human_holistic,
        [(None, "human raters", d.aggregate(d.human_analytic))],
        s,
        note=note,
        test=False,
    )
    for h in d.holistic_conditions():
        for b in d.backbones:
            t.cells += block_cells(
                "table2",
                f"Model holistic ({h.display}) vs model analytic ({d.aggregate_name})",
                b,
                d.aggregate_stat,
                d.holistic(b, h),
                _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
                s,
                tests=tests,
            )
    t.footer = [_marks_footer(d.analytic_conditions(), "Model blocks"), _stats_footer(s)]
    return t


def table3(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    t = Table("table3", TITLES["table3"])
    note = None if d.has_human else f"n/a: {d.task.human_note}"
    for b in d.backbones:
        t.cells += block_cells(
            "table3",
            f"Human holistic vs model analytic ({d.aggregate_name})",
            b,
            d.aggregate_stat,
            d.human_holistic,
            _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
            s,
            note=note,
            tests=tests,
        )
        t.cells += block_cells(
            "table3",
            f"Model holistic vs human analytic ({d.aggregate_name})",
            b,
            _flip(d.aggregate_stat),
            d.aggregate(d.human_analytic),
            _cond_rows(d.holistic_conditions(), lambda c, b=b: d.holistic(b, c)),
            s,
            note=note,
            tests=tests,
        )
    pairs = list(itertools.combinations(d.backbones, 2))
    if not pairs:
        for c in d.conditions:
            t.cells.append(
                Cell(
                    "table3",
                    "Model vs model",
                    c.display,
                    "backbones",
                    note="n/a: one backbone configured (model-vs-model needs two)",
                )
            )
    dummy = np.zeros(d.n)
    for b1, b2 in pairs:
        col = f"{b1} vs {b2}"
        t.cells += block_cells(
            "table3",
            "Model vs model: holistic",
            col,
            _columns_tau,
            dummy,
            _cond_rows(
                d.holistic_conditions(),
                lambda c, b1=b1, b2=b2: np.column_stack([d.holistic(b1, c), d.holistic(b2, c)]),
            ),
            s,
            tests=tests,
        )
        if d.task.fixed_criteria:
            for j, name in enumerate(d.criterion_names):
                t.cells += block_cells(
                    "table3",
                    f"Model vs model: {name}",
                    col,
                    _columns_tau,
                    dummy,
                    _cond_rows(
                        d.analytic_conditions(),
                        lambda c, b1=b1, b2=b2, j=j: np.column_stack(
                            [d.analytic(b1, c)[:, j], d.analytic(b2, c)[:, j]]
                        ),
                    ),
                    s,
                    tests=tests,
                )
        else:
            t.cells += block_cells(
                "table3",
                f"Model vs model: {d.aggregate_name}",
                col,
                _columns_tau,
                dummy,
                _cond_rows(
                    d.analytic_conditions(),
                    lambda c, b1=b1, b2=b2: np.column_stack(
                        [d.aggregate(d.analytic(b1, c)), d.aggregate(d.analytic(b2, c))]
                    ),
                ),
                s,
                tests=tests,
            )
    t.footer = [
        *_block_footers(d, s),
        "Model vs model: tau-b between the two backbones' scores of the same items.",
    ]
    return t


def table4(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    t = Table("table4", TITLES["table4"])
    if not any(d.strata):
        note = f"n/a: {d.task.human_note}" if not d.has_human else "n/a: no per-rater labels"
        t.cells.append(Cell("table4", "All strata", "agreement levels", HUMAN, note=note))
        for b in d.backbones:
            t.cells.append(Cell("table4", "All strata", "agreement levels", b, note=note))
        return t
    strata = np.array([x or "" for x in d.strata])
    for level in STRATA:
        keep = strata == level
        n = int(keep.sum())
        label = {
            "full": "Full agreement (raters equal)",
            "partial": "Partial agreement (adjacent scores)",
            "none": "No agreement (scores 2+ apart)",
        }[level]
        sub = (d.human_holistic.copy(), d.human_analytic.copy())
        sub[0][~keep] = np.nan  # items outside the stratum drop out as incomplete
        hh, ha = sub
        t.cells += block_cells(
            "table4",
            f"{label}: human holistic vs human analytic",
            HUMAN,
            d.aggregate_stat,
            hh,
            [(None, d.aggregate_name, d.aggregate(ha))],
            s,
            test=False,
        )
        for b in d.backbones:
            t.cells += block_cells(
                "table4",
                f"{label}: Delta rater, holistic",
                b,
                kendall_tau,
                hh,
                _cond_rows(d.holistic_conditions(), lambda c, b=b: d.holistic(b, c)),
                s,
                tests=tests,
            )
            t.cells += block_cells(
                "table4",
                f"{label}: Delta rater + rubric, model analytic ({d.aggregate_name})",
                b,
                d.aggregate_stat,
                hh,
                _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
                s,
                tests=tests,
            )
        t.footer.append(f"{label}: {n} items in the sample.")
    t.footer = [
        *_block_footers(d, s),
        "Strata: the two raters' holistic scores are equal (full), adjacent (partial) or 2+ apart (none); "
        f"a stratum with fewer than {s.min_items} items is n/a.",
        *t.footer,
    ]
    return t


def table6(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    if d.task.reference_name is None:
        return None
    t = Table("table6", TITLES["table6"])
    ref = d.task.reference_name
    human = f"n/a: {d.task.human_note}" if not d.has_human else None
    for b in d.backbones:
        if human:
            for c in d.conditions:
                t.cells.append(Cell("table6", "Human vs model", c.display, b, note=human, condition=c.name))
        t.cells += block_cells(
            "table6",
            f"{ref} yes-ratio vs model holistic",
            b,
            kendall_tau,
            d.reference_holistic,
            _cond_rows(d.holistic_conditions(), lambda c, b=b: d.holistic(b, c)),
            s,
            tests=tests,
        )
        t.cells += block_cells(
            "table6",
            f"{ref} yes-ratio vs model yes-ratio (logprob-weighted)",
            b,
            kendall_tau,
            d.reference_holistic,
            _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
            s,
            tests=tests,
        )
        t.cells += block_cells(
            "table6",
            f"{ref} yes-ratio vs model yes-ratio (argmax answers, ratio_tau)",
            b,
            ratio_tau,
            d.reference_holistic,
            _cond_rows(d.analytic_conditions(), lambda c, b=b: d.analytic(b, c, "argmax_score")),
            s,
            tests=tests,
            complete=_answered,
        )
    t.footer = [
        *_block_footers(d, s),
        f"{ref}: GPT-4's answers to the decomposed questions shipped with the data - model output, NOT "
        "human labels. Model holistic vs model yes-ratio (Delta rubric) is in Table 2; model vs model in "
        "Table 3.",
    ]
    return t


def table7(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    t = Table("table7", TITLES["table7"])
    batches = [c for c in d.analytic_conditions() if c.mode == "batch"]
    plain = [
        c for c in d.analytic_conditions() if c.mode == "separate" and not c.context and c.examples == "none"
    ]
    if not batches or not plain:
        t.cells.append(
            Cell(
                "table7",
                "Positional bias",
                "batch vs separate",
                "all",
                note="n/a: needs a batch and a plain separate analytic condition",
            )
        )
        return t
    sep = plain[0]
    if d.has_human:
        ref_name, ref = "human", d.human_analytic
    elif d.task.reference_name:
        ref_name, ref = d.task.reference_name, d.reference_analytic
    else:
        ref_name, ref = None, None
    dummy = np.zeros(d.n)
    for bc in batches:
        for j, name in enumerate(d.criterion_names):
            block = f"Position {j + 1}" + (f" ({name})" if d.task.fixed_criteria else "")
            if len(batches) > 1:
                block += f", {bc.display}"
            for b in d.backbones:
                if ref is None:
                    t.cells.append(
                        Cell("table7", block, "reference vs model", b, note="n/a: no reference labels")
                    )
                else:
                    t.cells += block_cells(
                        "table7",
                        block,
                        b,
                        kendall_tau,
                        ref[:, j],
                        [
                            (bc, f"{ref_name} vs {bc.display}", d.analytic(b, bc)[:, j]),
                            (sep, f"{ref_name} vs {sep.display}", d.analytic(b, sep)[:, j]),
                        ],
                        s,
                        tests=tests,
                    )
                both = np.column_stack([d.analytic(b, bc)[:, j], d.analytic(b, sep)[:, j]])
                t.cells += block_cells(
                    "table7",
                    block,
                    b,
                    _columns_tau,
                    dummy,
                    [(None, f"{bc.display} vs {sep.display} (same model)", both)],
                    s,
                    test=False,
                )
                shift = block_cells(
                    "table7",
                    block,
                    b,
                    _mean_shift,
                    dummy,
                    [(None, f"mean score shift, {bc.display} - {sep.display}", both)],
                    s,
                    test=False,
                )
                t.cells += shift
    t.footer = [
        _marks_footer([*batches, sep], "Reference blocks"),
        _stats_footer(s),
        f"Reference: {ref_name or 'none'}. Position k = the k-th criterion of the batch reply, scored with the "
        "model's own greedy answers for positions 1..k-1. The mean score shift row is a mean difference of "
        "ratings (not a tau), with its bootstrap CI.",
    ]
    return t


def build_tables(d: StudyData, s: Settings) -> tuple[list[Table], pd.DataFrame]:
    """Every table of the study, and the pairwise significance tests behind their marks."""
    tests: list[dict] = []
    tables = []
    for make in (table1, table2, table3, table4, table6, table7):
        before = len(tests)
        t = make(d, s, tests)
        if t is None:
            continue
        ran = [x for x in tests[before:] if "error" not in x]
        t.footer.append(
            f"Paired tests behind this table's marks: {len(ran)} run, "
            f"{sum(bool(x['significant']) for x in ran)} significant, "
            f"{len(tests) - before - len(ran)} could not run (significance.csv has each one)."
        )
        tables.append(t)
    return tables, pd.DataFrame(tests)
