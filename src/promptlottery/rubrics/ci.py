"""One block of a rubric table: each condition's Kendall tau with its bootstrap CI, and the
paired bootstrap tests between the block's conditions, Bonferroni-corrected by the block's size.

The rubric-modification paper (Huynh et al., "Quantifying the Statistical Effect of Rubric
Modifications on Human-Autorater Agreement", arXiv 2605.06283) compares rubric conditions with a
paired bootstrap over items (§4.3): "The difference between two conditions is calculated, and the
95% confidence interval is determined by sampling the 25th and 975th sorted values. For comparisons
involving three conditions, the confidence interval is adjusted using Bonferroni correction, with
the interval bounds set as the average of the 8th and 9th values and the average of the 991st and
992nd values." Holistic blocks compare two conditions (Full / 3ex, 0ex / 3ex), analytic three. So a block of k compared conditions makes
k (k - 1) / 2 pairwise tests and each runs at alpha / (k (k - 1) / 2) (``comparisons_in_block``):
three conditions -> three tests at alpha / 3; two conditions -> one test, no correction.
``Settings.n_comparisons`` set to an integer forces one correction for every block (our option).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import numpy as np

from promptlottery.metrics import (
    BootstrapResult,
    UndefinedMetricWarning,
    bootstrap_ci,
    kendall_tau,
    paired_bootstrap_test,
)
from promptlottery.rubrics.cells import NOT_APPLICABLE, UNTESTED, Cell, Settings
from promptlottery.rubrics.prompts import RubricCondition
from promptlottery.rubrics.study_data import StudyData


def comparisons_in_block(n_conditions: int) -> int:
    """The Bonferroni family of a block: its pairwise tests, k (k - 1) / 2 (at least 1).

    >>> comparisons_in_block(3), comparisons_in_block(2)
    (3, 1)
    """
    if n_conditions < 1:
        raise ValueError(f"a block compares at least one condition, got {n_conditions}")
    return max(1, n_conditions * (n_conditions - 1) // 2)


def interval_ranks(
    n_resamples: int, n_comparisons: int, level: float = 0.95
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 1-based ranks of the sorted bootstrap differences that bound the paired test's interval.

    Rank ``R alpha / 2`` and ``R (1 - alpha / 2)`` with ``alpha = (1 - level) / n_comparisons``
    (``metrics.paired_bootstrap_test``); a rank between two integers is the mean of both.

    >>> interval_ranks(1000, 3)
    ((8, 9), (991, 992))
    >>> interval_ranks(1000, 1)
    ((25,), (975,))
    """
    tail = (1.0 - level) / (2.0 * n_comparisons)

    def ranks(r: float) -> tuple[int, ...]:
        near = round(r)
        return (near,) if abs(r - near) < 1e-9 else (math.floor(r), math.floor(r) + 1)

    return ranks(n_resamples * tail), ranks(n_resamples * (1.0 - tail))


def paper_marks(roles: list[str], estimates: list[float], significant: set[tuple[int, int]]) -> list[str]:
    """The paper's marks of one block's cells, from its significant pairwise differences.

    Table 1's caption (rubric paper): "† is indicated next to comparisons that are significantly
    larger within holistic prompts. ⋆ is indicated next to comparisons that are significantly larger
    between separate and batch comparisons. ↑ and ↓ represent that the tau value for edited prompts
    is significantly larger or smaller respectively with the separate s or batch b prompts' tau."
    ``roles`` are the conditions' ``RubricCondition.role``; ``significant`` holds index pairs.

    >>> paper_marks(["separate", "batch", "edited"], [0.47, 0.46, 0.55], {(0, 2), (1, 2)})
    ['', '', 's,b↑']
    >>> paper_marks(["holistic", "holistic"], [0.437, 0.387], {(0, 1)})
    ['†', '']
    """
    marks = [""] * len(roles)
    edited: dict[int, dict[str, list[str]]] = {}
    for a, b in sorted(significant):
        ra, rb = roles[a], roles[b]
        hi = a if estimates[a] > estimates[b] else b
        if ra == rb == "holistic":
            marks[hi] += "†"
        elif {ra, rb} == {"separate", "batch"}:
            marks[hi] += "⋆"
        elif "edited" in (ra, rb) and {ra, rb} & {"separate", "batch"}:
            e, o = (a, b) if ra == "edited" else (b, a)
            arrow = "↑" if estimates[e] > estimates[o] else "↓"
            edited.setdefault(e, {"↑": [], "↓": []})[arrow].append(roles[o][0])  # "s" / "b"
    for e, by in edited.items():
        marks[e] += " ".join(
            ",".join(sorted(letters, key="sb".index)) + arrow for arrow, letters in by.items() if letters
        )
    return marks


MARKS_FOOTER = (
    "Marks (the paper's, Table 1's caption): † = significantly larger within the holistic prompts; "
    "⋆ = significantly larger between the separate and batch prompts; s / b with ↑ or ↓ in the Edited "
    "column = significantly larger (↑) or smaller (↓) than the separate (s) / batch (b) prompt; no mark = "
    "not significant."
)


def marks_footer(conds: list[RubricCondition] | None = None, scope: str = "") -> str:
    """The marks' meanings (the paper's, for every block)."""
    return MARKS_FOOTER


def block_footers(d: StudyData, s: Settings) -> list[str]:
    """The marks' meanings, then the statistics footer."""
    return [MARKS_FOOTER, stats_footer(s)]


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def ranks_text(n_resamples: int, n_comparisons: int, level: float = 0.95) -> str:
    """The interval's ranks as words: "8th/9th and 991st/992nd" (means of two values), "25th and 975th"."""
    return " and ".join(
        "/".join(_ordinal(k) for k in side) for side in interval_ranks(n_resamples, n_comparisons, level)
    )


def stats_footer(s: Settings) -> str:
    """The significance footer: which sorted differences bound each block's paired test."""
    if s.n_comparisons is not None:
        family = (
            f"Bonferroni over {s.n_comparisons} comparisons in every block (rubric.stats.n_comparisons): "
            f"alpha = {(1 - s.level) / s.n_comparisons:.4f}, the {ranks_text(s.n_resamples, s.n_comparisons, s.level)} "
            "sorted differences"
        )
    else:
        family = (
            "Bonferroni over the block's pairwise comparisons: three conditions -> alpha = "
            f"{(1 - s.level) / 3:.4f}, the {ranks_text(s.n_resamples, 3, s.level)} sorted differences; "
            f"two conditions -> alpha = {1 - s.level:.4f}, the {ranks_text(s.n_resamples, 1, s.level)}"
        )
    return (
        f"Significance: paired bootstrap over items ({s.n_resamples} resamples, two-sided, {family}; the ranks "
        "are taken among the resamples where the difference is defined, significance.csv counts the undefined "
        f"ones); {UNTESTED} = a paired test could not run (tau undefined on too many resamples). Cells: Kendall "
        f"tau-b [95% bootstrap CI]; n = items compared; {NOT_APPLICABLE} = not applicable to the row. "
        + CI_FOOTER
    )


def set_interval(cell: Cell, ci: BootstrapResult) -> None:
    """A cell's estimate and its percentile interval, with what the interval rests on.

    The interval is taken over the resamples on which the statistic is defined; the undefined ones
    are counted in the cell's note ("CI over 400 of 1000 resamples"). An interval that excludes its
    estimate is not printed (note "no CI: ..."): it happens when the estimate rests on so few
    comparable pairs that most resamples miss them (a Pareto tau on one dominating pair of 12 essays
    is undefined on the ~60% of resamples without both essays, and every resample that holds both
    counts that pair w_a * w_b >= 1 times against at most 65 distinct human pairs (66 only when the
    resample is a permutation of all 12, probability 12!/12^12 ~ 5e-5), so |tau*| >= 1/sqrt(65) >
    1/sqrt(66) = |tau|): the percentile of that conditional, biased resample statistic says nothing
    about the estimate.
    """
    cell.estimate = float(ci.estimate)
    n_res, n_def = len(ci.distribution), len(ci.distribution) - ci.n_undefined
    over = (
        f"CI over the {n_def} of {n_res} resamples where tau is defined ({ci.n_undefined} undefined)"
        if ci.n_undefined
        else ""
    )
    if n_def == 0:
        cell.note = f"no CI: tau is undefined on all {n_res} resamples"
        return
    low, high = float(ci.low), float(ci.high)
    if not low - 1e-12 <= ci.estimate <= high + 1e-12:
        cell.note = (
            f"no CI: the percentile interval [{low:.3f}, {high:.3f}] of the {n_def} of {n_res} resamples where "
            f"tau is defined excludes the estimate {ci.estimate:.3f} (the resampled statistic is biased: it "
            "rests on too few comparable pairs)"
        )
        return
    cell.low, cell.high, cell.note = low, high, over
    cell.ci_resamples = f"{n_def}/{n_res}" if ci.n_undefined else ""


CI_FOOTER = (
    "CI over k of R resamples: the interval is taken over the k resamples where tau is defined (the other "
    "R - k are undefined, counted in the note); no CI: the percentile interval excludes the estimate, so it "
    "is not printed (cells.csv's note gives it)."
)


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
    row: str = "",
) -> list[Cell]:
    """One block of one column: ``stat(ref, cond)`` per condition, CIs, pairwise paired tests.

    ``conds`` holds (condition, row label, values); values None or ``note`` given: the row is n/a.
    Items are those complete in ``ref`` and in every condition with enough complete items, so the
    conditions of a block are compared on the same items. The paired tests of a block with k
    conditions that have a number are Bonferroni-corrected over its k (k - 1) / 2 pairs (module
    docstring); ``Settings.n_comparisons`` forces one family size instead. ``row``: the table row the
    block's cells become (a criterion, "H."), recorded with each test so significance.csv tells the
    tests of one column's rows apart.
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
        set_interval(cells[k], ci)
    if not test:
        return cells
    defined = [k for k in usable if cells[k].estimate is not None]
    # the family is the tests this block makes: its conditions with a number, pairwise
    n_comparisons = s.n_comparisons or comparisons_in_block(max(len(defined), 1))
    significant: set[tuple[int, int]] = set()
    for a, b in itertools.combinations(defined, 2):
        ca, cb = conds[a][0], conds[b][0]
        pair = {
            "test": "paired",
            "table": table,
            "block": block,
            "row": row,
            "column": column,
            "a": ca.name,
            "b": cb.name,
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            try:
                res = paired_bootstrap_test(
                    stat,
                    conds[a][2][mask],
                    conds[b][2][mask],
                    r,
                    n_resamples=s.n_resamples,
                    n_comparisons=n_comparisons,
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
            significant.add((a, b))
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
                    "n_undefined": int(np.isnan(res.distribution).sum()),
                    "interval_ranks": ranks_text(
                        int((~np.isnan(res.distribution)).sum()), res.n_comparisons, s.level
                    ),
                }
            )
    roles = [c.role if c is not None else "" for c, _label, _v in conds]
    estimates = [cell.estimate if cell.estimate is not None else float("nan") for cell in cells]
    for k, mark in enumerate(paper_marks(roles, estimates, significant)):
        cells[k].marks = mark + (UNTESTED if UNTESTED in cells[k].marks else "")  # one § however many failed
    return cells
