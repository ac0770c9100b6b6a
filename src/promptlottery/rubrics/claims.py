"""Three of the rubric paper's claims in words, computed (tables of ours, each under its own name).

* ``ours_if_yes_skew`` (§5.1): "batch ratings consistently demonstrated a bias with probability
  distributions heavily skewed towards "yes" responses when answering yes/no decomposed questions.
  This contrasts with the separate API call approach, which more closely resembled human response
  distributions". Per backbone and analytic condition: the mean over items of the item's mean
  P(yes) (logprob-weighted) and of its share of argmax "yes" answers, with bootstrap CIs and the
  block's paired tests (⋆ = separate and batch differ); beside them the reference's yes share (on
  InFoBench GPT-4's answers, NOT human: the human answers are not in the data).
* ``ours_separate_vs_batch`` (§A.1): "Separate API calls improve alignment for 8 out of 13
  sub-criteria in AES" (GPT-4o vs Llama, Table 3: 5 criteria of set 1, 4 of set 4, 4 of set 6).
  The count of criteria whose model-vs-model tau is higher with the separate than with the batch
  prompt (:func:`separate_wins`), on our two backbones and on the paper's printed Table 3.
* ``ours_if_analytic_agreement`` (§5.3 / §A.2): "Analytic prompt ratings were divided into full
  agreement (13% of the dataset) and partial agreement (87% of the dataset) subsets, using majority
  vote for the final score". With three raters and yes/no answers every question has a majority,
  so an output is *full* when the three agree on every question and *partial* otherwise
  (:func:`analytic_agreement_levels`, our reading of the paper's two subsets). It needs each
  annotator's answers, which the InFoBench data here does not ship: the table says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from promptlottery.rubrics.cells import TITLES, Cell, Settings, Table
from promptlottery.rubrics.ci import block_cells, block_footers
from promptlottery.rubrics.paper_reference import HOLISTIC_ROW, MODELS
from promptlottery.rubrics.study_data import StudyData


def _mean_value(_ref, values: np.ndarray) -> float:
    """The mean of one value per item (``_ref`` is unused)."""
    return float(np.mean(values))


_mean_value.batch = lambda idx, _ref, values: values[idx].mean(axis=1)  # type: ignore[attr-defined]


def ours_if_yes_skew(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    """§5.1's yes-skew of batch answers (module docstring); None on a task without yes/no answers."""
    if d.task.aggregate != "ratio":
        return None
    tid = "ours_if_yes_skew"
    t = Table(tid, TITLES[tid])
    conds = d.analytic_conditions()
    dummy = np.zeros(d.n)
    for b in d.backbones:
        for block, column in (
            ("mean P(yes), logprob-weighted", "score"),
            ("share of yes, argmax", "argmax_score"),
        ):
            t.cells += block_cells(
                tid,
                block,
                b,
                _mean_value,
                dummy,
                [(c, c.display, d.aggregate(d.analytic(b, c, column))) for c in conds],
                s,
                tests=tests,
            )
    ref = d.human_analytic if d.has_human else d.reference_analytic
    ref_name = "human" if d.has_human else d.task.reference_name or "reference"
    t.cells += block_cells(
        tid,
        "share of yes, reference",
        ref_name,
        _mean_value,
        dummy,
        [(None, ref_name, d.aggregate(ref))],
        s,
        test=False,
    )
    t.footer = [
        "Per item: the mean P(yes) over its questions (logprob-weighted rating) or its share of argmax yes "
        "answers; cells: the mean over items [95% bootstrap CI]. The paper (§5.1) reads the skew off batch "
        f"vs separate: ⋆ marks a significant difference between them. Reference: {ref_name}"
        + (
            ""
            if d.has_human
            else " - model output, NOT human answers (the human answers are not in the data)."
        ),
        *block_footers(d, s),
    ]
    return t


def separate_wins(sep: Mapping[str, float], bat: Mapping[str, float]) -> tuple[int, int, list[str]]:
    """``(k, m, rows)``: of the ``m`` criteria with a tau under both prompts, the ``k`` whose
    separate tau is strictly higher than its batch tau, and their names.

    >>> separate_wins({"Ide.": 0.647, "Or.": 0.675}, {"Ide.": 0.652, "Or.": 0.626})
    (1, 2, ['Or.'])
    """
    both = [r for r in sep if r in bat and np.isfinite(sep[r]) and np.isfinite(bat[r])]
    wins = [r for r in both if sep[r] > bat[r]]
    return len(wins), len(both), wins


def ours_separate_vs_batch(table3: Table, d: StudyData) -> Table | None:
    """§A.1's count from Table 3's cells: ours per backbone pair, and the paper's printed values."""
    if not d.task.fixed_criteria:
        return None
    tid = "ours_separate_vs_batch"
    t = Table(tid, TITLES[tid])
    taus: dict[str, dict[str, dict[str, float]]] = {}
    for c in table3.cells:  # every pair keeps its row, one whose taus are all undefined too
        pair, _, cond = c.column.rpartition(": ")
        if c.row != HOLISTIC_ROW and cond in ("Sep.", "Bat."):
            by_row = taus.setdefault(pair, {}).setdefault(cond, {})
            if c.estimate is not None:
                by_row[c.row] = c.estimate
    row = "criteria where Sep. tau > Bat. tau"
    ours = [p for p in taus if not p.startswith("paper")]
    if not ours:
        t.cells.append(
            Cell(tid, "Model vs model (Table 3)", row, "backbones", note="n/a: table3 has no model pair")
        )
    pairs = ours + [p for p in taus if p.startswith("paper")]
    for pair in pairs:
        k, m, wins = separate_wins(taus[pair].get("Sep.", {}), taus[pair].get("Bat.", {}))
        src = "paper" if pair.startswith("paper") else "ours"
        note = (
            f"{k} of {m} criteria: {', '.join(wins) or 'none'}" if m else "n/a: no criterion with both taus"
        )
        t.cells.append(
            Cell(tid, "Model vs model (Table 3)", row, pair, k if m else None, n=m, note=note, source=src)
        )
    t.footer = [
        "Counts from Table 3's criterion rows (model vs model Kendall tau, separate vs batch prompt); n = criteria "
        f"with both taus. The paper (§A.1): 'Separate API calls improve alignment for 8 out of 13 sub-criteria in "
        f"AES' ({MODELS[0]} vs {MODELS[1]}, sets 1, 4, 6: 4 of 5, 2 of 4, 2 of 4 from its printed Table 3).",
    ]
    return t


def analytic_agreement_levels(answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(levels, majority)`` of ``answers`` (items x questions x 3 raters, 1 = yes, 0 = no, NaN =
    no question): "full" where the three raters agree on every question of the item, else
    "partial"; ``majority`` = the majority vote per question (§5.3's final score).

    >>> a = np.array([[[1, 1, 1], [0, 0, 0]], [[1, 0, 1], [0, 0, 0]]], dtype=float)
    >>> levels, maj = analytic_agreement_levels(a)
    >>> levels.tolist(), maj.tolist()
    (['full', 'partial'], [[1.0, 0.0], [1.0, 0.0]])
    """
    a = np.asarray(answers, dtype=float)
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"answers must be items x questions x 3 raters, got shape {a.shape}")
    asked = ~np.isnan(a).all(axis=2)
    if (np.isnan(a).any(axis=2) & asked).any():
        raise ValueError("every asked question needs an answer from each of the three raters")
    yes = np.nansum(a, axis=2)
    majority = np.where(asked, (yes >= 2).astype(float), np.nan)
    unanimous = (yes == 0) | (yes == 3) | ~asked
    return np.where(unanimous.all(axis=1), "full", "partial"), majority


def ours_if_analytic_agreement(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    """§5.3's full / partial split of the IF analytic answers: n/a without each annotator's answers."""
    if d.task.aggregate != "ratio":
        return None
    tid = "ours_if_analytic_agreement"
    t = Table(tid, TITLES[tid])
    why = (
        "n/a: needs each of the three annotators' yes/no answers per question; "
        f"{d.task.human_note or 'the data carries one human answer per question'}"
    )
    for level in ("full agreement", "partial agreement"):
        t.cells.append(Cell(tid, "share of outputs", level, "human", note=why))
    t.cells += [
        Cell(tid, "share of outputs", "full agreement", "paper", 0.13, note="paper", source="paper"),
        Cell(tid, "share of outputs", "partial agreement", "paper", 0.87, note="paper", source="paper"),
    ]
    t.footer = [
        "full = the three annotators agree on every decomposed question of the output, partial = otherwise (with "
        "three yes/no raters every question has a majority, hence the paper's two subsets); the final score is "
        "the majority vote (rubrics.claims.analytic_agreement_levels). paper: §5.3's 13% / 87%.",
    ]
    return t
