"""The lottery section of report.md: the verdict, the runs and their configurations, the
headlines beside the paper's and sections 1-3; sections 4-8 are in
:mod:`~promptlottery.analysis.lottery.sections.lottery_later`."""

from __future__ import annotations

import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.analysis.lottery.agreement_measures import AGREEMENT_MEASURES, measure_columns
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.lottery.sections.base import ReportContext
from promptlottery.analysis.lottery.sections.lottery_later import config_notes, render_later_sections
from promptlottery.analysis.lottery.verdict import render_verdict
from promptlottery.judging.grid import describe_verdict
from promptlottery.judging.table import families_of_type
from promptlottery.tracking import tables

_COLLAPSE_COLS = {
    "config_id": "configuration",
    "setting": "setting",
    "judges": "judges",
    "n_items": "n",
    "n_dropped": "dropped",
    **measure_columns(
        (
            "overlap",
            "mean_kappa",
            "fleiss_kappa",
            "fleiss_kappa_all",
            "alpha_nominal",
            "alpha_interval",
            "alpha_interval_cont",
        )
    ),
    "band": "band (paper: Fleiss)",
    "band_mean_kappa": "band (ours: mean kappa)",
}


def render_lottery(R: rp.Report, ctx: ReportContext) -> None:
    """The lottery section into ``R``: the opening, the headlines, sections 1-8."""
    _opening(R, ctx)
    _headlines(R, ctx)
    _sections_1_2(R, ctx)
    _section_3(R, ctx)
    render_later_sections(R, ctx.result, ctx.opts, ctx.out_dir, ctx.figures)


def _opening(R: rp.Report, ctx: ReportContext) -> None:
    """The verdict, the verdict map, the runs and the configurations."""
    t, grid, opts, out_dir, figures, files = (
        ctx.tables,
        ctx.grid,
        ctx.opts,
        ctx.out_dir,
        ctx.figures,
        ctx.files,
    )
    render_verdict(R, t[lt.VERDICT])
    R.figure(figures.get("verdict_map"), out_dir, "verdict map", missing="no item with paraphrase verdicts")
    verdict = describe_verdict(grid.verdict)
    runs = opts.runs if isinstance(opts.runs, str) else ", ".join(map(str, opts.runs or []))
    R.bullets(
        [
            f"Runs: `{runs}` ({len(files)} judgment files, {grid.n_judgments} judgments, "
            f"{t[lt.CONFIGURATIONS].shape[0]} configurations)",
            f"Verdict: {verdict}. Continuous measures (interval Krippendorff alpha, Pearson, Kendall tau) are also "
            "computed on the unrounded logprob-weighted score (columns `alpha_interval_cont`, `cont_*`).",
            "Sampled fixed-prompt baselines (T >= 0.001): "
            + (
                "the label parsed from the sampled answer: label probabilities are read before sampling and do "
                "not change between samples."
                if opts.sampled_verdict == "parsed"
                else "the same verdict as above."
            ),
            f"Inference: percentile bootstrap over items, {opts.n_resamples} resamples, seed {opts.seed}, "
            f"{opts.level:.0%} CIs; {opts.n_permutations} permutations for the wording null. Each configuration's "
            f"Fleiss' kappa: the {opts.kappa_interval} interval (analysis.kappa_interval; "
            + (
                "bootstrap-t on the same resamples, a jackknife SE in each: the percentile interval under-covers "
                "below ~128 items, docs/analysis.md)."
                if opts.kappa_interval == "studentized"
                else "it under-covers below ~128 items, docs/analysis.md)."
            ),
            f"Band (the paper's, §3.2): Fleiss' kappa >= {opts.thresholds['robust']:.2f} (the humans' Fleiss) robust, "
            f"> {opts.thresholds['usable']:.2f} usable; ours beside it: mean pairwise Cohen's kappa >= either; "
            f"verdicts count as collapsed when one label has >= {opts.thresholds['collapse_share']:.0%} of them "
            "(kappa-type measures are then reported as n/a, not as a number).",
            f"Task types: objective = {', '.join(families_of_type('objective'))}; "
            f"subjective = {', '.join(families_of_type('subjective'))}; "
            "binary = two-label scales, Likert = the others.",
            f"Reference variant: {opts.reference}; judge order for aggregation and convergence: "
            f"{opts.reference} first, then the other variants in natural order.",
        ]
    )
    R.table(
        t[lt.CONFIGURATIONS],
        {
            "config_id": "configuration",
            "family_type": "family type",
            "scale": "scale",
            "backbone": "backbone",
            "model": "model",
            "variants": "variants",
            "n_items": "items",
            "n_with_human": "with human label",
            "fixed_baselines": "fixed baselines",
        },
        empty="no configurations",
    )
    _incomplete_section(R, t.get("incomplete_configurations"), opts)


def _headlines(R: rp.Report, ctx: ReportContext) -> None:
    """The headline rows beside the paper's numbers."""
    t, opts = ctx.tables, ctx.opts
    R.h("Headlines: the paper vs ours")
    hl = t[lt.HEADLINES].copy()
    if not hl.empty:
        hl["ours"] = [
            tables.pct_ci(e, lo, hi) if p else tables.ci(e, lo, hi)
            for e, lo, hi, p in zip(hl["ours"], hl["ours_lo"], hl["ours_hi"], hl["pct"])
        ]
        hl["ours"] = [
            o
            if o != "n/a"
            else (n if str(n).startswith(("n/a", "agrees by construction")) else "n/a: undefined")
            for o, n in zip(hl["ours"], hl["note"])
        ]
    R.table(
        hl,
        {
            "finding": "finding",
            "paper": "paper",
            "ours": "ours [95% CI]",
            "n": "n",
            "backbones": "backbones",
            "note": "note",
            "definition": "definition",
        },
        empty="no headline could be computed",
    )
    R.p(
        "Kappa headlines = Fleiss' kappa, the paper's measure (§3.2); mean pairwise Cohen's kappa beside it, named. "
        "The plurality cluster = a label given by at least 3 of the 5 judges (ceil((J + 1) / 2) of J); items "
        "without one are no-consensus. The tie-broken plurality (ties_to_P1) is ours and named so. "
        f"Verdict = {opts.verdict}. Our judges are small CPU models, the paper's are 7B+ instruction-tuned "
        "models: compare directions, not levels."
    )


def _sections_1_2(R: rp.Report, ctx: ReportContext) -> None:
    """The verdict label distributions, sections 1 and 2."""
    t, out_dir, figures = ctx.tables, ctx.out_dir, ctx.figures
    R.h("Verdict label distributions")
    R.p(
        "Where one label takes nearly every verdict, kappa-type measures are undefined or meaningless; those "
        "configurations say so here and in every table below."
    )
    R.table(
        t[lt.LABEL_DISTRIBUTIONS],
        {
            "config_id": "configuration",
            "setting": "setting",
            "n_verdicts": "verdicts",
            "distribution": "label shares",
            "per_judge_modal": "modal label per judge",
            "collapsed": "collapsed?",
            "sources": "verdict sources",
        },
        empty="no verdicts",
    )
    R.figure(figures.get("label_distributions"), out_dir, "label distributions", missing="no verdicts")

    R.h("1. Agreement collapse: five paraphrases vs a fixed prompt")
    col = t[lt.AGREEMENT_COLLAPSE]
    R.table(rp.with_ci_columns(col, list(AGREEMENT_MEASURES)), _COLLAPSE_COLS, empty="no configuration")
    config_notes(R, col, "setting")
    R.figure(figures.get("agreement_collapse"), out_dir, "agreement collapse", missing="no agreement rows")

    R.h("2. By task type and backbone")
    bt = t[lt.AGREEMENT_BY_TASK_TYPE]
    R.p("Means over configurations (paraphrase setting); raw overlap next to the chance-corrected measures.")
    R.table(
        rp.with_ci_columns(bt, ["overlap", "mean_kappa", "fleiss_kappa", "alpha_nominal"]),
        {
            "grouping": "grouping",
            "group": "group",
            "n_configs": "configs",
            **measure_columns(("overlap", "mean_kappa")),
            "mean_kappa_n": "kappa defined in",
            **measure_columns(("fleiss_kappa", "fleiss_kappa_all", "alpha_nominal")),
            "overlap_minus_kappa": "overlap - kappa",
        },
        empty="no configuration",
    )
    R.figure(figures.get("agreement_by_task_type"), out_dir, "task types", missing="no configuration")


def _section_3(R: rp.Report, ctx: ReportContext) -> None:
    """Section 3: no prompt wins."""
    t, opts, out_dir, figures = ctx.tables, ctx.opts, ctx.out_dir, ctx.figures
    R.h("3. No prompt wins")
    corr = t[lt.VARIANT_HUMAN_CORRELATION]
    shown = rp.with_ci_columns(corr, ["pearson", "kendall", "cont_pearson", "cont_kendall"])
    if not shown.empty:
        is_ref = shown["variant"] == opts.reference
        for c in ("williams_t", "williams_p"):
            shown[c] = [("reference" if r else tables.fmt(v)) for r, v in zip(is_ref, shown[c])]
    R.table(
        shown,
        {
            "config_id": "configuration",
            "variant": "variant",
            "n": "n",
            "pearson": "Pearson",
            "kendall": "Kendall tau",
            "cont_pearson": "Pearson (weighted)",
            "cont_kendall": "Kendall (weighted)",
            "williams_t": "Williams t vs P1",
            "williams_p": "p",
        },
        empty="no variant",
    )
    config_notes(R, corr, "variant")
    R.p(
        f"Best variant per configuration (highest {opts.best_by} tau/r on verdict scores; ties count for each tied "
        "variant); significant Williams tests (p < 0.05) against P1:"
    )
    R.table(
        t[lt.BEST_VARIANT_COUNTS],
        {
            "variant": "variant",
            "n_configs": "configs",
            "best": "best in",
            "best_share": "share",
            "better_than_ref": "sig. better than P1",
            "worse_than_ref": "sig. worse than P1",
        },
        empty="no human labels",
    )
    R.figure(
        figures.get("variant_human_correlation"),
        out_dir,
        "variant correlations",
        missing="no defined correlation with human labels",
    )


def _incomplete_section(R: rp.Report, table: pd.DataFrame | None, opts: LotteryOptions) -> None:
    """Configurations with failed, killed or never-run jobs: left out, or analysed as partial."""
    if table is None or table.empty:
        return
    R.h("Incomplete configurations")
    R.p(
        "PARTIAL GRID: analysed with `analysis.allow_partial=true`; the numbers below include these "
        "configurations with the judges they have."
        if opts.allow_partial
        else "Left out of every table below (with the other backbones of the same dataset and judge); "
        "`analysis.allow_partial=true` analyses them with the judges they have."
    )
    R.bullets([f"{r.config_id}: {r.status}" for r in table.itertuples()])
