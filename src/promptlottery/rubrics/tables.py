"""The rubric study's comparisons and its paper-shaped tables.

Every number is Kendall's tau-b (``metrics.kendall_tau``) between two rankings of the same items,
with a 95% percentile bootstrap interval over items (``metrics.bootstrap_ci``). Analytic scores
become one ranking by Pareto dominance (essays, ``metrics.pareto_dominance_tau``: A is above B only
if no criterion is lower and one is higher) or by the yes-ratio (instruction following: the mean
logprob-weighted yes rating of an item's questions; with hard argmax answers,
``metrics.ratio_tau``). Conditions inside one block of a table are compared pairwise with the
paired bootstrap test (``metrics.paired_bootstrap_test``), Bonferroni-corrected over the block's
pairwise comparisons (three conditions: alpha / 3; two: none; ``rubrics.ci``); a cell carries the
paper's marks (``ci.paper_marks``: † within holistic, ⋆ separate vs batch, s / b with ↑ ↓ on edited).

Tables, numbered and laid out as the paper's (rows = the holistic score "H." and the criteria by
the paper's abbreviations, columns = backbone x condition, then the paper's printed values in
``paper <model>: <condition>`` columns, ``rubrics.paper_reference``; Table 5 there lists prompts):

1 / 2. Delta rater and Delta rubric (Table 1 on AES, Table 2 on IF);
3. the two models against each other;
4. Delta rater + rubric (LLM_H -> H_A, H_H -> LLM_A);
6. AES holistic Delta rater on essays whose raters agree vs disagree (``rubrics.strata``);
7. IF by full / partial / no agreement of three annotators (missing here: no human labels).

Ours, each under its own name: ``ours_agree_disagree`` and ``ours_agreement_levels``
(``rubrics.strata``), ``ours_if_gpt4_reference`` (the GPT-4, not human, reference on InFoBench) and
``ours_positional_bias`` (batch mode by criterion position); ``rubrics.claims``: ``ours_if_yes_skew``
(§5.1), ``ours_separate_vs_batch`` (§A.1's "8 out of 13") and ``ours_if_analytic_agreement`` (§5.3).

The building blocks live beside this file: ``cells`` (Settings, Cell, Table), ``study_data``
(StudyData), ``ci`` (one block's CIs, paired tests and marks), ``strata`` (Tables 6, 7 and ours).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd

from promptlottery.metrics import kendall_tau, ratio_tau
from promptlottery.rubrics.cells import HUMAN, NOT_APPLICABLE, PAPER, TITLES, UNTESTED, Cell, Settings, Table
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
from promptlottery.rubrics.claims import ours_if_analytic_agreement, ours_if_yes_skew, ours_separate_vs_batch
from promptlottery.rubrics.paper_reference import ABBREV, HOLISTIC_ROW, HUMAN_COLUMN, MODELS, paper_value
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.strata import ours_agree_disagree, ours_agreement_levels, table6, table7
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


# ================================================================== the paper's layout, helpers
def _abbrev(d: StudyData, name: str) -> str:
    """The paper's row name of a criterion ("Ide." for set 1's Content), else the name itself."""
    ds = d.task.paper_dataset
    return ABBREV.get(int(ds), {}).get(name, name) if ds and ds.isdigit() else name


def _pivot(cells: list[Cell], section: str, row: str, prefix: str) -> list[Cell]:
    """``block_cells``' cells (one row per condition) as one paper row: column = "<prefix>: <condition>"."""
    for c in cells:
        c.block, c.row, c.column = section, row, f"{prefix}: {c.row}"
    return cells


def _paper_cells(
    t: Table, ref_table: str, d: StudyData, section: str, row: str, cols, block: str | None = None
) -> list[Cell]:
    """The paper's values of one row (``paper_reference``), one column per model and condition."""
    ds = d.task.paper_dataset
    out = []
    for col in cols:
        for model, (tau, marks) in paper_value(ref_table, ds or "", section, row, col).items():
            out.append(
                Cell(
                    t.id,
                    block or section,
                    row,
                    f"paper {model}: {col}",
                    tau,
                    marks=marks,
                    note="paper",
                    source=PAPER,
                )
            )
    return out


def _paper_columns(cols, models=MODELS) -> list[str]:
    return [f"paper {m}: {c}" for m in models for c in cols]


def _no_paper_note(d: StudyData) -> str:
    return (
        ""
        if d.task.paper_dataset
        else "The paper has no values for this dataset (it reports ASAP prompts 1, 4, 6 and InFoBench)."
    )


# ====================================================================================== tables
def table1(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """The paper's Table 1 (AES) / Table 2 (IF): Delta rater and Delta rubric, per model and condition.

    Delta rater: human vs model with the same rubric (H_H -> LLM_H on the holistic row, H_A -> LLM_A
    per criterion; IF: one row, analytic by the yes-ratio). Delta rubric: holistic vs analytic within
    a rater (H_H -> H_A, and LLM_H -> LLM_A for each holistic condition), by Pareto dominance (AES) or
    the instruction-following ratio (IF), §4.3.
    """
    tid = d.task.paper_table
    t = Table(tid, TITLES[tid])
    note = None if d.has_human else f"n/a: {d.task.human_note}"
    H, A = d.holistic_conditions(), d.analytic_conditions()
    conds = [*H, *A]
    ds_row = d.task.paper_dataset or "all"
    rater, rubric = "Delta rater", "Delta rubric"
    for b in d.backbones:
        hol = block_cells(
            tid,
            rater,
            b,
            kendall_tau,
            d.human_holistic,
            _cond_rows(H, lambda c, b=b: d.holistic(b, c)),
            s,
            note=note,
            tests=tests,
            row=HOLISTIC_ROW if d.task.fixed_criteria else ds_row,
        )
        t.cells += _pivot(hol, rater, HOLISTIC_ROW if d.task.fixed_criteria else ds_row, b)
        if d.task.fixed_criteria:
            for j, name in enumerate(d.criterion_names):
                cells = block_cells(
                    tid,
                    rater,
                    b,
                    kendall_tau,
                    d.human_analytic[:, j],
                    _cond_rows(A, lambda c, b=b, j=j: d.analytic(b, c)[:, j]),
                    s,
                    note=note,
                    tests=tests,
                    row=_abbrev(d, name),
                )
                t.cells += _pivot(cells, rater, _abbrev(d, name), b)
        else:
            cells = block_cells(
                tid,
                rater,
                b,
                d.aggregate_stat,
                d.aggregate(d.human_analytic),
                _cond_rows(A, lambda c, b=b: d.aggregate(d.analytic(b, c))),
                s,
                note=note,
                tests=tests,
                row=ds_row,
            )
            t.cells += _pivot(cells, rater, ds_row, b)
    if H:
        human = block_cells(
            tid,
            rubric,
            HUMAN,
            d.aggregate_stat,
            d.human_holistic,
            [(None, HUMAN_COLUMN, d.aggregate(d.human_analytic))],
            s,
            note=note,
            test=False,
        )
        t.cells += _pivot(human, rubric, H[0].display, HUMAN)
    for h in H:
        for b in d.backbones:
            cells = block_cells(
                tid,
                rubric,
                b,
                d.aggregate_stat,
                d.holistic(b, h),
                _cond_rows(A, lambda c, b=b: d.aggregate(d.analytic(b, c))),
                s,
                tests=tests,
                row=h.display,
            )
            t.cells += _pivot(cells, rubric, h.display, b)
    # the paper's values beside ours
    labels = [c.display for c in conds]
    rows = [HOLISTIC_ROW, *(_abbrev(d, n) for n in d.criterion_names)] if d.task.fixed_criteria else [ds_row]
    for row in rows:
        t.cells += _paper_cells(t, tid, d, rater, row, labels)
    for h in H:
        t.cells += _paper_cells(t, tid, d, rubric, h.display, [HUMAN_COLUMN, *(c.display for c in A)])
    t.column_order = [
        *(f"{b}: {c}" for b in d.backbones for c in labels),
        f"{HUMAN}: {HUMAN_COLUMN}",
        *_paper_columns([HUMAN_COLUMN, *labels]),
    ]
    t.footer = [
        f"Rows: {HOLISTIC_ROW} = the holistic score; criteria by the paper's abbreviations. Delta rater: human vs "
        f"model (same rubric); Delta rubric: holistic vs analytic ({d.aggregate_name}) within a rater, one row per "
        f"holistic condition; {HUMAN_COLUMN} = human holistic vs human analytic.",
        *block_footers(d, s),
        "paper <model>: the rubric paper's printed value with its marks (gpt-4o-2024-11-20, Llama-3.1-70B-Instruct, "
        "the paper's full data), beside ours; ours come from the configured backbones on this sample.",
        *filter(None, [_no_paper_note(d)]),
    ]
    return t


def table3(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """The paper's Table 3: Kendall's tau between the two models' scores, per condition."""
    t = Table("table3", TITLES["table3"])
    H, A = d.holistic_conditions(), d.analytic_conditions()
    labels = [c.display for c in (*H, *A)]
    section, paper_section = "Model vs model", "GPT-4o vs Llama"
    ds_row = d.task.paper_dataset or "all"
    pairs = list(itertools.combinations(d.backbones, 2))
    if not pairs:
        t.cells.append(
            Cell(
                "table3",
                section,
                HOLISTIC_ROW,
                "backbones",
                note="n/a: one backbone configured (model-vs-model needs two)",
            )
        )
    dummy = np.zeros(d.n)
    for b1, b2 in pairs:
        col = f"{b1} vs {b2}"

        def both(f, b1=b1, b2=b2):
            return lambda c: np.column_stack([f(b1, c), f(b2, c)])

        def pivoted(conds, row, col=col):
            """One block of model-vs-model cells, laid out as the paper's ``row``."""
            cells = block_cells("table3", section, col, _columns_tau, dummy, conds, s, tests=tests, row=row)
            return _pivot(cells, section, row, col)

        if d.task.fixed_criteria:
            t.cells += pivoted(_cond_rows(H, both(d.holistic)), HOLISTIC_ROW)
            for j, name in enumerate(d.criterion_names):
                f = lambda b, c, j=j: d.analytic(b, c)[:, j]  # noqa: E731
                t.cells += pivoted(_cond_rows(A, both(f)), _abbrev(d, name))
        else:
            f = lambda b, c: d.aggregate(d.analytic(b, c))  # noqa: E731
            t.cells += pivoted(_cond_rows(H, both(d.holistic)), ds_row)  # two blocks, one row
            t.cells += pivoted(_cond_rows(A, both(f)), ds_row)
    rows = [HOLISTIC_ROW, *(_abbrev(d, n) for n in d.criterion_names)] if d.task.fixed_criteria else [ds_row]
    for row in rows:
        t.cells += _paper_cells(t, "table3", d, paper_section, row, labels, block=section)
    t.column_order = [
        *(f"{b1} vs {b2}: {c}" for b1, b2 in pairs for c in labels),
        *_paper_columns(labels, models=(f"{MODELS[0]} vs {MODELS[1]}",)),
    ]
    t.footer = [
        "tau-b between the two backbones' scores of the same items (the paper: GPT-4o vs Llama; its Table 3 "
        "has no marks; IF values from §A.1's text).",
        *block_footers(d, s),
        *filter(None, [_no_paper_note(d)]),
    ]
    return t


def table4(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """The paper's Table 4: Delta rater + rubric (LLM_H -> H_A and H_H -> LLM_A), per model."""
    t = Table("table4", TITLES["table4"])
    note = None if d.has_human else f"n/a: {d.task.human_note}"
    H, A = d.holistic_conditions(), d.analytic_conditions()
    section, row = "Delta rater+rubric", d.task.paper_dataset or "all"
    for b in d.backbones:
        cells = block_cells(
            "table4",
            section,
            b,
            _flip(d.aggregate_stat),
            d.aggregate(d.human_analytic),
            [(c, f"LLM_H->H_A {c.display}", d.holistic(b, c)) for c in H],
            s,
            note=note,
            tests=tests,
            row=row,
        )
        cells += block_cells(
            "table4",
            section,
            b,
            d.aggregate_stat,
            d.human_holistic,
            [(c, f"H_H->LLM_A {c.display}", d.aggregate(d.analytic(b, c))) for c in A],
            s,
            note=note,
            tests=tests,
            row=row,
        )
        t.cells += _pivot(cells, section, row, b)
    cols = [f"LLM_H->H_A {c.display}" for c in H] + [f"H_H->LLM_A {c.display}" for c in A]
    t.cells += _paper_cells(t, "table4", d, section, row, cols)
    t.column_order = [*(f"{b}: {c}" for b in d.backbones for c in cols), *_paper_columns(cols)]
    t.footer = [
        f"LLM_H->H_A: model holistic vs human analytic; H_H->LLM_A: human holistic vs model analytic "
        f"({d.aggregate_name}).",
        *block_footers(d, s),
        *filter(None, [_no_paper_note(d)]),
    ]
    return t


def ours_if_gpt4_reference(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    """Ours: instruction following's model-only comparisons and the GPT-4 (not human) reference."""
    if d.task.reference_name is None:
        return None
    tid = "ours_if_gpt4_reference"
    t = Table(tid, TITLES[tid])
    ref = d.task.reference_name
    human = f"n/a: {d.task.human_note}" if not d.has_human else None
    for b in d.backbones:
        if human:
            for c in d.conditions:
                t.cells.append(Cell(tid, "Human vs model", c.display, b, note=human, condition=c.name))
        t.cells += block_cells(
            tid,
            f"{ref} yes-ratio vs model holistic",
            b,
            kendall_tau,
            d.reference_holistic,
            _cond_rows(d.holistic_conditions(), lambda c, b=b: d.holistic(b, c)),
            s,
            tests=tests,
        )
        t.cells += block_cells(
            tid,
            f"{ref} yes-ratio vs model yes-ratio (logprob-weighted)",
            b,
            kendall_tau,
            d.reference_holistic,
            _cond_rows(d.analytic_conditions(), lambda c, b=b: d.aggregate(d.analytic(b, c))),
            s,
            tests=tests,
        )
        t.cells += block_cells(
            tid,
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


def ours_positional_bias(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """Ours: the batch prompt's agreement by criterion position (the paper discusses positional bias
    in §5.1 and §A.1 but prints no such table)."""
    tid = "ours_positional_bias"
    t = Table(tid, TITLES[tid])
    batches = [c for c in d.analytic_conditions() if c.mode == "batch"]
    plain = [
        c for c in d.analytic_conditions() if c.mode == "separate" and not c.context and c.examples == "none"
    ]
    if not batches or not plain:
        t.cells.append(
            Cell(
                tid,
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
                    t.cells.append(Cell(tid, block, "reference vs model", b, note="n/a: no reference labels"))
                else:
                    t.cells += block_cells(
                        tid,
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
                    tid,
                    block,
                    b,
                    _columns_tau,
                    dummy,
                    [(None, f"{bc.display} vs {sep.display} (same model)", both)],
                    s,
                    test=False,
                )
                shift = block_cells(
                    tid,
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
        marks_footer(),
        stats_footer(s),
        f"Reference: {ref_name or 'none'}. Position k = the k-th criterion of the batch reply, scored with the "
        "model's own greedy answers for positions 1..k-1. The mean score shift row is a mean difference of "
        "ratings (not a tau), with its bootstrap CI.",
    ]
    return t


def build_tables(d: StudyData, s: Settings) -> tuple[list[Table], pd.DataFrame]:
    """Every table of the study (the paper's numbered ones, then ours), and the pairwise
    significance tests behind their marks."""
    tests: list[dict] = []
    tables = []
    makers = (
        table1, table3, table4, table6, table7,
        ours_agree_disagree, ours_agreement_levels, ours_if_gpt4_reference, ours_positional_bias,
        ours_if_yes_skew, ours_if_analytic_agreement,
    )  # fmt: skip
    for make in makers:
        before = len(tests)
        t = make(d, s, tests)
        if t is None:
            continue
        if make is table3 and (count := ours_separate_vs_batch(t, d)) is not None:
            tables.append(count)  # §A.1's count, read off Table 3's cells
        ran = [x for x in tests[before:] if "error" not in x]
        t.footer.append(
            f"Tests behind this table's marks: {len(ran)} run, "
            f"{sum(bool(x['significant']) for x in ran)} significant, "
            f"{len(tests) - before - len(ran)} could not run (significance.csv has each one)."
        )
        tables.append(t)
    return tables, pd.DataFrame(tests)
