"""The rubric study's comparisons and its paper-shaped tables.

Every number is Kendall's tau-b (``metrics.kendall_tau``) between two rankings of the same items,
with a 95% percentile bootstrap interval over items (``metrics.bootstrap_ci``). Analytic scores
become one ranking by Pareto dominance (essays, ``metrics.pareto_dominance_tau``: A is above B only
if no criterion is lower and one is higher) or by the yes-ratio (instruction following: the mean
logprob-weighted yes rating of an item's questions; with hard argmax answers,
``metrics.ratio_tau``). Conditions inside one block of a table are compared pairwise with the
paired bootstrap test (``metrics.paired_bootstrap_test``), Bonferroni-corrected over the block's
pairwise comparisons (three conditions: alpha / 3; two: none; ``rubrics.ci``); a cell carries the
mark of every condition it differs from significantly.

Tables (numbered like the paper's; Table 5 there is not a results table):

1. Delta rater: human vs model, holistic and per criterion.
2. Delta rubric: holistic vs analytic (aggregated), for the humans and for each model.
3. Delta rater + rubric (human holistic vs model analytic, model holistic vs human analytic), and
   model-vs-model agreement between backbones.
4. Tables 1-3's human comparisons on items where the raters agree vs disagree, with the difference
   and its significance (``rubrics.strata``); ``table4_levels``, ours: full / partial / none.
6. Instruction following: model-only comparisons and the non-human (GPT-4) reference.
7. Positional bias of batch mode: agreement by criterion position, batch vs separate.

The building blocks live beside this file: ``cells`` (Settings, Cell, Table), ``study_data``
(StudyData), ``ci`` (one block's CIs and paired tests), ``strata`` (Table 4).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd

from promptlottery.metrics import kendall_tau, ratio_tau
from promptlottery.rubrics.cells import HUMAN, NOT_APPLICABLE, TITLES, UNTESTED, Cell, Settings, Table
from promptlottery.rubrics.ci import (
    _answered,
    _columns_tau,
    _flip,
    _mean_shift,
    block_cells,
    block_footers,
    marks_footer,
    stats_footer,
)
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.strata import table4, table4_levels
from promptlottery.rubrics.study_data import StudyData

__all__ = [
    "HUMAN",
    "NOT_APPLICABLE",
    "UNTESTED",
    "Cell",
    "Settings",
    "StudyData",
    "Table",
    "block_cells",
    "build_tables",
]


def _cond_rows(conds: list[RubricCondition], values: Callable[[RubricCondition], np.ndarray | None]):
    return [(c, c.display, values(c)) for c in conds]


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
    t.footer = block_footers(d, s)
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
    t.footer = [marks_footer(d.analytic_conditions(), "Model blocks"), stats_footer(s)]
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
        *block_footers(d, s),
        "Model vs model: tau-b between the two backbones' scores of the same items.",
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
        *block_footers(d, s),
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
        marks_footer([*batches, sep], "Reference blocks"),
        stats_footer(s),
        f"Reference: {ref_name or 'none'}. Position k = the k-th criterion of the batch reply, scored with the "
        "model's own greedy answers for positions 1..k-1. The mean score shift row is a mean difference of "
        "ratings (not a tau), with its bootstrap CI.",
    ]
    return t


def build_tables(d: StudyData, s: Settings) -> tuple[list[Table], pd.DataFrame]:
    """Every table of the study, and the pairwise significance tests behind their marks."""
    tests: list[dict] = []
    tables = []
    for make in (table1, table2, table3, table4, table4_levels, table6, table7):
        before = len(tests)
        t = make(d, s, tests)
        if t is None:
            continue
        ran = [x for x in tests[before:] if "error" not in x]
        t.footer.append(
            f"Tests behind this table's marks: {len(ran)} run, "
            f"{sum(bool(x['significant']) for x in ran)} significant, "
            f"{len(tests) - before - len(ran)} could not run (significance.csv has each one)."
        )
        tables.append(t)
    return tables, pd.DataFrame(tests)
