"""Analyses 1-2: agreement among the five paraphrases vs a fixed prompt, by task type and backbone.

Every agreement number comes from :mod:`promptlottery.metrics` with a percentile bootstrap CI over
items (:func:`promptlottery.metrics.bootstrap_ci`, the same resampled items for every measure of a
matrix). Items need a verdict from every judge of the matrix (listwise deletion; ``n_items``
counts the complete ones). Where the verdicts collapse onto one label the chance-corrected
measures are not computed: the table says why, with the label distribution.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.analysis.labels import collapse_reason, format_distribution, label_distribution
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics import (
    UndefinedMetricWarning,
    bootstrap_ci,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    mean_pairwise_cohen_kappa,
    mean_pairwise_overlap,
    overlap,
)

if TYPE_CHECKING:
    from promptlottery.analysis.options import LotteryOptions

#: measures on the label matrix, each declared once: ``chance`` marks the chance-corrected ones
#: (skipped on collapse), ``fn`` / ``kwargs`` the metric (given the scale's labels unless ``labels``
#: is False), ``column`` its report header (None: not in the report)
AGREEMENT_MEASURES = {
    "overlap": {
        "chance": False,
        "label": "overlap (mean pairwise)",
        "fn": mean_pairwise_overlap,
        "column": "overlap",
    },
    "mean_kappa": {
        "chance": True,
        "label": "mean pairwise Cohen's kappa",
        "fn": mean_pairwise_cohen_kappa,
        "column": "mean kappa",
    },
    "fleiss_kappa": {"chance": True, "label": "Fleiss' kappa", "fn": fleiss_kappa, "column": "Fleiss kappa"},
    "alpha_nominal": {
        "chance": True,
        "label": "Krippendorff's alpha (nominal)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "nominal"},
        "column": "alpha (nominal)",
    },
    "alpha_interval": {
        "chance": True,
        "label": "Krippendorff's alpha (interval, verdict scores)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "interval"},
        "column": "alpha (interval)",
    },
    "alpha_interval_cont": {
        "chance": False,
        "label": "Krippendorff's alpha (interval, unrounded weighted score)",
        "fn": krippendorff_alpha,
        "kwargs": {"level": "interval"},
        "labels": False,
        "column": "alpha (interval, weighted)",
    },
    # the paper's kappa means (§3.2, §4.1) average every configuration where kappa is defined; the
    # collapse filter above (>= collapse_share of the verdicts one label) is ours, so the unfiltered
    # measures are kept beside the filtered ones (undefined only where every verdict is one label)
    "fleiss_kappa_all": {
        "chance": False,
        "label": "Fleiss' kappa, no collapse filter (the paper's mean)",
        "fn": fleiss_kappa,
        "column": "Fleiss kappa (no collapse filter)",
    },
    "mean_kappa_all": {
        "chance": False,
        "label": "mean pairwise Cohen's kappa, no collapse filter",
        "fn": mean_pairwise_cohen_kappa,
        "column": None,
    },
}
CONT_DECIMALS = 2  # continuous scores are rounded to 0.01 before interval alpha (bounds its value domain)


def _measure(name: str, labels: list[float]):
    spec = AGREEMENT_MEASURES[name]
    return partial(
        spec["fn"], **spec.get("kwargs", {}), **({"labels": labels} if spec.get("labels", True) else {})
    )


def measure_columns(names: Iterable[str]) -> dict[str, str]:
    """``{measure: report header}`` of ``names`` (measures of :data:`AGREEMENT_MEASURES`), in that order."""
    return {m: AGREEMENT_MEASURES[m]["column"] for m in names}


@dataclass
class Estimate:
    estimate: float
    low: float
    high: float
    note: str | None
    distribution: np.ndarray | None


def _nan_estimate(note: str) -> Estimate:
    return Estimate(np.nan, np.nan, np.nan, note, None)


def estimate_with_ci(stat, *arrays, n_resamples: int, seed: int, level: float) -> Estimate:
    """``bootstrap_ci`` with the reason recorded when the statistic is undefined."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UndefinedMetricWarning)
        try:
            est = float(stat(*arrays))
        except ValueError as exc:
            return _nan_estimate(f"n/a: {exc}")
    if not np.isfinite(est):
        why = str(caught[0].message) if caught else "undefined"
        return _nan_estimate(f"n/a: {why}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        res = bootstrap_ci(stat, *arrays, n_resamples=n_resamples, level=level, seed=seed)
    note = None
    if res.n_undefined:
        note = f"undefined on {res.n_undefined} of {res.n_resamples} resamples (left out of the CI)"
    return Estimate(est, res.low, res.high, note, res.distribution)


def agreement_measures(
    values: np.ndarray,
    scale_scores: list[float],
    cont: np.ndarray | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    collapse_share: float = 0.95,
    scale_labels: list[str] | None = None,
    kappa_interval: str = "studentized",
) -> dict[str, Estimate]:
    """Every measure of :data:`AGREEMENT_MEASURES` on one complete items x judges matrix.

    ``values`` holds the verdicts' scale scores, ``cont`` the continuous scores (same shape);
    ``scale_labels`` (parallel to ``scale_scores``) names the labels in the collapse notes. Every
    interval is the percentile bootstrap over items but Fleiss' kappa's with ``kappa_interval=
    "studentized"`` (bootstrap-t on the same resamples; its replicates stay the distribution).
    """
    values = np.asarray(values, dtype=float)
    out: dict[str, Estimate] = {}
    if values.shape[0] < 2 or values.shape[1] < 2:
        why = f"n/a: need >= 2 complete items and >= 2 judges, have {values.shape[0]} x {values.shape[1]}"
        return {m: _nan_estimate(why) for m in AGREEMENT_MEASURES}
    names = dict(zip((float(x) for x in scale_scores), scale_labels)) if scale_labels else {}
    collapsed = collapse_reason([names.get(v, v) for v in values.ravel()], collapse_share)
    labels = sorted(float(s) for s in scale_scores)
    for name, spec in AGREEMENT_MEASURES.items():
        if spec["chance"] and collapsed:
            out[name] = _nan_estimate(f"n/a: {collapsed}")
            continue
        if name == "alpha_interval_cont":
            if cont is None:
                out[name] = _nan_estimate("n/a: no continuous scores")
                continue
            arr = np.round(np.asarray(cont, dtype=float), CONT_DECIMALS)
        else:
            arr = values
        out[name] = estimate_with_ci(
            _measure(name, labels), arr, n_resamples=n_resamples, seed=seed, level=level
        )
        if name in FLEISS and np.isfinite(out[name].estimate):
            out[name] = _fleiss_interval(out[name], values, labels, n_resamples, seed, level, kappa_interval)
    return out


#: the Fleiss' kappa columns whose interval ``kappa_interval`` picks
FLEISS = ("fleiss_kappa", "fleiss_kappa_all")


def _fleiss_interval(est: Estimate, values, labels, n_resamples, seed, level, kind) -> Estimate:
    from promptlottery.metrics.kappa_interval import fleiss_interval

    codes = np.searchsorted(np.asarray(labels, dtype=float), np.asarray(values, dtype=float))
    low, high, notes = fleiss_interval(
        codes,
        len(labels),
        kind,
        percentile=(est.low, est.high),
        n_resamples=n_resamples,
        seed=seed,
        level=level,
    )
    note = "; ".join([est.note, *notes] if est.note else notes) or None
    return Estimate(est.estimate, low, high, note, est.distribution)


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
    reference = grid.reference
    th = opts.thresholds  # the defaults merged in (LotteryOptions)
    rows_out, dists = [], {}
    for conf in grid:
        cid, scale, para = conf.config_id, conf.scale, conf.paraphrases
        order = conf.order
        settings = [
            (
                "paraphrases",
                para,
                conf.matrix("value"),
                conf.matrix("cont"),
                ",".join(map(str, order)),
                para["temperature"].min(),
                "none",
            )
        ]
        for f in conf.fixed:
            samples = sorted(f.rows["sample_index"].unique())
            judges = f"{reference} x{len(samples)} samples"
            v, c = conf.fixed_matrix(f, "value"), conf.fixed_matrix(f, "cont")
            settings.append((f.name, f.rows, v, c, judges, f.temperature, f.repeat_source))
        for setting, g, v, c, judges, temp, source in settings:
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
            rows_out.append(rec)
    table = pd.DataFrame(rows_out)
    if len(table):
        table = sort_collapse(table)
    return (table, dists) if return_distributions else table


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
