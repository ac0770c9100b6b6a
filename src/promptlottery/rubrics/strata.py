"""Agreement strata: the paper's Tables 6 (AES raters agree vs disagree) and 7 (IF three-annotator
levels), and ours (``ours_agree_disagree``: every human comparison by stratum; ``ours_agreement_levels``).

The rubric-modification paper compares the items on which the human raters agree with those on
which they disagree and marks where the two differ significantly (issue 12: "the paper compares
items where the human raters agree vs disagree and marks the significant difference between the
two"). Here "agree" means the two raters' holistic scores are equal, "disagree" that they are
not. Each comparison (human holistic vs human analytic; Delta rater: human holistic vs model
holistic; Delta rater + rubric: human holistic vs model analytic) gets Kendall tau on each
stratum with its 95% bootstrap CI, and the difference agree - disagree with its CI. The strata
hold different items, so the difference is an **unpaired** bootstrap: each stratum is resampled on
its own (seeds ``seed`` and ``seed + 1``), the differences of the two resamples are sorted and the
interval is their 25th and 975th values of 1000 (one comparison per row: no Bonferroni). A
difference whose interval excludes 0 carries ``STRATA_DIFFER``.

``ours_agreement_levels`` keeps the three-way split (full / partial / none: equal, adjacent, 2+ apart), an
extra of ours, with the paired tests between conditions inside each stratum.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from promptlottery.metrics import BootstrapResult, UndefinedMetricWarning, bootstrap_ci, kendall_tau
from promptlottery.metrics.bootstrap import _order_statistic
from promptlottery.rubrics.cells import HUMAN, STRATA_DIFFER, TITLES, Cell, Settings, Table
from promptlottery.rubrics.ci import (
    _complete,
    _undefined_reason,
    block_cells,
    block_footers,
    ranks_text,
    set_interval,
)
from promptlottery.rubrics.study_data import StudyData
from promptlottery.rubrics.task_base import STRATA

AGREE, DISAGREE = "agree", "disagree"


def two_strata(levels: list[str | None]) -> np.ndarray:
    """Each item's stratum: "agree" where the raters' scores are equal (level "full"), "disagree"
    where they are not, "" where unknown."""
    return np.array(["" if x is None else AGREE if x == STRATA[0] else DISAGREE for x in levels])


@dataclass(frozen=True)
class StratumComparison:
    """Kendall tau on each stratum, and the unpaired bootstrap interval of their difference."""

    agree: float
    disagree: float
    agree_ci: tuple[float, float]
    disagree_ci: tuple[float, float]
    difference: float  # agree - disagree
    low: float
    high: float
    n_agree: int
    n_disagree: int
    n_defined: int  # resamples on which both strata's tau is defined (the interval's sample)
    boots: tuple[BootstrapResult, ...] = field(default=(), repr=False)  # each stratum's own bootstrap

    @property
    def significant(self) -> bool:
        return bool(self.low > 0.0 or self.high < 0.0)


def compare_strata(
    stat: Callable,
    ref: np.ndarray,
    values: np.ndarray,
    agree: np.ndarray,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> StratumComparison:
    """``stat(ref, values)`` on the items where ``agree`` is True and on the others (items complete
    in both), and the percentile interval of the difference over independent resamples of each.

    The interval is NaN when too few resamples have a defined difference (``n_defined``); raises
    ValueError when a stratum has no complete item.
    """
    keep = _complete(ref) & _complete(values)
    parts = []
    for k, mask in enumerate((keep & agree, keep & ~agree)):
        if not mask.any():
            raise ValueError(f"the {(AGREE, DISAGREE)[k]} stratum has no complete item")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            parts.append(
                bootstrap_ci(
                    stat, ref[mask], values[mask], n_resamples=n_resamples, level=level, seed=seed + k
                )
            )
    a, d = parts
    diff = a.distribution - d.distribution
    ok = np.sort(diff[~np.isnan(diff)])
    tail = (1.0 - level) / 2.0  # one comparison per row: no Bonferroni
    if np.floor(ok.size * tail + 1e-9) < 1:  # NaN interval: the cell says why
        low = high = float("nan")
    else:
        low, high = _order_statistic(ok, ok.size * tail), _order_statistic(ok, ok.size * (1.0 - tail))
    return StratumComparison(
        agree=a.estimate,
        disagree=d.estimate,
        agree_ci=(a.low, a.high),
        disagree_ci=(d.low, d.high),
        difference=a.estimate - d.estimate,
        low=low,
        high=high,
        n_agree=int((keep & agree).sum()),
        n_disagree=int((keep & ~agree).sum()),
        n_defined=int(ok.size),
        boots=(a, d),
    )


def _stratum_cells(
    block: str,
    row: str,
    column: str,
    stat: Callable,
    ref,
    values,
    agree,
    known,
    s: Settings,
    *,
    tests: list[dict],
    condition: str = "",
    table: str = "ours_agree_disagree",
) -> list[Cell]:
    """Three cells of one comparison: tau on agree items, on disagree items, and the difference
    (its test goes to ``tests``, beside the paired ones)."""
    cols = [f"{column}: {AGREE}", f"{column}: {DISAGREE}", f"{column}: {AGREE} - {DISAGREE}"]
    out = [Cell(table, block, row, c, condition=condition) for c in cols]
    if values is None:
        for c in out:
            c.note = "n/a: not run"
        return out
    keep = known & _complete(ref) & _complete(values)
    counts = (int((keep & agree).sum()), int((keep & ~agree).sum()))
    out[0].n, out[1].n, out[2].n = counts[0], counts[1], sum(counts)
    if min(counts) < s.min_items:  # a stratum that is large enough still gets its own tau
        why = f"n/a: n={counts[0]} agree / {counts[1]} disagree items, need {s.min_items} in each"
        for k, (c, mask) in enumerate(zip(out, (keep & agree, keep & ~agree))):
            if counts[k] >= s.min_items:
                _one_stratum(c, stat, ref[mask], values[mask], s, seed=s.seed + k)
            else:
                c.note = why
        out[2].note = why
        return out
    res = compare_strata(
        stat,
        _drop(ref, keep),
        _drop(values, keep),
        agree,
        n_resamples=s.n_resamples,
        level=s.level,
        seed=s.seed,
    )
    for c, boot, mask in zip(out, res.boots, (keep & agree, keep & ~agree)):
        if np.isfinite(boot.estimate):
            set_interval(c, boot)
            continue
        with warnings.catch_warnings(record=True) as caught:  # the point estimate again, for its reason
            warnings.simplefilter("always")
            stat(ref[mask], values[mask])
        c.note = _undefined_reason(caught)
    if out[0].estimate is None or out[1].estimate is None:
        out[2].note = f"n/a: tau is undefined on the {AGREE if out[0].estimate is None else DISAGREE} items"
    elif not np.isfinite(res.low):
        out[2].note = (
            f"n/a: the difference is defined on {res.n_defined} of {s.n_resamples} resamples, "
            f"too few for a {s.level:.0%} interval"
        )
    else:
        out[2].estimate, out[2].low, out[2].high = res.difference, res.low, res.high
        out[2].marks = STRATA_DIFFER if res.significant else ""
    record = {"test": "unpaired strata", "table": table, "block": block, "column": out[2].column}
    record.update(a=AGREE, b=DISAGREE, condition=condition or row)
    if out[2].estimate is None:
        tests.append({**record, "error": out[2].note})
    else:
        tests.append(
            {
                **record,
                "difference": res.difference,
                "low": res.low,
                "high": res.high,
                "significant": res.significant,
                "n": sum(counts),
                "n_comparisons": 1,
                "n_resamples": s.n_resamples,
                "n_undefined": s.n_resamples - res.n_defined,
                "interval_ranks": ranks_text(res.n_defined, 1, s.level),
            }
        )
    return out


def _one_stratum(cell: Cell, stat: Callable, ref, values, s: Settings, *, seed: int) -> None:
    """Tau and its CI on one stratum alone, resampled as ``compare_strata`` resamples it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ci = bootstrap_ci(stat, ref, values, n_resamples=s.n_resamples, level=s.level, seed=seed)
    if np.isfinite(ci.estimate):
        set_interval(cell, ci)
    else:
        cell.note = _undefined_reason(caught)


def _drop(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    out = values.astype(float).copy()
    out[~keep] = np.nan  # rows (items) outside ``keep`` drop out as incomplete
    return out


def ours_agree_disagree(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """Ours: each human comparison on agree vs disagree items, and the difference (the paper's
    Table 6 is the holistic Delta rater part of it, ``table6``)."""
    t = Table("ours_agree_disagree", TITLES["ours_agree_disagree"], n_in_column_order=True)
    if not any(d.strata):
        _no_strata(t, d)
        return t
    split = two_strata(d.strata)
    known, agree = split != "", split == AGREE
    hh = d.human_holistic
    t.cells += _stratum_cells(
        "Human holistic vs human analytic",
        d.aggregate_name,
        HUMAN,
        d.aggregate_stat,
        hh,
        d.aggregate(d.human_analytic),
        agree,
        known,
        s,
        tests=tests,
    )
    for b in d.backbones:
        for c in d.holistic_conditions():
            t.cells += _stratum_cells(
                "Delta rater: human holistic vs model holistic",
                c.display,
                b,
                kendall_tau,
                hh,
                d.holistic(b, c),
                agree,
                known,
                s,
                tests=tests,
                condition=c.name,
            )
        for c in d.analytic_conditions():
            t.cells += _stratum_cells(
                f"Delta rater + rubric: human holistic vs model analytic ({d.aggregate_name})",
                c.display,
                b,
                d.aggregate_stat,
                hh,
                d.aggregate(d.analytic(b, c)),
                agree,
                known,
                s,
                tests=tests,
                condition=c.name,
            )
    t.footer = [
        f"Strata: agree = the two raters' holistic scores are equal ({int(agree.sum())} items of the sample), "
        f"disagree = they differ ({int((known & ~agree).sum())} items); each stratum needs {s.min_items} items; n = agree / disagree / both.",
        f"Cells: Kendall tau-b [95% bootstrap CI] on each stratum; agree - disagree: the difference with an "
        f"unpaired bootstrap interval (each stratum resampled on its own, {s.n_resamples} resamples, the "
        f"{ranks_text(s.n_resamples, 1, s.level)} sorted differences); {STRATA_DIFFER} = 0 lies "
        "outside it (the strata differ significantly).",
    ]
    return t


def ours_agreement_levels(d: StudyData, s: Settings, tests: list[dict]) -> Table:
    """Ours: the same comparisons by full / partial / no agreement of the two ASAP raters (the
    paper's three levels, Table 7, are of InFoBench's three annotators)."""
    t = Table("ours_agreement_levels", TITLES["ours_agreement_levels"])
    if not any(d.strata):
        _no_strata(t, d)
        return t
    strata = np.array([x or "" for x in d.strata])
    counts = []
    for level in STRATA:
        keep = strata == level
        label = {
            "full": "Full agreement (raters equal)",
            "partial": "Partial agreement (adjacent scores)",
            "none": "No agreement (scores 2+ apart)",
        }[level]
        hh = d.human_holistic.copy()
        hh[~keep] = np.nan  # items outside the stratum drop out as incomplete
        t.cells += block_cells(
            t.id,
            f"{label}: human holistic vs human analytic",
            HUMAN,
            d.aggregate_stat,
            hh,
            [(None, d.aggregate_name, d.aggregate(d.human_analytic))],
            s,
            test=False,
        )
        for b in d.backbones:
            t.cells += block_cells(
                t.id,
                f"{label}: Delta rater, holistic",
                b,
                kendall_tau,
                hh,
                [(c, c.display, d.holistic(b, c)) for c in d.holistic_conditions()],
                s,
                tests=tests,
            )
            t.cells += block_cells(
                t.id,
                f"{label}: Delta rater + rubric, model analytic ({d.aggregate_name})",
                b,
                d.aggregate_stat,
                hh,
                [(c, c.display, d.aggregate(d.analytic(b, c))) for c in d.analytic_conditions()],
                s,
                tests=tests,
            )
        counts.append(f"{label}: {int(keep.sum())} items in the sample.")
    t.footer = [
        *block_footers(d, s),
        "Strata: the two raters' holistic scores are equal (full), adjacent (partial) or 2+ apart (none); "
        f"a stratum with fewer than {s.min_items} items is n/a.",
        *counts,
    ]
    return t


def _no_strata(t: Table, d: StudyData) -> None:
    note = f"n/a: {d.task.human_note}" if not d.has_human else "n/a: no per-rater labels"
    for col in (HUMAN, *d.backbones):
        t.cells.append(Cell(t.id, "All strata", "agreement levels", col, note=note))


def table6(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    """The paper's Table 6 (AES): holistic Delta rater on essays whose raters agree vs disagree.

    Caption: "The number indicated by the † represents that the tau value on that subset of data
    ... is significantly larger than the tau value on the other subset of data". The subsets are
    independent, so the test is the unpaired bootstrap of ``compare_strata`` (one comparison: the
    25th / 975th of 1000 differences); the difference row is ours. None for a task without two raters.
    """
    from promptlottery.rubrics.paper_reference import MODELS, paper_value

    if not any(d.strata):
        return None
    t = Table("table6", TITLES["table6"], n_in_column_order=True)
    split = two_strata(d.strata)
    known, agree = split != "", split == AGREE
    section = "raters agree vs disagree"
    H = d.holistic_conditions()
    for b in d.backbones:
        for c in H:
            a_cell, d_cell, diff = _stratum_cells(
                section, c.display, b, kendall_tau, d.human_holistic, d.holistic(b, c), agree, known, s,
                tests=tests, condition=c.name, table="table6",
            )  # fmt: skip
            col = f"{b}: {c.display}"
            a_cell.row, d_cell.row, diff.row = AGREE, DISAGREE, f"{AGREE} - {DISAGREE} (ours)"
            for cell in (a_cell, d_cell, diff):
                cell.column = col
            if diff.marks == STRATA_DIFFER:  # the larger subset carries the paper's dagger
                (a_cell if diff.estimate > 0 else d_cell).marks += "†"
            t.cells += [a_cell, d_cell, diff]
    ds = d.task.paper_dataset or ""
    for row in (AGREE, DISAGREE):
        for c in H:
            for model, (tau, marks) in paper_value("table6", ds, section, row, c.display).items():
                t.cells.append(
                    Cell("table6", section, row, f"paper {model}: {c.display}", tau, marks=marks, note="paper", source="paper")
                )  # fmt: skip
    t.column_order = [f"{b}: {c.display}" for b in d.backbones for c in H] + [
        f"paper {m}: {c.display}" for m in MODELS for c in H
    ]
    t.footer = [
        f"agree = the two raters' holistic scores are equal ({int(agree.sum())} items of the sample), disagree = "
        f"they differ ({int((known & ~agree).sum())}); each needs {s.min_items} items. † = tau on that subset is "
        f"significantly larger than on the other (unpaired bootstrap, {s.n_resamples} resamples, the "
        f"{ranks_text(s.n_resamples, 1, s.level)} sorted differences); the agree - disagree row is ours.",
        "paper GPT-4o: from §A.2's text (the paper prints Table 6's numbers for GPT-4o there; Llama 'mirrors these "
        "patterns', no numbers); the dagger on prompt 4 is its 'significant difference in essay prompt 4'.",
    ]
    return t


def table7(d: StudyData, s: Settings, tests: list[dict]) -> Table | None:
    """The paper's Table 7 (IF): Delta rater on responses with full / partial / no agreement of the
    three expert annotators. Needs those annotators' labels: where the data has none, every cell of
    ours says so (missing), and the paper's numbers from §5.3 stand alone. None for AES."""
    from promptlottery.rubrics.paper_reference import GPT, paper_value

    if d.task.paper_dataset != "IF":
        return None
    t = Table("table7", TITLES["table7"])
    section = "human agreement"
    labels = [c.display for c in d.conditions]
    missing = (
        "missing: InFoBench's three expert annotators' labels are not in the data "
        "(it ships GPT-4's decomposed answers only), so the agreement strata cannot be formed"
    )
    for level in ("full", "partial", "none"):
        for b in d.backbones:
            for c in d.conditions:
                t.cells.append(
                    Cell("table7", section, level, f"{b}: {c.display}", note=missing, condition=c.name)
                )
        for col in labels:
            for model, (tau, marks) in paper_value("table7", "IF", section, level, col).items():
                t.cells.append(
                    Cell(
                        "table7",
                        section,
                        level,
                        f"paper {model}: {col}",
                        tau,
                        marks=marks,
                        note="paper",
                        source="paper",
                    )
                )
    t.column_order = [f"{b}: {c}" for b in d.backbones for c in labels] + [
        f"paper {GPT}: {c}" for c in labels
    ]
    t.footer = [
        "Rows: all three annotators agree (full), two agree (partial), none agree (none; analytic ratings have "
        "full and partial only). Marks (the paper's caption): p / f in the full row = significantly different "
        "from the partial / full-disagreement subset, ↑ larger, ↓ smaller.",
        "paper GPT-4o: from §5.3 / §A.2's text; the marks read from its words ('significantly higher when all "
        "three human annotators agreed under all conditions' for holistic; for analytic 'the separate and edited "
        "conditions', batch not significant).",
    ]
    return t
