"""Analyses 7-8: aggregating the variants' verdicts, and how fast the plurality settles.

7. The paper's plurality (Table 6, §5.2: a label given by at least 3 of the 5 judges; no verdict on a
   no-consensus item) on the items it decides, with its coverage; ours ``plurality_ties_to_p1`` (the
   modal label, ties broken by the P1 label, see :mod:`promptlottery.metrics.aggregate`), mean and
   median across the variants and the single prompt P1 on all items, each row naming its items and
   correlated with the human labels. Then inter-prompt (one backbone, k variants) vs inter-model (P1, k
   backbones) vs hybrid (variant i on backbone i) ensembles with the same k judges on the same
   items.
8. For each item, the paper's plurality cluster (a label given by at least 3 of 5 judges), the call
   at which it is reached online (variants in the recorded order, P1 first), and how often P1
   alone gives the cluster's label, binary vs non-binary scales.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.analysis.lottery.agreement_measures import estimate_with_ci
from promptlottery.analysis.lottery.human_correlation import correlate_with_human
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import human_vector, natural_key, variant_order
from promptlottery.metrics import (
    UndefinedMetricWarning,
    item_mean,
    kendall_tau,
    mean_pairwise_cohen_kappa,
    paired_bootstrap_test,
)
from promptlottery.metrics.aggregate import AGGREGATORS, mean_score, plurality_cluster
from promptlottery.metrics.convergence import cluster_match, convergence, online_convergence
from promptlottery.prompts.scales import get_scale

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions

TASK_KEYS = ("dataset", "judge_family", "prompt_group", "criterion", "rubric")


#: the populations of the aggregation table: every item with a human label, and the items the paper's
#: plurality decides (a label given by at least 3 of the 5 judges)
ALL_ITEMS, DECIDED_ITEMS = "all", "decided by plurality"
#: P1 on the items the paper's plurality decides: the reference of plurality's paired test
REFERENCE_ON_DECIDED = "{reference} on plurality's items"


def aggregation_vs_humans(grid: JudgmentGrid, opts: LotteryOptions) -> pd.DataFrame:
    """Analysis 7a (Table 6): each aggregate of the variants (and P1 alone) against the human labels.

    The paper (§5, Table 6): "Plurality aggregation consistently achieves the strongest human
    alignment among the compared strategies. The comparison uses Pearson correlation with human
    scores across three datasets with public annotations"; its plurality is the label "at least
    three of five" judges give (§5.2: "strict plurality is reached in 58.73% of cases"; §F.2), so it
    has no verdict on a no-consensus item. The summary does not say on which items Table 6 scores the
    other strategies; here each row names its population (``items``), so that no two methods
    coincide by construction:

    * ``items = "decided by plurality"``: ``plurality`` (the paper's) on the items it decides, with
      ``coverage`` = their share of the items with a human label (the paper's population for it), and
      ``P1 on plurality's items`` beside it (its paired reference). The tie-broken plurality and the
      median are not shown there: three equal votes of five fix both, so they equal ``plurality`` on
      those items by construction;
    * ``items = "all"``: every item with a human label, for ``P1`` alone, ``plurality_ties_to_p1``
      (ours: the modal label, ties broken toward P1), ``mean`` and ``median`` of the verdict scores
      (``verdict`` = the grid's verdict kind, ``argmax`` or ``weighted``) and ``mean_weighted`` (ours:
      the mean of the unrounded logprob-weighted scores, ``cont``).

    ``n``: the items a row is scored on (a method's missing verdicts left out, counted by
    ``n_covered`` / ``coverage``). Pearson and Kendall with CIs; for the aggregates the paired
    bootstrap test of their Kendall's tau minus P1's on the same items (``diff_vs_ref``,
    ``diff_vs_ref_lo`` / ``_hi``, ``significant``).
    """
    boot = opts.resampling
    reference = grid.reference
    on_decided = REFERENCE_ON_DECIDED.format(reference=reference)
    out = []
    for conf in grid:
        cid, order = conf.config_id, conf.order
        v = conf.matrix("value")
        h = conf.humans(v.index)
        first = conf.first
        ref = v[reference].to_numpy(float) if reference in v else np.full(len(v), np.nan)
        agg = {name: np.asarray(fn(v.to_numpy(float)), dtype=float) for name, fn in AGGREGATORS.items()}
        decided = np.isfinite(agg["plurality"])
        cont = np.asarray(mean_score(conf.matrix("cont").reindex(index=v.index, columns=v.columns)), float)
        # (method, population, verdict kind, scores, items it is scored on)
        rows = [
            ("plurality", DECIDED_ITEMS, grid.verdict, agg["plurality"], decided),
            (on_decided, DECIDED_ITEMS, grid.verdict, ref, decided),
            (reference, ALL_ITEMS, grid.verdict, ref, None),
            ("plurality_ties_to_p1", ALL_ITEMS, grid.verdict, agg["plurality_ties_to_p1"], None),
            ("mean", ALL_ITEMS, grid.verdict, agg["mean"], None),
            ("median", ALL_ITEMS, grid.verdict, agg["median"], None),
            ("mean_weighted", ALL_ITEMS, "weighted score (unrounded)", cont, None),
        ]
        humans = np.isfinite(h)
        for name, items, verdict, all_scores, within in rows:
            scores = all_scores if within is None else np.where(within, all_scores, np.nan)
            covered = np.isfinite(scores) & humans
            rec: dict[str, Any] = {
                "config_id": cid,
                "dataset": first["dataset"],
                "backbone": first["backbone"],
                "task_type": first["task_type"],
                "method": name,
                "items": items,
                "verdict": verdict,
                "n_judges": len(order),
                "n_covered": int(covered.sum()),
                "coverage": float(covered.sum() / humans.sum()) if humans.any() else np.nan,
            }
            res = correlate_with_human(scores, h, **boot)
            notes = res.pop("notes")
            rec.update(res)
            rec["diff_vs_ref"] = rec["diff_vs_ref_lo"] = rec["diff_vs_ref_hi"] = np.nan
            rec["significant"] = None
            if name not in (reference, on_decided):
                notes += _paired_vs_reference(rec, scores, ref, h, boot)
            rec["notes"] = "; ".join(notes)
            out.append(rec)
    return pd.DataFrame(out)


def _paired_vs_reference(
    rec: dict, scores: np.ndarray, ref: np.ndarray, h: np.ndarray, boot: dict
) -> list[str]:
    """Kendall's tau of ``scores`` minus the reference's, paired bootstrap on the items both cover."""
    keep = np.isfinite(scores) & np.isfinite(ref) & np.isfinite(h)
    if keep.sum() < 3:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            t = paired_bootstrap_test(kendall_tau, scores[keep], ref[keep], h[keep], **boot)
    except ValueError as exc:
        return [f"paired test: n/a: {exc}"]
    if np.isfinite(t.difference):
        rec.update(
            diff_vs_ref=t.difference,
            diff_vs_ref_lo=t.low,
            diff_vs_ref_hi=t.high,
            significant=bool(t.significant),
        )
    return []


def _task_ids(df: pd.DataFrame) -> pd.Series:
    """Each row's task: its non-empty TASK_KEYS joined by '/'."""
    cols = [df[k].astype(str) for k in TASK_KEYS]
    return pd.Series(["/".join(p for p in row if p) for row in zip(*cols)], index=df.index, dtype=object)


def ensemble_designs(grid: JudgmentGrid, opts: LotteryOptions) -> pd.DataFrame:
    """Analysis 7b: inter-prompt vs inter-model vs hybrid ensembles at equal numbers of judgments.

    Per task (dataset x family x prompt group x criterion), with ``V`` variants and ``B`` backbones:
    ``k = min(V, B, max_judges)`` judges per item (the paper uses 5). Below 3 judges the plurality of
    a design is its first judge, so the task is reported as "n/a: needs >= 3 backbones" (or variants). Designs: ``inter-prompt`` = the first k variants (P1 first) on one backbone (one row
    per backbone); ``inter-model`` = P1 on the first k backbones (sorted); ``hybrid`` = variant i on
    backbone i. Every design uses the items judged by all of them. Reported: the judges, agreement
    among them (mean pairwise Cohen's kappa) and the plurality's and mean's correlation with the
    humans, with CIs.
    """
    reference, max_judges = grid.reference, opts.max_ensemble_judges
    out = []
    work = grid.paraphrases
    for task, rows in sorted(work.groupby(_task_ids(work)), key=lambda t: natural_key(t[0])):
        variants = variant_order(rows["variant"], reference)
        backbones = sorted(rows["backbone"].unique(), key=natural_key)
        k = min(len(variants), len(backbones), max_judges)
        base = {"task": task, "n_variants": len(variants), "n_backbones": len(backbones), "k": k}
        if k < 3:
            out.append(_too_few_judges(base, variants, backbones))
            continue
        designs = _designs(variants, backbones, k, reference)
        pivot = rows.assign(judge=rows["variant"] + "@" + rows["backbone"]).pivot(
            index="item_id", columns="judge", values="value"
        )
        needed = sorted({f"{v}@{b}" for _, js in designs for v, b in js})
        complete = pivot.reindex(columns=needed).dropna()
        items = sorted(complete.index, key=natural_key)
        h = human_vector(rows, items)
        scale = get_scale(rows["scale"].iloc[0])
        for name, judges in designs:
            m = complete.loc[items, [f"{v}@{b}" for v, b in judges]].to_numpy(float)
            rec = {
                **base,
                "design": name,
                "judges": " ".join(f"{v}@{b}" for v, b in judges),
                "n_items": len(items),
            }
            out.append(_design_row(rec, m, h, scale, opts))
    return pd.DataFrame(out)


def _too_few_judges(base: dict, variants: list, backbones: list) -> dict:
    """A plurality of two judges is just the first judge: the designs are not comparable."""
    need = "backbones" if len(backbones) < 3 else "variants"
    return {
        **base,
        "design": "all",
        "judges": "",
        "note": f"n/a: needs >= 3 {need} (have {len(variants)} variant{'s' if len(variants) != 1 else ''}, "
        f"{len(backbones)} backbone{'s' if len(backbones) != 1 else ''})",
    }


def _designs(
    variants: list, backbones: list, k: int, reference: str
) -> list[tuple[str, list[tuple[str, str]]]]:
    """The designs of :func:`ensemble_designs` as ``(name, [(variant, backbone), ...])``."""
    designs: list[tuple[str, list[tuple[str, str]]]] = [
        (f"inter-prompt ({b})", [(v, b) for v in variants[:k]]) for b in backbones
    ]
    designs.append(
        ("inter-model", [(reference if reference in variants else variants[0], b) for b in backbones[:k]])
    )
    designs.append(("hybrid", [(variants[i], backbones[i]) for i in range(k)]))
    return designs


def _design_row(rec: dict[str, Any], m: np.ndarray, h: np.ndarray, scale, opts: LotteryOptions) -> dict:
    """``rec`` with one design's agreement among its judges (the item x judge matrix ``m``) and its
    plurality's and mean's correlation with the humans ``h``."""
    boot, k, max_judges = opts.resampling, rec["k"], opts.max_ensemble_judges
    notes = []
    e = estimate_with_ci(partial(mean_pairwise_cohen_kappa, labels=sorted(scale.scores)), m, **boot)
    rec["mean_kappa"], rec["mean_kappa_lo"], rec["mean_kappa_hi"] = e.estimate, e.low, e.high
    if e.note:
        notes.append(f"mean_kappa: {e.note}")
    # ours: the tie-broken plurality (every item has one), so each design keeps all its items
    for agg in ("plurality_ties_to_p1", "mean"):
        res = correlate_with_human(AGGREGATORS[agg](m).astype(float), h, **boot, prefix=f"{agg}_")
        notes += res.pop(f"{agg}_notes")
        res.pop(f"{agg}_n")
        rec.update(res)
    rec["note"] = "; ".join(notes)
    if k < max_judges:
        rec["note"] = (rec["note"] + "; " if rec["note"] else "") + f"k = {k} < {max_judges} judges"
    return rec


def convergence_analysis(grid: JudgmentGrid, opts: LotteryOptions) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Analysis 8, with the paper's plurality cluster. Returns ``(summary, items)``.

    The judges are the variants in the recorded order (``judge_order``: P1 first, then natural
    order). ``items``: per configuration and item, the tie-broken ``plurality`` (ours, ties to P1),
    the paper's ``cluster`` (the label given by at least ``ceil((J + 1) / 2)`` of the J judges, "at
    least three of five"; NaN = no consensus, :func:`~promptlottery.metrics.aggregate.plurality_cluster`),
    P1's label (``first_judge``), and ``converged_at``: the earliest call k at which some label has
    the cluster's votes among the first k judges, a stop made online without seeing the later ones
    (:func:`~promptlottery.metrics.convergence.online_convergence`).

    ``summary``: per configuration and pooled over binary / non-binary / all configurations, with
    bootstrap CIs over items: ``cluster_share``; the paper's incremental ``converged_by_3`` (by the
    third call), ``converged_by_5`` (after the third, by the fifth) and ``never_converged`` (more
    than five calls, or never: the three sum to 1); ``p1_match`` (the paper's "P1 matches the
    plurality": P1's label is the cluster's; no cluster = no match); ``p1_match_ties_to_p1`` (ours:
    P1 equals the plurality with ties broken toward P1, so every tie is a match) and
    ``p1_match_unique`` (ours: the same on items with an untied plurality only).
    """
    items = _convergence_items(grid)
    if items.empty:
        return pd.DataFrame(), items
    groups: list[tuple[str, pd.DataFrame]] = [(cid, g) for cid, g in items.groupby("config_id", sort=True)]
    groups += [
        ("pooled: binary", items[items["binary"]]),
        ("pooled: non-binary", items[~items["binary"]]),
        ("pooled: all", items),
    ]
    summary = [_convergence_row(name, g[g["n_judges"] > 0], opts.resampling) for name, g in groups]
    return pd.DataFrame(summary), items


def _convergence_items(grid: JudgmentGrid) -> pd.DataFrame:
    """The ``items`` table of :func:`convergence_analysis`: one row per configuration and item."""
    per_item = []
    for conf in grid:
        v = conf.matrix("label")
        m = v.to_numpy(dtype=object)
        conv = convergence(m)
        conv["cluster"] = plurality_cluster(m)
        conv["converged_at"] = online_convergence(m)
        conv["p1_in_cluster"] = cluster_match(conv["first_judge"], conv["cluster"])
        conv.insert(0, "item_id", v.index.to_numpy())
        conv.insert(0, "judge_order", ",".join(conf.order))
        conv.insert(0, "binary", conf.binary)
        conv.insert(0, "backbone", conf.backbone)
        conv.insert(0, "config_id", conf.config_id)
        per_item.append(conv)
    return pd.concat(per_item, ignore_index=True) if per_item else pd.DataFrame()


def _convergence_row(name: str, g: pd.DataFrame, boot: dict) -> dict[str, Any]:
    """The summary row of one group of items (those with at least one judge)."""
    j = int(g["n_judges"].max()) if len(g) else 0
    rec: dict[str, Any] = {
        "group": name,
        "n_items": len(g),
        "n_judges": j or None,
        "judge_order": ",".join(sorted(set(g["judge_order"]))) if len(g) else "",
    }
    if not len(g):
        rec["note"] = "n/a: no items in this group"
        return rec
    at = g["converged_at"].to_numpy(float)
    tied_match = np.array(
        [(not pd.isna(a)) and a == b for a, b in zip(g["first_judge"], g["plurality"])], dtype=float
    )
    uniq = g["unique"].to_numpy(bool)
    indicators = {
        "cluster_share": g["cluster"].notna().to_numpy(float),
        "converged_by_3": (at <= 3).astype(float) if j >= 3 else None,
        "converged_by_5": ((at > 3) & (at <= 5)).astype(float) if j >= 5 else None,
        "never_converged": (np.isnan(at) | (at > 5)).astype(float),
        "p1_match": g["p1_in_cluster"].to_numpy(float),
        "p1_match_ties_to_p1": tied_match,
        "p1_match_unique": tied_match[uniq] if uniq.any() else None,
    }
    notes = []
    for key, ind in indicators.items():
        if ind is None or len(ind) < 2:
            rec[key] = rec[f"{key}_lo"] = rec[f"{key}_hi"] = np.nan
            why = f"fewer than {key[-1]} judges" if key.startswith("converged_by_") else "fewer than 2 items"
            notes.append(f"{key}: n/a: {why}")
            continue
        e = estimate_with_ci(item_mean, ind, **boot)
        rec[key], rec[f"{key}_lo"], rec[f"{key}_hi"] = e.estimate, e.low, e.high
    rec["mean_converged_at"] = float(np.nanmean(at)) if np.isfinite(at).any() else np.nan
    rec["note"] = "; ".join(notes)
    return rec
