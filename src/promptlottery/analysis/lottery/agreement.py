"""Analyses 1-2: agreement among the five paraphrases vs a fixed prompt, by task type and backbone.

Every agreement number comes from :mod:`promptlottery.metrics` (the measures on one matrix:
:mod:`promptlottery.analysis.lottery.agreement_measures`) with a percentile bootstrap CI over items (:func:`promptlottery.metrics.bootstrap_ci`, the same resampled items for every measure of a
matrix). Items need a verdict from every judge of the matrix (listwise deletion; ``n_items``
counts the complete ones). Where the verdicts collapse onto one label the chance-corrected
measures are not computed: the table says why, with the label distribution.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.analysis.lottery.agreement_measures import agreement_measures
from promptlottery.analysis.lottery.labels import format_distribution, label_distribution
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics import UndefinedMetricWarning, cohen_kappa, overlap

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions


def _complete(v: pd.DataFrame, c: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    keep = v.notna().all(axis=1) & c.notna().all(axis=1)
    return v[keep], c[keep], int((~keep).sum())


def _band(kappa: float, thresholds: dict, *, strict: bool) -> str:
    """``robust`` at or above the robust threshold, ``usable`` above the usable one (``strict``) or at
    or above it (not ``strict``), else ``below usable``; ``n/a`` when undefined."""
    if not np.isfinite(kappa):
        return "n/a"
    if kappa >= thresholds["robust"]:
        return "robust"
    usable = thresholds["usable"]
    if kappa > usable or (not strict and kappa == usable):
        return "usable"
    return "below usable"


def paper_band(fleiss: float, thresholds: dict) -> str:
    """The paper's band (§3.2) of a Fleiss' kappa across the judges: "the paper set κ = 0.80 as the
    human robustness baseline and κ > 0.61 as the usability threshold", the 0.80 being the humans'
    Fleiss' κ ("average human agreement of ... 0.80 Fleiss' κ"). ``robust``: at least the human
    baseline (reaching it is ours: the summary gives no comparison for 0.80); ``usable``: strictly
    above 0.61, as the paper writes it.

    >>> th = {"robust": 0.80, "usable": 0.61}
    >>> paper_band(0.61, th), paper_band(0.62, th), paper_band(0.80, th)
    ('below usable', 'usable', 'robust')
    """
    return _band(fleiss, thresholds, strict=True)


def agreement_collapse(grid: JudgmentGrid, opts: LotteryOptions, *, return_distributions: bool = False):
    """Analysis 1: agreement among the variants next to the fixed-prompt baselines, per configuration.

    One row per configuration of ``grid`` and setting: ``paraphrases`` (the variants at the main
    temperature) and ``fixed T=<t>`` (the reference variant's repeated samples at temperature ``t``;
    ``fixed T=<t> batch`` when each repeat had its own batch composition, column ``repeat_source``).
    Columns: each measure of :data:`AGREEMENT_MEASURES` with ``_lo`` / ``_hi`` bounds, ``band`` (the
    paper's: Fleiss' kappa, at least the robust threshold / strictly above the usable one,
    :func:`paper_band`), ``band_mean_kappa`` (ours: mean pairwise Cohen's kappa, at least either
    threshold), the label distribution and ``notes``.
    With ``return_distributions=True`` also returns ``{(config_id, setting, measure): replicates}``
    for stratified group CIs (:func:`agreement_by_task_type`). ``opts``: ``n_resamples``, ``seed``,
    ``level`` and ``thresholds`` (the reference variant and temperature are the grid's).
    """
    rows_out, dists = [], {}
    for conf in grid:
        for setting in _settings(conf, grid.reference):
            rows_out.append(_collapse_row(conf, *setting, opts, dists))
    table = pd.DataFrame(rows_out)
    if len(table):
        table = sort_collapse(table)
    return (table, dists) if return_distributions else table


def _settings(conf, reference: str) -> list[tuple]:
    """``(setting, rows, values, conts, judges, temperature, repeat_source)`` of one configuration:
    its paraphrases, then each fixed-prompt baseline."""
    para = conf.paraphrases
    settings = [
        (
            "paraphrases",
            para,
            conf.matrix("value"),
            conf.matrix("cont"),
            ",".join(map(str, conf.order)),
            para["temperature"].min(),
            "none",
        )
    ]
    for f in conf.fixed:
        samples = sorted(f.rows["sample_index"].unique())
        judges = f"{reference} x{len(samples)} samples"
        v, c = conf.fixed_matrix(f, "value"), conf.fixed_matrix(f, "cont")
        settings.append((f.name, f.rows, v, c, judges, f.temperature, f.repeat_source))
    return settings


def _collapse_row(conf, setting, g, v, c, judges, temp, source, opts: LotteryOptions, dists: dict) -> dict:
    """One row of the collapse table; the measures' bootstrap replicates go into ``dists``."""
    cid, scale, th = conf.config_id, conf.scale, opts.thresholds  # the defaults merged in
    v, c, dropped = _complete(v, c)
    res = agreement_measures(
        v.to_numpy(),
        list(scale.scores),
        c.to_numpy(),
        n_resamples=opts.n_resamples,
        seed=opts.seed,
        level=opts.level,
        collapse_share=th["collapse_share"],
        scale_labels=list(scale.labels),
        kappa_interval=opts.kappa_interval,
    )
    first = conf.first
    rec: dict[str, Any] = {
        "config_id": cid,
        "dataset": first["dataset"],
        "judge_family": first["judge_family"],
        "prompt_group": first["prompt_group"],
        "backbone": first["backbone"],
        "model": first["model"],
        "scale": scale.name,
        "task_type": first["task_type"],
        "family_type": first["family_type"],
        "setting": setting,
        "judges": judges,
        "temperature": float(temp),
        "repeat_source": source,
        "n_items": int(len(v)),
        "n_dropped": dropped,
        # how far the unrounded score (``cont``: the weighted score) moves between the judges of
        # one item: the largest and the mean range; for batch repeats, the size of the batch noise
        "cont_range_max": float((c.max(axis=1) - c.min(axis=1)).max()) if len(c) else np.nan,
        "cont_range_mean": float((c.max(axis=1) - c.min(axis=1)).mean()) if len(c) else np.nan,
        "labels": format_distribution(label_distribution(g["label"])),
        "verdict_source": ",".join(sorted(g["verdict_source"].dropna().astype(str).unique())),
    }
    notes = []
    for m, e in res.items():
        rec[m], rec[f"{m}_lo"], rec[f"{m}_hi"] = e.estimate, e.low, e.high
        if e.note:
            notes.append(f"{m}: {e.note}")
        if e.distribution is not None:
            dists[(cid, setting, m)] = e.distribution
    rec["band"] = paper_band(rec["fleiss_kappa"], th)
    rec["band_mean_kappa"] = _band(rec["mean_kappa"], th, strict=False)
    rec["notes"] = "; ".join(_dedupe_notes(notes))
    return rec


def sort_collapse(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by configuration, then the paraphrase setting before the fixed ones by temperature."""
    return table.sort_values(["config_id", "setting"], key=_setting_key, kind="mergesort").reset_index(
        drop=True
    )


def _setting_key(s: pd.Series) -> pd.Series:
    if s.name == "setting":  # paraphrases first, then fixed settings by temperature ("fixed T=1e-05 batch")
        return s.map(
            lambda x: (0, 0.0, "") if x == "paraphrases" else (1, float(x.split("=")[1].split()[0]), x)
        )
    return s


def _dedupe_notes(notes: list[str]) -> list[str]:
    """Collapse repeated reasons: 'a, b: reason' instead of one note per measure."""
    by_reason: dict[str, list[str]] = {}
    for n in notes:
        m, _, reason = n.partition(": ")
        by_reason.setdefault(reason, []).append(m)
    return [f"{', '.join(ms)}: {r}" for r, ms in by_reason.items()]


GROUPINGS = {
    "task type": ["task_type"],
    "judge family type": ["family_type"],
    "backbone": ["backbone"],
    "task type x family type x backbone": ["task_type", "family_type", "backbone"],
}
#: fleiss_kappa_all: the paper's comparison of task types (§4.2) keeps every configuration where it is defined
TASK_MEASURES = ("overlap", "mean_kappa", "fleiss_kappa", "fleiss_kappa_all", "alpha_nominal")


def agreement_by_task_type(
    collapse: pd.DataFrame,
    distributions: dict,
    *,
    setting: str = "paraphrases",
    level: float = 0.95,
    measures: tuple[str, ...] = TASK_MEASURES,
) -> pd.DataFrame:
    """Analysis 2: mean agreement across configurations by task type, family type and backbone.

    Binary vs Likert (the scale), objective vs subjective (the judge family, see
    :func:`~promptlottery.judging.table.families_of_type`), per backbone; raw overlap next to the
    chance-corrected measures and their gap. The CI of a group mean averages the configurations'
    bootstrap replicates (items resampled within each configuration); configurations where a
    measure is undefined are left out of that measure's mean (``<measure>_n`` counts the others).
    """
    base = collapse[collapse["setting"] == setting] if len(collapse) else collapse
    rows = []
    lo_q, hi_q = 50.0 * (1 - level), 50.0 * (1 + level)
    for grouping, cols in GROUPINGS.items():
        if base.empty:
            break
        for key, g in sorted(base.groupby(cols), key=lambda t: tuple(map(str, np.atleast_1d(t[0])))):
            key = tuple(np.atleast_1d(key))
            rec: dict[str, Any] = {
                "grouping": grouping,
                "group": " / ".join(map(str, key)),
                "n_configs": len(g),
            }
            for m in measures:
                ok = g[np.isfinite(g[m].astype(float))]
                rec[f"{m}_n"] = len(ok)
                if ok.empty:
                    rec[m] = rec[f"{m}_lo"] = rec[f"{m}_hi"] = np.nan
                    continue
                rec[m] = float(ok[m].mean())
                if len(ok) == 1 and {f"{m}_lo", f"{m}_hi"} <= set(ok.columns):
                    # one configuration: its own interval (Fleiss' studentized one), as in section 1
                    rec[f"{m}_lo"], rec[f"{m}_hi"] = (
                        float(ok[f"{m}_lo"].iloc[0]),
                        float(ok[f"{m}_hi"].iloc[0]),
                    )
                    continue
                reps = [distributions.get((cid, setting, m)) for cid in ok["config_id"]]
                reps = [r for r in reps if r is not None]
                if reps and len({len(r) for r in reps}) == 1:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        mean_rep = np.nanmean(np.vstack(reps), axis=0)
                    mean_rep = mean_rep[np.isfinite(mean_rep)]
                    rec[f"{m}_lo"], rec[f"{m}_hi"] = (
                        (float(np.percentile(mean_rep, lo_q)), float(np.percentile(mean_rep, hi_q)))
                        if mean_rep.size
                        else (np.nan, np.nan)
                    )
                else:
                    rec[f"{m}_lo"] = rec[f"{m}_hi"] = np.nan
            rec["overlap_minus_kappa"] = (
                rec["overlap"] - rec["mean_kappa"] if "mean_kappa" in measures else np.nan
            )
            rows.append(rec)
    return pd.DataFrame(rows)


def variant_agreement(grid: JudgmentGrid) -> pd.DataFrame:
    """Each variant's agreement with the other variants of its configuration (mean over pairs).

    One row per configuration x variant: ``kappa_with_others`` (mean Cohen's kappa with each other
    variant, pairs where kappa is undefined left out) and ``overlap_with_others``, on the complete
    items of the paraphrase matrix. Used by analyses 4 and 5.
    """
    out = []
    for conf in grid:
        order = conf.order
        v = conf.matrix("value").dropna()
        labels = sorted(conf.scale.scores)
        for a in order:
            kappas, overlaps = [], []
            for b in order:
                if a == b or len(v) < 2:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UndefinedMetricWarning)
                    kappas.append(cohen_kappa(v[a], v[b], labels=labels))
                    overlaps.append(overlap(v[a], v[b], labels=labels))
            k = np.array(kappas, dtype=float)
            out.append(
                {
                    "config_id": conf.config_id,
                    "prompt_group": conf.first["prompt_group"],
                    "backbone": conf.backbone,
                    "variant": a,
                    "n_items": len(v),
                    "kappa_with_others": float(np.nanmean(k)) if np.isfinite(k).any() else np.nan,
                    "overlap_with_others": float(np.mean(overlaps)) if overlaps else np.nan,
                }
            )
    return pd.DataFrame(out)
