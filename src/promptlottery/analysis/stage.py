"""The ``lottery`` stage: judgments of one or many sweeps in, tables + figures + report.md out.

    python -m run +analysis=lottery analysis.runs='outputs/lottery_cpu_grid/grid/*'

Never calls a judge model (the only model it loads is the small sentence encoder of analysis 4,
``analysis.embeddings=minilm``; ``none`` skips it). Writes into its output directory:
``report.md``, ``tables/<name>.csv`` + ``tables/<name>.md``, ``figures/<name>.png`` and
``results.json`` (the headline numbers as ``metrics``, for ``compare``); logs the same to W&B when
``logger=wandb``.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis import report as rp
from promptlottery.analysis.agreement import AGREEMENT_MEASURES, DEFAULT_THRESHOLDS, agreement_by_task_type
from promptlottery.analysis.ensembles import convergence_analysis, ensemble_designs
from promptlottery.analysis.humans import best_variant_counts
from promptlottery.analysis.labels import label_table
from promptlottery.analysis.parallel import analyse_configurations
from promptlottery.analysis.verdict import item_table, render_verdict, verdict_summary
from promptlottery.analysis.wording import (
    prompt_similarities,
    similarity_vs_stability,
    variant_texts,
    wording_dimensions,
)
from promptlottery.judging.table import (
    OBJECTIVE_FAMILIES,
    SUBJECTIVE_FAMILIES,
    AnalysisError,
    add_verdicts,
    configurations,
    fixed_settings,
    group_files,
    load_judgments,
    main_temperature,
    paraphrase_rows,
    variant_order,
)
from promptlottery.metrics import UndefinedMetricWarning
from promptlottery.stages import StageJob, run_stage

logger = logging.getLogger(__name__)


@dataclass
class LotteryOptions:
    """The ``analysis:`` node of ``conf/analysis/lottery.yaml`` (see there for each key)."""

    runs: Any = None
    verdict: str = "argmax"
    sampled_verdict: str = "parsed"
    reference: str = "P1"
    temperature: float | None = None
    n_resamples: int = 1000
    n_permutations: int = 1000
    seed: int = 0
    level: float = 0.95
    thresholds: dict = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    embeddings: str = "minilm"
    rank_score: str = "value"
    max_ensemble_judges: int = 5
    best_by: str = "kendall"
    plots: bool = True
    report: str = "report.md"
    tables_dir: str = "tables"
    figures_dir: str = "figures"
    name: str = "lottery"
    #: analyse configurations with failed / killed / never-run jobs (the report says so)
    allow_partial: bool = False
    #: analyse one backbone's judgments in different dtypes together
    allow_mixed_dtypes: bool = False
    n_jobs: int = 1

    @classmethod
    def from_dict(cls, d: dict | None) -> LotteryOptions:
        d = dict(d or {})
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - valid)
        if unknown:
            raise AnalysisError(f"unknown analysis option(s) {unknown}; valid: {sorted(valid)}")
        opts = cls(**d)
        opts.thresholds = {**DEFAULT_THRESHOLDS, **(opts.thresholds or {})}
        if opts.embeddings not in ("minilm", "none"):
            raise AnalysisError(f"analysis.embeddings must be 'minilm' or 'none', got {opts.embeddings!r}")
        if opts.rank_score not in ("value", "cont"):
            raise AnalysisError(f"analysis.rank_score must be 'value' or 'cont', got {opts.rank_score!r}")
        n_jobs = opts.n_jobs
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or (n_jobs < 1 and n_jobs != -1):
            raise AnalysisError(
                f"analysis.n_jobs must be a positive integer or -1 (all cores), got {opts.n_jobs!r}"
            )
        if opts.best_by not in ("kendall", "pearson"):
            raise AnalysisError(f"analysis.best_by must be 'kendall' or 'pearson', got {opts.best_by!r}")
        return opts


# --------------------------------------------------------------------------- the analysis


def analyse(df: pd.DataFrame, opts: LotteryOptions, *, encode=None) -> dict[str, Any]:
    """Run analyses 1-8 on a judgments table with verdicts; returns ``{"tables": ..., ...}``."""
    kw = dict(reference=opts.reference, temperature=opts.temperature)
    boot = dict(n_resamples=opts.n_resamples, seed=opts.seed, level=opts.level)
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        tables["configurations"] = configuration_table(df, opts)
        tables["label_distributions"] = label_table(
            df, collapse_share=opts.thresholds["collapse_share"], **kw
        )
        per = analyse_configurations(
            df, opts.n_jobs, thresholds=opts.thresholds, rank_score=opts.rank_score, kw=kw, boot=boot
        )
        collapse, dists = per["tables"]["agreement_collapse"], per["distributions"]
        tables["agreement_collapse"] = collapse
        extra["distributions"] = dists
        tables["agreement_by_task_type"] = agreement_by_task_type(collapse, dists, level=opts.level)
        corr = per["tables"]["variant_human_correlation"]
        tables["variant_human_correlation"] = corr
        tables["best_variant_counts"] = best_variant_counts(corr, by=opts.best_by, reference=opts.reference)
        va = per["tables"]["variant_agreement"]
        tables["variant_agreement"] = va
        texts = variant_texts(df["prompt_group"].unique(), files=group_files(df))
        try:
            if opts.embeddings == "none":
                raise AnalysisError("analysis.embeddings=none")
            sims = prompt_similarities(texts, reference=opts.reference, encode=encode)
            extra["similarity_error"] = None
        except Exception as exc:  # noqa: BLE001 - the encoder is optional: say why and go on
            logger.warning("prompt similarities unavailable: %s", exc)
            sims = texts[["prompt_group", "variant"]].assign(similarity_to_ref=np.nan)
            extra["similarity_error"] = f"{type(exc).__name__}: {exc}"
        tables["prompt_similarities"] = sims
        sim_summary, sim_points = similarity_vs_stability(
            va, sims, reference=opts.reference, level=opts.level
        )
        tables["similarity_stability"] = sim_summary
        tables["similarity_points"] = sim_points
        tables["wording_dimensions"] = wording_dimensions(
            va, texts, n_permutations=opts.n_permutations, seed=opts.seed, level=opts.level
        )
        for k in ("summary", "pairs", "systems", "trajectories"):
            tables[f"rank_{k}"] = per["tables"][f"rank_{k}"]
        rank_dists = extra["rank_distributions"] = per["rank_distributions"]
        tables["aggregation_vs_humans"] = per["tables"]["aggregation_vs_humans"]
        tables["ensemble_designs"] = ensemble_designs(df, max_judges=opts.max_ensemble_judges, **kw, **boot)
        conv_summary, conv_items = convergence_analysis(df, **kw, **boot)
        tables["convergence_summary"] = conv_summary
        tables["convergence_items"] = conv_items
        tables["unstable_items"] = item_table(df, **kw)
        tables["verdict"] = verdict_summary(tables["unstable_items"], tables, opts)
        tables["headlines"] = headlines(tables, dists, opts, rank_dists)
    return {"tables": tables, **extra}


def configuration_table(df: pd.DataFrame, opts: LotteryOptions) -> pd.DataFrame:
    rows = []
    for cid, g in configurations(df):
        para = paraphrase_rows(g, opts.temperature)
        first = g.iloc[0]
        fixed = [f"T={t:g} x{s['sample_index'].nunique()}" for t, s in fixed_settings(g, opts.reference)]
        rows.append(
            {
                "config_id": cid,
                "dataset": first["dataset"],
                "judge_family": first["judge_family"],
                "family_type": first["family_type"],
                "prompt_group": first["prompt_group"],
                "criterion": first["criterion"],
                "scale": first["scale"],
                "backbone": first["backbone"],
                "model": first["model"],
                "main_temperature": main_temperature(g, opts.temperature),
                "variants": ",".join(variant_order(para["variant"], opts.reference)),
                "n_items": int(para["item_id"].nunique()),
                "fixed_baselines": "; ".join(fixed) or "none",
                "n_judgments": len(g),
                "n_with_human": int(para.drop_duplicates("item_id")["human"].notna().sum()),
            }
        )
    return pd.DataFrame(rows)


def _stratified_mean(collapse: pd.DataFrame, dists: dict, mask: pd.Series, measure: str, level: float):
    sub = collapse[mask]
    ok = sub[np.isfinite(sub[measure].astype(float))]
    if ok.empty:
        return np.nan, np.nan, np.nan, 0, len(sub)
    reps = [dists.get((c, s, measure)) for c, s in zip(ok["config_id"], ok["setting"])]
    reps = [r for r in reps if r is not None]
    lo = hi = np.nan
    if reps and len({len(r) for r in reps}) == 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            m = np.nanmean(np.vstack(reps), axis=0)
        m = m[np.isfinite(m)]
        if m.size:
            lo, hi = (float(v) for v in np.percentile(m, [50 * (1 - level), 50 * (1 + level)]))
    return float(ok[measure].mean()), lo, hi, len(ok), len(sub)


def headlines(
    tables: dict[str, pd.DataFrame], dists: dict, opts: LotteryOptions, rank_dists: dict | None = None
) -> pd.DataFrame:
    """The paper's headline numbers next to ours (value, CI, n, backbones, note)."""
    col = tables["agreement_collapse"]
    rows: list[dict[str, Any]] = []

    def add(key, finding, paper, est, lo, hi, n, backbones, note="", pct=False):
        rows.append(
            {
                "key": key,
                "finding": finding,
                "paper": paper,
                "ours": est,
                "ours_lo": lo,
                "ours_hi": hi,
                "pct": pct,
                "n": n,
                "backbones": backbones,
                "note": note,
            }
        )

    def bb(sub: pd.DataFrame) -> str:
        if sub is None or sub.empty:
            return ""
        pairs = sorted(
            {f"{b} ({m})" if m and m != b else str(b) for b, m in zip(sub["backbone"], sub["model"])}
        )
        return ", ".join(pairs)

    m = "mean_kappa"
    if col.empty:
        add(
            "paraphrase_kappa",
            "kappa across the five paraphrases",
            rp.PAPER["paraphrase_kappa"],
            np.nan,
            np.nan,
            np.nan,
            0,
            "",
            "n/a: no configuration",
        )
    else:
        fixed = col[col["setting"] != "paraphrases"]
        for t in sorted(fixed["temperature"].unique()):
            mask = (col["setting"] != "paraphrases") & np.isclose(col["temperature"], t)
            est, lo, hi, n, total = _stratified_mean(col, dists, mask, m, opts.level)
            add(
                f"fixed_kappa_T{t:g}",
                f"kappa, fixed prompt P1 repeated (T = {t:g})",
                rp.PAPER["fixed_kappa"],
                est,
                lo,
                hi,
                n,
                bb(col[mask]),
                _n_note(n, total),
            )
        if fixed.empty:
            add(
                "fixed_kappa",
                "kappa, fixed prompt P1 repeated",
                rp.PAPER["fixed_kappa"],
                np.nan,
                np.nan,
                np.nan,
                0,
                "",
                "n/a: no fixed-prompt baseline (run P1 with n_samples=5 at T=1e-5 and T=0.7)",
            )
        mask = col["setting"] == "paraphrases"
        est, lo, hi, n, total = _stratified_mean(col, dists, mask, m, opts.level)
        add(
            "paraphrase_kappa",
            "kappa across the five paraphrases",
            rp.PAPER["paraphrase_kappa"],
            est,
            lo,
            hi,
            n,
            bb(col[mask]),
            _n_note(n, total),
        )
        for ft, paper in (
            ("objective", rp.PAPER["objective_kappa"]),
            ("subjective", rp.PAPER["subjective_kappa"]),
        ):
            mask_t = mask & (col["family_type"] == ft)
            est, lo, hi, n, total = _stratified_mean(col, dists, mask_t, m, opts.level)
            note = _n_note(n, total) if total else f"n/a: no {ft} judge family in these runs"
            add(
                f"{ft}_kappa",
                f"kappa across paraphrases, {ft} families",
                paper,
                est,
                lo,
                hi,
                n,
                bb(col[mask_t]),
                note,
            )
    sim = tables["similarity_stability"]
    s = sim[sim["agreement"] == "kappa"].iloc[0] if not sim.empty else None
    if s is not None:
        add(
            "similarity_r",
            "similarity to P1 vs stability (Pearson r, kappa with others)",
            rp.PAPER["similarity_r"],
            s["r"],
            s["r_lo"],
            s["r_hi"],
            int(s["n_points"]),
            bb(col),
            s["note"] or f"p = {s['p']:.3f}",
        )
    rs = tables["rank_summary"]
    ranked = rs[np.isfinite(rs["kendall_tau"].astype(float))] if "kendall_tau" in rs.columns else rs.iloc[0:0]
    squad = ranked[ranked["dataset"] == "squad_v2"] if not ranked.empty else ranked
    use, where = (squad, "SQuAD v2") if not squad.empty else (ranked, "all configurations with systems")
    note = "" if not squad.empty else "no SQuAD v2 with systems in these runs: mean over " + where
    if use.empty:
        why = "n/a: no configuration with >= 2 evaluated systems (the `system` column)"
        add(
            "rank_tau",
            "rank agreement between variants (Kendall tau of system rankings)",
            rp.PAPER["squad_tau"],
            np.nan,
            np.nan,
            np.nan,
            0,
            "",
            why,
        )
        add(
            "rank_changes",
            "share of systems whose rank changes between variants",
            rp.PAPER["squad_rank_changes"],
            np.nan,
            np.nan,
            np.nan,
            0,
            "",
            why,
            pct=True,
        )
    else:
        add(
            "rank_tau",
            f"rank agreement between variants, {where} (Kendall tau)",
            rp.PAPER["squad_tau"],
            *_mean_row(use, "kendall_tau", rank_dists, opts.level),
            len(use),
            bb(use.assign(model=use["backbone"])),
            note,
        )
        add(
            "rank_changes",
            f"systems whose rank changes between variants, {where}",
            rp.PAPER["squad_rank_changes"],
            *_mean_row(use, "rank_change_share", rank_dists, opts.level),
            len(use),
            bb(use.assign(model=use["backbone"])),
            note,
            pct=True,
        )
    conv = tables["convergence_summary"]
    for key, group, paper, label in (
        ("p1_match_binary", "pooled: binary", rp.PAPER["p1_match_binary"], "binary"),
        ("p1_match_all", "pooled: all", rp.PAPER["p1_match_all"], "all"),
    ):
        r = conv[conv["group"] == group] if not conv.empty else conv
        if r.empty or not np.isfinite(float(r["p1_match"].iloc[0]) if "p1_match" in r else np.nan):
            add(
                key,
                f"P1 alone matches the five-judge plurality ({label})",
                paper,
                np.nan,
                np.nan,
                np.nan,
                0,
                "",
                f"n/a: no {label} configuration" if label == "binary" else "n/a: no items",
            )
        else:
            r = r.iloc[0]
            add(
                key,
                f"P1 alone matches the five-judge plurality ({label} scales)",
                paper,
                r["p1_match"],
                r["p1_match_lo"],
                r["p1_match_hi"],
                int(r["n_items"]),
                bb(col),
                "ties broken by P1 count as matches; "
                f"untied only: {rp.pct_ci(r['p1_match_unique'], r['p1_match_unique_lo'], r['p1_match_unique_hi'])}",
                pct=True,
            )
    return pd.DataFrame(rows)


def _n_note(n: int, total: int) -> str:
    if total == 0:
        return "n/a: no configuration"
    if n == 0:
        return f"n/a: kappa undefined in all {total} configurations (labels collapsed, see the label table)"
    if n < total:
        return f"mean over {n} of {total} configurations (kappa undefined in the others)"
    return f"mean over {n} configuration{'s' if n != 1 else ''}; CI: items resampled within each"


def _mean_row(df: pd.DataFrame, m: str, dists: dict | None, level: float) -> tuple[float, float, float]:
    """Mean over configurations with a stratified CI (the configurations' replicates averaged)."""
    reps = [(dists or {}).get((cid, m)) for cid in df["config_id"]]
    lo = hi = np.nan
    if reps and all(r is not None for r in reps) and len({len(r) for r in reps}) == 1:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_rep = np.nanmean(np.vstack(reps), axis=0)
        mean_rep = mean_rep[np.isfinite(mean_rep)]
        if mean_rep.size:
            lo, hi = (float(v) for v in np.percentile(mean_rep, [50 * (1 - level), 50 * (1 + level)]))
    return float(df[m].astype(float).mean()), lo, hi


# --------------------------------------------------------------------------- writing


_COLLAPSE_COLS = {
    "config_id": "configuration",
    "setting": "setting",
    "judges": "judges",
    "n_items": "n",
    "n_dropped": "dropped",
    "overlap": "overlap",
    "mean_kappa": "mean kappa",
    "fleiss_kappa": "Fleiss kappa",
    "alpha_nominal": "alpha (nominal)",
    "alpha_interval": "alpha (interval)",
    "alpha_interval_cont": "alpha (interval, weighted)",
    "band": "band",
}


def _config_notes(R: rp.Report, table: pd.DataFrame, by: str) -> None:
    """The ``notes`` of ``table``, each keyed ``"<config_id> | <by>"``."""
    R.notes(
        table.assign(key=table["config_id"] + " | " + table[by]) if not table.empty else table, "key", "notes"
    )


def write_outputs(
    result: dict, df: pd.DataFrame, opts: LotteryOptions, out_dir: str | Path, files: list[str]
) -> dict[str, Any]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = result["tables"]
    tdir = out_dir / opts.tables_dir
    written = {name: rp.write_table(t, name, tdir) for name, t in tables.items()}
    tables["unstable_items"].to_csv(out_dir / "unstable_items.csv", index=False, float_format=rp.CSV_FLOAT)
    figures = {}
    if opts.plots:
        from promptlottery.analysis.plots import draw_all

        figures = draw_all(tables, out_dir / opts.figures_dir, thresholds=opts.thresholds)
    text = render_report(result, df, opts, out_dir, figures, files)
    (out_dir / opts.report).write_text(text, encoding="utf-8")
    return {"tables": written, "figures": figures, "report": out_dir / opts.report}


def render_report(
    result: dict, df: pd.DataFrame, opts: LotteryOptions, out_dir: Path, figures: dict, files: list[str]
) -> str:
    t = result["tables"]
    R = rp.Report("Prompt lottery report")
    render_verdict(R, t["verdict"])
    verdict = {
        "argmax": "the argmax label (the most probable scale label; the paper's near-greedy setting)",
        "weighted": "the logprob-weighted score rounded to the nearest scale label",
    }[opts.verdict]
    runs = opts.runs if isinstance(opts.runs, str) else ", ".join(map(str, opts.runs or []))
    R.bullets(
        [
            f"Runs: `{runs}` ({len(files)} judgment files, {len(df)} judgments, "
            f"{t['configurations'].shape[0]} configurations)",
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
            f"{opts.level:.0%} CIs; {opts.n_permutations} permutations for the wording null.",
            f"Thresholds: kappa >= {opts.thresholds['robust']:.2f} robust, >= {opts.thresholds['usable']:.2f} usable; "
            f"verdicts count as collapsed when one label has >= {opts.thresholds['collapse_share']:.0%} of them "
            "(kappa-type measures are then reported as n/a, not as a number).",
            f"Task types: objective = {', '.join(OBJECTIVE_FAMILIES)}; subjective = {', '.join(SUBJECTIVE_FAMILIES)}; "
            "binary = two-label scales, Likert = the others.",
            f"Reference variant: {opts.reference}; judge order for aggregation and convergence: "
            f"{opts.reference} first, then the other variants in natural order.",
        ]
    )
    R.table(
        t["configurations"],
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

    R.h("Headlines: the paper vs ours")
    hl = t["headlines"].copy()
    if not hl.empty:
        hl["ours"] = [
            rp.pct_ci(e, lo, hi) if p else rp.ci(e, lo, hi)
            for e, lo, hi, p in zip(hl["ours"], hl["ours_lo"], hl["ours_hi"], hl["pct"])
        ]
        hl["ours"] = [
            o if o != "n/a" else (n if str(n).startswith("n/a") else "n/a: undefined")
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
        },
        empty="no headline could be computed",
    )
    R.p(
        f"Kappa = mean pairwise Cohen's kappa; verdict = {opts.verdict}. Our judges are small CPU models, the "
        "paper's are 7B+ instruction-tuned models: compare directions, not levels."
    )

    R.h("Verdict label distributions")
    R.p(
        "Where one label takes nearly every verdict, kappa-type measures are undefined or meaningless; those "
        "configurations say so here and in every table below."
    )
    R.table(
        t["label_distributions"],
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
    col = t["agreement_collapse"]
    R.table(rp.with_ci_columns(col, list(AGREEMENT_MEASURES)), _COLLAPSE_COLS, empty="no configuration")
    _config_notes(R, col, "setting")
    R.figure(figures.get("agreement_collapse"), out_dir, "agreement collapse", missing="no agreement rows")

    R.h("2. By task type and backbone")
    bt = t["agreement_by_task_type"]
    R.p("Means over configurations (paraphrase setting); raw overlap next to the chance-corrected measures.")
    R.table(
        rp.with_ci_columns(bt, ["overlap", "mean_kappa", "fleiss_kappa", "alpha_nominal"]),
        {
            "grouping": "grouping",
            "group": "group",
            "n_configs": "configs",
            "overlap": "overlap",
            "mean_kappa": "mean kappa",
            "mean_kappa_n": "kappa defined in",
            "fleiss_kappa": "Fleiss kappa",
            "alpha_nominal": "alpha (nominal)",
            "overlap_minus_kappa": "overlap - kappa",
        },
        empty="no configuration",
    )
    R.figure(figures.get("agreement_by_task_type"), out_dir, "task types", missing="no configuration")

    R.h("3. No prompt wins")
    corr = t["variant_human_correlation"]
    shown = rp.with_ci_columns(corr, ["pearson", "kendall", "cont_pearson", "cont_kendall"])
    if not shown.empty:
        is_ref = shown["variant"] == opts.reference
        for c in ("williams_t", "williams_p"):
            shown[c] = [("reference" if r else rp.fmt(v)) for r, v in zip(is_ref, shown[c])]
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
    _config_notes(R, corr, "variant")
    R.p(
        f"Best variant per configuration (highest {opts.best_by} tau/r on verdict scores; ties count for each tied "
        "variant); significant Williams tests (p < 0.05) against P1:"
    )
    R.table(
        t["best_variant_counts"],
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

    R.h("4. Similarity vs stability")
    if result.get("similarity_error"):
        R.p(rp.na_paragraph(f"prompt embeddings unavailable ({result['similarity_error']})"))
    R.p(
        "One point per configuration x variant (P1 excluded): its all-MiniLM-L6-v2 cosine similarity to P1 vs its "
        "mean agreement with the other variants. CI of r: Fisher z."
    )
    R.table(
        rp.with_ci_columns(t["similarity_stability"], ["r"]),
        {
            "agreement": "agreement",
            "n_points": "points",
            "n_configs": "configs",
            "r": "Pearson r",
            "p": "p",
            "note": "note",
        },
        empty="no variant",
    )
    R.figure(
        figures.get("similarity_stability"), out_dir, "similarity vs stability", missing="no defined points"
    )

    R.h("5. Wording dimensions")
    R.p(
        "Eta-squared of each variant's kappa with the others (centred within its configuration) by the variant's "
        f"tag, against {opts.n_permutations} permutations of the tags among the variants of each prompt group."
    )
    R.table(
        t["wording_dimensions"],
        {
            "dimension": "dimension",
            "levels": "levels",
            "n_points": "points",
            "eta_squared": "eta^2",
            "null_mean": "null mean",
            "null_hi": f"null {opts.level:.0%} quantile",
            "p": "p",
            "note": "note",
        },
    )
    R.figure(
        figures.get("wording_dimensions"), out_dir, "wording dimensions", missing="no defined eta-squared"
    )

    R.h("6. Rank reversals")
    rs = t["rank_summary"]
    R.p(
        "Systems ranked per variant by mean "
        + ("verdict score" if opts.rank_score == "value" else "weighted score")
        + "; flips = system pairs in strictly opposite order; rank changes = systems whose rank differs."
    )
    R.table(
        rp.with_ci_columns(rs, ["kendall_tau", "flip_share", "rank_change_share"]),
        {
            "config_id": "configuration",
            "n_systems": "systems",
            "n_items": "items",
            "kendall_tau": "mean tau",
            "flip_share": "pairs flipped",
            "rank_change_share": "systems changing rank",
            "note": "note",
        },
        empty="no configuration",
    )
    sy = t["rank_systems"]
    if not sy.empty:
        R.p("Best and worst rank of each system across the variants:")
        R.table(
            sy,
            {
                "config_id": "configuration",
                "system": "system",
                "n_items": "items",
                "best_rank": "best",
                "worst_rank": "worst",
                "best_variant": "best under",
                "worst_variant": "worst under",
            },
        )
    R.figure(
        figures.get("rank_trajectories"),
        out_dir,
        "rank trajectories",
        missing="no configuration with >= 2 evaluated systems",
    )

    R.h("7. Aggregation")
    R.p(
        "Plurality = modal label, ties broken by the P1 label (by the earliest judge in order when P1's label is not "
        "tied); majority = the label of strictly more than half of the judges with a verdict (items without one are "
        "left out); mean and median of the verdict scores. Paired bootstrap of Kendall tau against P1 alone."
    )
    ag = t["aggregation_vs_humans"]
    R.table(
        rp.with_ci_columns(ag, ["pearson", "kendall", "diff_vs_ref"]),
        {
            "config_id": "configuration",
            "method": "method",
            "n": "n",
            "pearson": "Pearson",
            "kendall": "Kendall",
            "diff_vs_ref": "Kendall - P1",
            "significant": "significant",
        },
        empty="no configuration",
    )
    _config_notes(R, ag, "method")
    R.figure(
        figures.get("aggregation"), out_dir, "aggregation", missing="no defined correlation with human labels"
    )
    R.p("Inter-prompt vs inter-model vs hybrid ensembles, the same number k of judges on the same items:")
    ed = t["ensemble_designs"]
    R.table(
        rp.with_ci_columns(ed, ["mean_kappa", "plurality_kendall", "mean_kendall"]),
        {
            "task": "task",
            "design": "design",
            "k": "k",
            "judges": "judges",
            "n_items": "items",
            "mean_kappa": "kappa among judges",
            "plurality_kendall": "plurality Kendall",
            "mean_kendall": "mean Kendall",
            "note": "note",
        },
        empty="no task",
    )

    R.h("8. Convergence")
    R.p(
        "Judges in the recorded order (column `judge_order`). Converged at k = the running plurality (an untied "
        "mode) equals the final one from the k-th judge on; never = the final plurality is a tie, decided only by "
        "the P1 tie-break."
    )
    cs = t["convergence_summary"]
    R.table(
        rp.with_ci_columns(cs, ["by_3", "by_5", "never", "p1_match", "p1_match_unique"], pct=True),
        {
            "group": "group",
            "n_items": "items",
            "n_judges": "judges",
            "judge_order": "judge order",
            "by_3": "by 3rd judge",
            "by_5": "by 5th judge",
            "never": "never",
            "p1_match": "P1 = plurality",
            "p1_match_unique": "P1 = plurality (untied)",
            "note": "note",
        },
        empty="no items",
    )
    R.figure(figures.get("convergence"), out_dir, "convergence", missing="no items")

    R.h("Files")
    R.bullets(
        [
            f"`{opts.tables_dir}/<name>.csv` and `.md`: " + ", ".join(sorted(t)),
            f"`{opts.figures_dir}/`: " + (", ".join(sorted(f"{k}.png" for k in figures)) or "none"),
        ]
    )
    return R.text()


# --------------------------------------------------------------------------- entry points


def run_lottery(
    opts: LotteryOptions,
    output_dir: str | Path,
    *,
    tracker=None,
    encode=None,
    config: dict | None = None,
    root: str | Path = ".",
) -> dict[str, Any]:
    """Load ``opts.runs``, analyse, write everything (and ``results.json``) into ``output_dir``.

    ``config`` is recorded in results.json (default: the analysis options); ``tracker`` (from
    :func:`promptlottery.tracking.wandb_logger.make_tracker`, or a function that builds one)
    receives the headline metrics, every table and every figure, and is finished here. Returns the
    results.json record plus ``files`` (the judgments read) and ``written`` (the paths).
    """
    job = StageJob(
        "lottery",
        output_dir,
        config=config if config is not None else asdict(opts),
        root=root,
        tracker=tracker,
        fields={"stage": "lottery"},
    )
    return run_stage(job, lambda job: _lottery(opts, job, encode=encode), name="lottery analysis")


def _lottery(opts: LotteryOptions, job: StageJob, *, encode=None) -> dict[str, Any]:
    output_dir = job.output_dir
    if opts.runs in (None, "", []):
        raise AnalysisError("analysis.runs is required: a glob (or list) of sweep / job directories")
    problems: list[dict[str, str]] = []
    loaded = load_judgments(
        opts.runs,
        allow_partial=opts.allow_partial,
        allow_mixed_dtypes=opts.allow_mixed_dtypes,
        problems=problems,
    )
    files = sorted({str(Path(d) / "judgments.parquet") for d in loaded["run_dir"].unique() if d})
    df = add_verdicts(loaded, opts.verdict, sampled=opts.sampled_verdict)
    incomplete = problems[0] if problems else {}
    logger.info(
        "lottery analysis files=%d judgments=%d configurations=%d",
        len(files),
        len(df),
        df["config_id"].nunique(),
    )
    result = analyse(df, opts, encode=encode)
    result["tables"]["incomplete_configurations"] = pd.DataFrame(
        sorted(incomplete.items()), columns=["config_id", "status"]
    )
    written = write_outputs(result, df, opts, output_dir, files)
    metrics = summary_metrics(result["tables"])
    tracker = job.tracker
    tracker.log_metrics({"metrics": metrics})  # the same keys as results.json: compare can mix the two
    for name, table in result["tables"].items():
        tracker.log_table(f"lottery/table/{name}", table)
    for name, path in written["figures"].items():
        tracker.log_image(f"lottery/figure/{name}", str(path))
    record = job.ok(
        analysis=asdict(opts),
        metrics=metrics,
        n_judgments=len(df),
        n_files=len(files),
        partial=bool(opts.allow_partial and incomplete),
        incomplete_configurations=incomplete,
        report=str(written["report"]),
    )
    return {**record, "files": files, "written": written}


def make_analysis_tracker(logger_cfg, config: dict, opts: LotteryOptions):
    """The W&B (or no-op) tracker of one lottery analysis, from the ``logger`` config group."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.wandb_logger import make_tracker

    return make_tracker(
        OmegaConf.to_container(logger_cfg, resolve=True),
        config=config,
        name=opts.name,
        group="analysis",
        job_type="analysis",
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


def summary_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Flat headline numbers (finite ones only) for results.json, W&B summaries and ``compare``."""
    out: dict[str, float] = {}
    for _, r in tables["headlines"].iterrows():
        for suffix, col in (("", "ours"), ("_lo", "ours_lo"), ("_hi", "ours_hi")):
            v = r[col]
            if v is not None and np.isfinite(v):
                out[f"{r['key']}{suffix}"] = float(v)
    return out


def run(cfg, output_dir: str | Path) -> dict[str, Any]:
    """Stage entry point (``stage: lottery``)."""
    from omegaconf import OmegaConf

    from promptlottery.tracking.guard import in_multirun

    a = OmegaConf.to_container(cfg.analysis, resolve=True) if cfg.get("analysis") is not None else {}
    if a.get("runs") in (None, "", []) and in_multirun():
        # `+analysis=lottery` added to a judging sweep: the jobs judge, the callback analyses at the end
        from promptlottery.pipeline import run as judge_run

        return judge_run(cfg, output_dir)
    opts = LotteryOptions.from_dict(a)
    config = OmegaConf.to_container(cfg, resolve=True)
    root = cfg.paths.root_dir if cfg.get("paths") else "."
    tracker = make_analysis_tracker(cfg.logger, config, opts)
    res = run_lottery(opts, output_dir, tracker=tracker, config=config, root=root)
    return {k: v for k, v in res.items() if k not in ("files", "written")}
