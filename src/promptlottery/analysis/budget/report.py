"""The ``budget`` stage's body: a full grid in, the simulated sparse designs and adaptive stopping out.

    python -m run +analysis=budget analysis.runs='outputs/demo_panel/P*'

Reads the judgments (never calls a model), runs :func:`~promptlottery.analysis.budget.simulation.simulate_budgets`
and :func:`~promptlottery.analysis.budget.simulation.simulate_adaptive` on every configuration's items judged
under every wording, and writes ``tables/budget.csv``, ``tables/adaptive.csv``, ``figures/budget.png``,
``budget.md`` and ``results.json`` (``metrics``: per configuration, design, budget and statistic the
share of estimates inside the full grid's CI and the coverage of the sparse intervals).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.budget.design_rows import one_design
from promptlottery.analysis.budget.modes import mode_budget
from promptlottery.analysis.budget.simulation import (
    DESIGNS,
    estimate_sparse,
    simulate_adaptive,
    simulate_budgets,
)
from promptlottery.analysis.budget.wording_model_report import (
    wording_model_rows,
    wording_model_section,
    wording_model_sparse,
    wording_sparse_lines,
)
from promptlottery.checks import check_choice, check_int, check_range, fail, known_options
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import AnalysisError
from promptlottery.metrics.sparse_plans import sparse_plan
from promptlottery.prompts.requests import to_scale_label
from promptlottery.tracking.staging import staged_outputs
from promptlottery.tracking.tables import left_out_lines, markdown_table, write_table

logger = logging.getLogger(__name__)

__all__ = ["BudgetOptions", "run_budget"]


@dataclass
class BudgetOptions:
    """The ``analysis:`` node of ``conf/analysis/budget.yaml`` (see there for each key)."""

    runs: Any = None
    verdict: str = "argmax"
    reference: str = "P1"
    budgets: list = field(default_factory=lambda: [0.1, 0.2, 0.3, 0.5, 0.8])
    designs: list = field(default_factory=lambda: list(DESIGNS))
    n_sim: int = 200
    n_resamples: int = 200
    level: float = 0.95
    seed: int = 0
    confidences: list = field(default_factory=lambda: [0.8, 0.9, 0.95])
    min_items: int = 8
    # the PromptEval-style wording model (analysis/budget/wording_model.py): its ranks ([] = off), plans per
    # budget, bootstrap refits per plan, embedding (minilm | words | none) and the human labels' range
    model_ranks: list = field(default_factory=list)
    model_n_sim: int = 20
    model_resamples: int = 20
    model_embedding: str = "minilm"
    # the share of items set aside to tune the model's penalties (never among the reported items)
    model_validation_share: float = 0.3
    human_range: Any = None
    name: str = "budget"

    @classmethod
    def from_dict(cls, d: dict) -> BudgetOptions:
        known_options(d, (f.name for f in fields(cls)), "analysis (+analysis=budget)")
        return cls(**d)

    def __post_init__(self) -> None:
        if any(not isinstance(b, int | float) or not 0 < float(b) <= 1 for b in self.budgets):
            raise fail("analysis.budgets", list(self.budgets), "shares in (0, 1]")
        for design in self.designs:
            check_choice("analysis.designs", design, DESIGNS)
        if any(not isinstance(r, int) or not 0 <= r <= 3 for r in self.model_ranks):
            raise fail("analysis.model_ranks", list(self.model_ranks), "whole numbers in 0-3")
        check_choice("analysis.model_embedding", self.model_embedding, ("minilm", "words", "none"))
        vs = self.model_validation_share
        if isinstance(vs, bool) or not isinstance(vs, int | float) or not 0 < vs < 1:
            raise fail("analysis.model_validation_share", vs, "in (0, 1)")
        if self.human_range is not None:
            check_range("analysis.human_range", self.human_range)
        for key in ("n_sim", "n_resamples", "min_items", "model_n_sim", "model_resamples"):
            check_int(f"analysis.{key}", getattr(self, key), lo=1)
        if not all(0.5 < float(c) < 1 for c in self.confidences):
            raise fail("analysis.confidences", list(self.confidences), "in (0.5, 1)")


def _coded(
    labels: pd.DataFrame, scores: pd.DataFrame, systems
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    # labels as codes (a nominal scale's text labels too); every statistic here treats them as categories
    values = sorted({v for v in labels.to_numpy().ravel() if not pd.isna(v)}, key=str)
    codes = labels.apply(lambda col: col.map({v: float(i) for i, v in enumerate(values)}))
    return codes.astype(float), scores.astype(float), systems


def _human_hits(config, labels: pd.DataFrame, human_range) -> np.ndarray | None:
    """Items x wordings: 1 where the judged label equals the item's human score mapped onto the scale
    (nearest label, from ``analysis.human_range``), 0 where not, NaN where either is missing; None
    without ``analysis.human_range``."""
    if human_range is None:
        return None
    humans = config.humans(labels.index)
    want = [
        to_scale_label(float(h), tuple(human_range), config.scale) if np.isfinite(h) else None for h in humans
    ]
    arr = labels.to_numpy(dtype=object)
    hits = np.full(arr.shape, np.nan)
    for i, w in enumerate(want):
        if w is None:
            continue
        seen = labels.iloc[i].notna().to_numpy()
        hits[i, seen] = (arr[i, seen] == w).astype(float)
    return hits


def _designs(grid) -> set[str]:
    """The designs (``judge.design``) of a grid's rows, of every mode; a full grid has none."""
    frames = [grid.judgments, *grid.mode_frames()]
    return {str(d) for f in frames if "design" in f.columns for d in f["design"].dropna()}


def run_budget(opts: BudgetOptions, job) -> dict[str, Any]:
    """Simulate every configuration of ``opts.runs``; write the tables, figure and report into ``job``."""
    if opts.runs in (None, "", []):
        raise AnalysisError("analysis.runs is required: a glob (or list) of full-grid job directories")
    grid = JudgmentGrid.load(opts.runs, verdict=opts.verdict, reference=opts.reference)
    designs = _designs(grid)
    if "adaptive" in designs:
        if len(designs) > 1:
            raise AnalysisError(f"analysis.runs mixes designs {sorted(designs)}: analyse each sweep alone")
        from promptlottery.analysis.budget.adaptive_report import run_adaptive

        return run_adaptive(opts, grid, job)
    if own := mode_budget(grid, sparse="sparse" in designs):
        return own(opts, grid, job)
    if "sparse" in designs:
        return _run_sparse(opts, grid, job)
    budget_rows, adaptive_rows, skipped, model_rows, model_summaries = [], [], {}, [], []
    for config in grid:
        labels, scores = config.matrix("label"), config.matrix("value")
        keep = labels.notna().all(axis=1) & scores.notna().all(axis=1)
        labels_raw = labels
        hits = _human_hits(config, labels_raw[keep], opts.human_range)
        labels, scores, systems = _coded(labels[keep], scores[keep], config.systems(labels.index[keep]))
        if len(labels) < opts.min_items or labels.shape[1] < 3:
            skipped[config.config_id] = f"{len(labels)} complete items x {labels.shape[1]} wordings"
            continue
        logger.info("budget simulation config=%s items=%d wordings=%d", config.config_id, *labels.shape)
        table = simulate_budgets(
            labels.to_numpy(float), scores.to_numpy(float), systems,
            items=labels.index, variants=labels.columns, reference=opts.reference,
            budgets=[float(b) for b in opts.budgets], designs=opts.designs, n_sim=opts.n_sim,
            n_resamples=opts.n_resamples, level=opts.level, seed=opts.seed, hits=hits,
        )  # fmt: skip
        budget_rows.append(table.assign(config_id=config.config_id, n_items=len(labels)))
        if opts.model_ranks:
            rows, summary = wording_model_rows(config, labels_raw[keep], labels.to_numpy(float), opts)
            model_rows.append(rows)
            model_summaries.append(summary)
        runs = [("cluster_3_of_5", None)] + [("beta", float(c)) for c in opts.confidences]
        for rule, conf in runs:
            rec = simulate_adaptive(
                labels.to_numpy(float), rule=rule, confidence=conf or 0.95, n_sim=opts.n_sim, seed=opts.seed
            )
            adaptive_rows.append({"config_id": config.config_id, **rec})
    if not budget_rows:
        raise AnalysisError(f"no configuration with >= {opts.min_items} fully judged items: {skipped}")
    budget = pd.concat(budget_rows, ignore_index=True)
    budget = budget[
        ["config_id", "n_items", *[c for c in budget.columns if c not in ("config_id", "n_items")]]
    ]
    adaptive = pd.DataFrame(adaptive_rows)
    with staged_outputs(job.output_dir) as out:  # the one writer: staged, then published together
        write_table(budget, out / "tables", "budget", float_format="%.6g")
        write_table(adaptive, out / "tables", "adaptive", float_format="%.6g")
        from promptlottery.analysis.budget.plots import plot_budget

        figure = plot_budget(budget, out / "figures" / "budget.png")
        text = _report(opts, grid, budget, adaptive, skipped, figure, out)
        if model_rows:
            model = pd.concat(model_rows, ignore_index=True)
            write_table(model, out / "tables", "wording_model", float_format="%.6g")
            (out / "tables" / "wording_model_full.json").write_text(json.dumps(model_summaries, indent=1))
            text += "\n" + "\n".join(wording_model_section(model, model_summaries)) + "\n"
        (out / "budget.md").write_text(text, encoding="utf-8")
    return job.ok(
        analysis=asdict(opts), metrics=_metrics(budget, adaptive), skipped_configurations=skipped,
        report=str(Path(job.output_dir) / "budget.md"), judgment_files=[str(Path(f).resolve()) for f in grid.files],
    )  # fmt: skip


def _metrics(budget: pd.DataFrame, adaptive: pd.DataFrame) -> dict[str, float]:
    out = {}
    for r in budget.itertuples(index=False):
        key = f"budget/{r.config_id}/{r.design}/{r.budget:g}/{r.statistic}"
        for col in ("within_full_ci", "coverage", "rmse"):
            v = getattr(r, col)
            if np.isfinite(v):
                out[f"{key}/{col}"] = float(v)
    for r in adaptive.itertuples(index=False):
        key = f"adaptive/{r.config_id}/{r.rule}" + (f"_{r.confidence:g}" if r.rule == "beta" else "")
        out[f"{key}/saving"] = float(r.saving)
        if np.isfinite(r.recovered):
            out[f"{key}/recovered"] = float(r.recovered)
    return out


#: the columns of the report's two tables
_BUDGET_COLUMNS = (
    "config_id",
    "n_items",
    "design",
    "budget",
    "calls_share",
    "statistic",
    "full",
    "full_lo",
    "full_hi",
    "mean_estimate",
    "rmse",
    "within_full_ci",
    "coverage",
    "n_undefined",
    "note",
)
_ADAPTIVE_COLUMNS = (
    "config_id",
    "rule",
    "confidence",
    "n_items",
    "items_with_cluster",
    "mean_calls",
    "saving",
    "recovered",
    "recovered_lo",
    "recovered_hi",
)


def _report(opts, grid, budget, adaptive, skipped, figure, out: Path) -> str:
    runs = opts.runs if isinstance(opts.runs, str) else ", ".join(map(str, opts.runs))
    lines = [
        "# The lottery at a fraction of the calls (simulated on a full grid)",
        "",
        f"Runs: `{runs}` ({grid.n_judgments} judgments); verdict: {opts.verdict} label (scores: its "
        f"verdict score). No model was called: every sparse plan masks the full grid. {opts.n_sim} plans "
        f"per design and budget, intervals from {opts.n_resamples} item resamples at level {opts.level}.",
        "",
        "Designs: `items` = a seeded subsample of items judged under every wording; `spread` = 30% of "
        "the budget on fully judged items, the rest spread over random cells; `anchor` = as spread, with "
        f"{opts.reference} on every item. Statistics: `fleiss` (Fleiss' kappa across wordings, no collapse "
        "filter; sparse: inverse-probability weighted), `alpha` (Krippendorff's alpha, nominal; sparse: "
        "over the judged cells), `changed` (items with a different verdict under at least one wording; "
        "sparse: model-assisted, calibrated on the fully judged items), `tau` (mean pairwise Kendall "
        "tau-b of the systems' mean scores between wordings; sparse: Hajek means); with "
        "`analysis.human_range`, `human_agreement` (argmax label == the human score mapped onto the scale, "
        "pooled and `/<wording>`; sparse: ratio of Horvitz-Thompson totals, cells weighted by 1 / P(cell)).",
        "",
        "`within_full_ci`: share of plans whose estimate lies inside the full grid's 95% interval. "
        "`coverage`: share of plans whose own interval (items resampled with their cells, narrowed by "
        "the finite-population factor sqrt(1 - calls share), ours) covers the full grid's value.",
        "",
        f"![budget]({figure.relative_to(out)})"
        if figure
        else "_no figure: no statistic defined at any budget_",
        "",
        "## Sparse designs",
        "",
        markdown_table(budget, {c: c for c in _BUDGET_COLUMNS}),
        "",
        _ceiling_line(opts),
        "",
        "## Adaptive stopping (wordings in a seeded random order per item)",
        "",
        "`cluster_3_of_5`: stop once a label has ceil((J + 1) / 2) votes (the paper's plurality "
        "cluster is then decided: it recovers every cluster decision by construction). `beta`: stop once "
        "P(p_top > 0.5) under Beta(v_top + 1, v_second + 1) reaches the confidence (Adaptive-Consistency). "
        "`recovered`: share of the items with a full-grid cluster whose stopped verdict is that label "
        "(2.5-97.5% over the orders).",
        "",
        markdown_table(adaptive, {c: c for c in _ADAPTIVE_COLUMNS}),
        *left_out_lines(skipped, "too few fully judged items or wordings"),
    ]
    return "\n".join(lines) + "\n"


def _ceiling_line(opts) -> str:
    """The normal-approximation ceiling of the `items` design's `within_full_ci` (ours)."""
    from promptlottery.metrics.subsample_ceiling import item_subsample_share_needed, item_subsample_within_ci

    shares = ", ".join(
        f"{item_subsample_within_ci(b, opts.level):.2f} at {b:g}" for b in opts.budgets if 0 < b <= 1
    )
    return (
        "The ceiling of an item subsample (ours, a normal approximation: `metrics/subsample_ceiling.py:"
        "item_subsample_within_ci`): a share f of the items lands inside the full grid's interval in about "
        f"2 Phi(z sqrt(f / (1 - f))) - 1 of the plans, whatever the grid: {shares}; 90% needs "
        f"f >= {item_subsample_share_needed(0.9, opts.level):.3f}."
    )


def _sparse_plan_of(config):
    """The plan a sparse configuration's jobs judged (rebuilt from the design columns of its rows:
    every item's cells depend on the seed and its own id only), and its labels / scores matrices."""
    rows = config.paraphrases
    p = one_design(
        config.config_id,
        rows,
        ["design_budget", "design_anchor", "design_full_share", "design_seed"],
        "sparse plans",
    )
    labels, scores = config.matrix("label"), config.matrix("value")
    variants = [v for v in config.order]
    plan = sparse_plan(
        labels.index, variants, budget=float(p["design_budget"]), anchor=p["design_anchor"] or None,
        full_share=float(p["design_full_share"]), seed=int(p["design_seed"]),
    )  # fmt: skip
    judged = labels.notna().to_numpy()
    if (plan.mask & ~judged).any():
        missing = int((plan.mask & ~judged).sum())
        raise AnalysisError(
            f"{config.config_id}: {missing} planned cell(s) have no verdict (a job failed, was killed or its "
            "parse failed): re-run the sweep to complete the plan"
        )
    if (judged & ~plan.mask).any():
        raise AnalysisError(f"{config.config_id}: verdicts outside the sparse plan (mixed runs?)")
    return plan, labels, scores


def _run_sparse(opts: BudgetOptions, grid, job) -> dict[str, Any]:
    tables, notes, models = [], [], []
    for config in grid:
        plan, labels, scores = _sparse_plan_of(config)
        codes, scores, systems = _coded(labels, scores, config.systems(labels.index))
        if opts.model_ranks:
            models += wording_model_sparse(config, labels, codes.to_numpy(float), opts)
        n_planned = int(config.paraphrases["design_items"].iloc[0]) * len(plan.variants)
        est = estimate_sparse(
            codes.to_numpy(float), scores.to_numpy(float), systems, plan, n_resamples=opts.n_resamples,
            level=opts.level, seed=opts.seed, hits=_human_hits(config, labels, opts.human_range),
        )  # fmt: skip
        tables.append(est.assign(config_id=config.config_id, n_items=len(labels), calls=plan.n_calls,
                                 calls_share=plan.n_calls / n_planned))  # fmt: skip
    table = pd.concat(tables, ignore_index=True)
    cols = ("config_id", "n_items", "calls", "calls_share", "statistic", "estimate", "lo", "hi", "full_lo",
            "full_hi", "n_undefined")  # fmt: skip
    text = "\n".join(
        [
            "# Estimates from a sparse grid",
            "",
            f"Runs: `{opts.runs}`; verdict: {opts.verdict} label. Each configuration's plan is rebuilt from its "
            "rows and every planned cell checked present. `lo`/`hi`: items resampled with the cells each drew "
            f"({opts.n_resamples} resamples, level {opts.level}); `full_lo`/`full_hi`: narrowed by sqrt(1 - "
            "calls share), for the full grid's value on these items (ours; see the budget simulation for "
            "its coverage). With `analysis.human_range`, `human_agreement` (pooled and per wording: the argmax "
            "label equals the human score mapped onto the scale; cells weighted by 1 / P(cell), a ratio of "
            "Horvitz-Thompson totals). Estimators: docs/sparse.md.",
            "",
            markdown_table(table, {c: c for c in cols}),
            *(wording_sparse_lines(models) if models else []),
        ]
    )
    with staged_outputs(job.output_dir) as out:  # the one writer: staged, then published together
        write_table(table, out / "tables", "sparse_estimates", float_format="%.6g")
        if models:  # the sparse design's wording model (budget_report is at the 400-line cap)
            (out / "tables" / "wording_model_sparse.json").write_text(json.dumps(models, indent=1), "utf-8")
        (out / "budget.md").write_text(text + "\n", encoding="utf-8")
    metrics = {
        f"sparse/{r.config_id}/{r.statistic}{suffix}": float(v)
        for r in table.itertuples(index=False)
        for suffix, v in (("", r.estimate), ("_lo", r.lo), ("_hi", r.hi))
        if np.isfinite(v)
    }
    report = str(Path(job.output_dir) / "budget.md")
    return job.ok(analysis=asdict(opts), metrics=metrics, report=report, notes=notes)
