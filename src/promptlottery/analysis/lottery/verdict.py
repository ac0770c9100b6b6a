"""The plain-words verdict that opens report.md: would a rewording of the prompt change the results?

Our own summary (not a number of the prompt-lottery paper), per configuration, on the paraphrase
setting (each variant once, at the main temperature), with ``label`` as the verdict:

* agreement across the paraphrases: the mean pairwise Cohen's kappa of analysis 1 and its bootstrap
  CI, placed against the ``usable`` (0.61) and ``robust`` (0.80) thresholds;
* ``changed``: the share of items (with >= 2 verdicts) on which at least two variants disagree;
* ``majority``: the *strict majority cluster* of the J variants: a label given by at least
  ceil((J + 1) / 2) of them (3 of 5, 2 of 3, 2 of 2); an item without one has *no consensus*. A
  missing verdict is no vote. This is not the tie-to-P1 plurality of analyses 7-8;
* ``majority_differs``: among items with a majority and a reference (P1) verdict, the share whose
  majority differs from P1's verdict;
* ``k_needed``: judges in the recorded order (P1 first), the smallest k from which the strict
  majority of the first k' variants (>= ceil((k' + 1) / 2) of k') equals the final one for every
  k' >= k; NaN (never) without a final majority. ``k_most`` = the median over items (never = inf);
* rank flips: the mean share of system pairs in opposite order between two variants (analysis 6).

What a written analysis shows first (the finding in plain words, the paper's rows; ``python -m
promptlottery.analysis.lottery.verdict DIR``) reads these numbers back from its tables:
:mod:`promptlottery.analysis.lottery.first_screen`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from promptlottery.analysis.common import report as rp
from promptlottery.analysis.lottery import table_names as lt
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics.aggregate import cluster_threshold, majority
from promptlottery.metrics.bootstrap import bootstrap_ci
from promptlottery.metrics.convergence import online_convergence
from promptlottery.tracking import tables

NO_CONSENSUS = "no consensus"


def item_table(grid: JudgmentGrid) -> pd.DataFrame:
    """One row per configuration x item, sorted within a configuration by how much its verdict varies;
    the item's texts (judgment columns ``input_<name>``, written for ``dataset=table``) follow its id.

    ``majority``: :func:`~promptlottery.metrics.aggregate.majority` of the J variants (``n_judges=J``);
    ``k_needed``: :func:`~promptlottery.metrics.convergence.online_convergence` with ``rule="majority"``.
    """
    reference = grid.reference
    out = []
    for conf in grid:
        cid, order, para = conf.config_id, conf.order, conf.paraphrases
        lab = conf.matrix("label")
        val = conf.matrix("value")
        labs = lab.to_numpy(dtype=object)
        majorities = majority(labs, n_judges=len(order))
        needed = online_convergence(labs, rule="majority")
        first = para.drop_duplicates("item_id").set_index("item_id")
        texts = [c for c in para.columns if c.startswith("input_")]  # dataset=table: the item's texts
        # per-item values as plain lists/arrays: row lookups in DataFrames cost more than the rest
        items = lab.index
        cols = {c: list(first[c].loc[items]) for c in [*texts, "system", "human"]}
        vals = val.loc[items].to_numpy(dtype=float)
        ref_col = lab.columns.get_loc(reference) if reference in lab.columns else None
        n_order = len(order)
        for i, item in enumerate(items):
            labels = labs[i].tolist()
            given = [x for x in labels if not pd.isna(x)]
            counts = Counter(given)
            maj = None if pd.isna(majorities[i]) else majorities[i]
            ref = labs[i, ref_col] if ref_col is not None else None
            v = vals[i]
            out.append(
                {
                    "config_id": cid,
                    "item_id": item,
                    **{c.removeprefix("input_"): cols[c][i] for c in texts},
                    "system": cols["system"][i],
                    "human": cols["human"][i],
                    "n_variants": n_order,
                    "n_verdicts": len(given),
                    "n_distinct": len(counts),
                    "modal_share": float(max(counts.values()) / n_order) if len(given) else np.nan,
                    "value_range": float(np.nanmax(v) - np.nanmin(v)) if np.isfinite(v).any() else np.nan,
                    "majority": NO_CONSENSUS if maj is None else maj,
                    "reference_label": None if pd.isna(ref) else ref,
                    "changed": bool(len(counts) > 1) if len(given) >= 2 else None,
                    "majority_differs": None if maj is None or pd.isna(ref) else bool(maj != ref),
                    "k_needed": float(needed[i]),
                    "labels": " ".join(f"{j}:{'-' if pd.isna(x) else x}" for j, x in zip(order, labels)),
                }
            )
    t = pd.DataFrame(out)
    if t.empty:
        return t
    t = t.sort_values(
        ["config_id", "modal_share", "n_distinct", "value_range", "item_id"],
        ascending=[True, True, False, False, True],
        kind="mergesort",
    )
    return t.reset_index(drop=True)


def _share(x: pd.Series, *, n_resamples: int, seed: int, level: float) -> tuple[float, float, float, int]:
    """Share of True among the defined values, with a percentile bootstrap CI over items."""
    x = x.dropna().astype(float).to_numpy()
    if x.size == 0:
        return np.nan, np.nan, np.nan, 0
    if x.size == 1:
        return float(x[0]), np.nan, np.nan, 1
    r = bootstrap_ci(np.mean, x, n_resamples=n_resamples, seed=seed, level=level, vectorized=False)
    return r.estimate, r.low, r.high, int(x.size)


def agreement_band(est: float, lo: float, hi: float, thresholds: dict) -> str:
    """``robust`` / ``usable`` when the whole CI clears the threshold, ``below usable`` when it lies
    under 0.61, else ``inconclusive`` (the CI straddles a threshold); ``n/a`` when undefined."""
    usable, robust = thresholds["usable"], thresholds["robust"]
    if not np.isfinite(est):
        return "n/a"
    lo = est if not np.isfinite(lo) else lo
    hi = est if not np.isfinite(hi) else hi
    if lo >= robust:
        return "robust"
    if lo >= usable:
        return "usable"
    if hi < usable:
        return "below usable"
    return "inconclusive"


def verdict_summary(items: pd.DataFrame, tables: dict[str, pd.DataFrame], opts) -> pd.DataFrame:
    """One row per configuration: the numbers of the plain-words verdict, and the sentence itself."""
    if items.empty:
        return pd.DataFrame()
    boot = opts.resampling
    col = tables.get(lt.AGREEMENT_COLLAPSE, pd.DataFrame())
    ranks = tables.get(lt.RANK_SUMMARY, pd.DataFrame())
    rows = []
    for cid, g in items.groupby("config_id", sort=True):
        rec: dict[str, Any] = {
            "config_id": cid,
            "n_items": len(g),
            "n_variants": int(g["n_variants"].iloc[0]),
        }
        para = col[(col["config_id"] == cid) & (col["setting"] == "paraphrases")] if not col.empty else col
        k = para.iloc[0] if len(para) else {}
        rec["kappa"], rec["kappa_lo"], rec["kappa_hi"] = (
            float(k.get(c, np.nan)) for c in ("mean_kappa", "mean_kappa_lo", "mean_kappa_hi")
        )
        rec["kappa_note"] = str(k.get("notes", "") or "") if len(para) else "no agreement row"
        # the paper's measure beside ours: Fleiss' kappa across the wordings, its interval as in section 1
        rec["fleiss"], rec["fleiss_lo"], rec["fleiss_hi"] = (
            float(k.get(c, np.nan))
            for c in ("fleiss_kappa_all", "fleiss_kappa_all_lo", "fleiss_kappa_all_hi")
        )
        rec["band"] = agreement_band(rec["kappa"], rec["kappa_lo"], rec["kappa_hi"], opts.thresholds)
        for name in ("changed", "majority_differs"):
            rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"], rec[f"{name}_n"] = _share(g[name], **boot)
        rec["no_consensus"] = float((g["majority"] == NO_CONSENSUS).mean())
        kn = g["k_needed"].fillna(np.inf).to_numpy(float)
        rec["k_most"] = float(np.median(kn))
        for k_ in (1, 3, 5):
            rec[f"settled_by_{k_}"] = float((kn <= k_).mean())
        r = ranks[ranks["config_id"] == cid] if "config_id" in ranks.columns else ranks.iloc[0:0]
        r = r.iloc[0] if len(r) else {}
        rec["n_systems"] = int(r.get("n_systems", 0) or 0) if len(r) else 0
        for c in ("flip_share", "flip_share_lo", "flip_share_hi", "rank_change_share"):
            rec[c] = float(r.get(c, np.nan)) if len(r) else np.nan
        rec["sentence"] = sentence(rec, opts)
        rows.append(rec)
    return pd.DataFrame(rows)


_LEAD = {
    "robust": "the verdicts do not depend on the wording",
    "usable": "usable, but the wording matters for some items",
    "inconclusive": "not established: agreement across the wordings is too uncertain to call",
    "below usable": "do not trust a single wording",
    "n/a": "cannot tell from agreement",
}


def sentence(rec: dict, opts) -> str:
    """The plain-words verdict of one configuration (numbers from :func:`verdict_summary`)."""
    th = opts.thresholds
    ref = opts.reference
    kappa = tables.ci(rec["kappa"], rec["kappa_lo"], rec["kappa_hi"])
    if rec["band"] == "n/a":
        agree = (
            f"mean pairwise Cohen's kappa across the {rec['n_variants']} variants is undefined "
            f"({rec['kappa_note'] or 'n/a'})"
        )
    else:
        rel = {
            "robust": f"above the {th['robust']:.2f} robust threshold",
            "usable": f"above the {th['usable']:.2f} usable threshold but not shown above {th['robust']:.2f}",
            "below usable": f"below the {th['usable']:.2f} usable threshold",
            "inconclusive": f"its CI straddles the {th['usable']:.2f} / {th['robust']:.2f} thresholds",
        }[rec["band"]]
        # ours: the mean pairwise Cohen's kappa (the report's headline beside the paper is Fleiss')
        agree = f"agreement across the {rec['n_variants']} variants is mean pairwise Cohen's kappa = {kappa}, {rel}"
    parts = [
        f"{rec['config_id']}: {_LEAD[rec['band']]}. {agree[0].upper()}{agree[1:]}",
        f"{tables.pct_ci(rec['changed'], rec['changed_lo'], rec['changed_hi'])} of {rec['n_items']} items get a "
        "different verdict from at least one paraphrase",
        f"the majority of the variants overrides the original prompt ({ref}) on "
        f"{tables.pct_ci(rec['majority_differs'], rec['majority_differs_lo'], rec['majority_differs_hi'])} "
        f"of the items with a majority ({rec['no_consensus']:.0%} have none)",
    ]
    if rec["n_systems"] >= 2 and np.isfinite(rec["flip_share"]):
        parts.append(
            f"between two variants {tables.pct_ci(rec['flip_share'], rec['flip_share_lo'], rec['flip_share_hi'])} of "
            f"system pairs swap order and {rec['rank_change_share']:.0%} of the {rec['n_systems']} systems change rank"
        )
    km = rec["k_most"]
    parts.append(
        f"most items need {int(km)} variant{'s' if km != 1 else ''} for a stable majority"
        if np.isfinite(km)
        else "most items never reach a stable majority"
    )
    return "; ".join(parts) + "."


#: the prompt-lottery paper's measure of agreement across wordings. §3.2: "Fixed-prompt repeated runs
#: established Cohen's κ = 0.86 and Fleiss' κ = 0.89, while the paper set κ = 0.80 as the human
#: robustness baseline and κ > 0.61 as the usability threshold"; §C.3: "Agreement falls from κ = 0.89
#: with a fixed prompt to κ = 0.24 across paraphrastic variants"
PAPER_MEASURE = (
    "The paper's measure, Fleiss' kappa across the wordings (§3.2, §C.3: 0.89 for a fixed prompt, 0.24 "
    "across paraphrases; >= 0.80 robust, > 0.61 usable)"
)


def render_verdict(R: rp.Report, summary: pd.DataFrame) -> None:
    """The opening section of report.md."""
    R.h("Verdict: would a rewording of the prompt change the results?")
    if summary.empty:
        R.p(rp.na_paragraph("no configuration with paraphrase verdicts"))
        return
    R.bullets(summary["sentence"].tolist())
    if "fleiss" in summary.columns and np.isfinite(pd.to_numeric(summary["fleiss"], errors="coerce")).any():
        R.p(f"{PAPER_MEASURE}:")
        R.bullets(
            [
                f"{r.config_id}: {tables.ci(r.fleiss, r.fleiss_lo, r.fleiss_hi)} across {int(r.n_variants)} wordings"
                for r in summary.itertuples()
                if np.isfinite(float(r.fleiss))
            ]
        )
    example = _majority_example(summary.get("n_variants", pd.Series(dtype=float)).dropna())
    R.p(
        f"Majority = a label given by >= ceil((J+1)/2) of the J variants ({example}); items without one "
        "have no consensus (a different definition from the tie-to-P1 plurality of sections 7-8). Verdict = the "
        "`label` column (see below); CIs: percentile bootstrap over items. Items by instability: "
        "`unstable_items.csv`."
    )


def _majority_example(n_variants) -> str:
    """The majority's votes on the report's own sweeps: ``3 of 5`` (the paper's plurality cluster) when
    every configuration has five wordings, else the strict majority of each number of wordings, largest
    first (``a strict majority: 2 of 3``). The pairwise rows of the verdict table carry no count (the
    pairwise section words its own rule): on a pairwise-only report the paper's ``3 of 5`` stands."""
    counts = sorted({int(j) for j in n_variants}, reverse=True) or [5]
    examples = ", ".join(f"{cluster_threshold(j)} of {j}" for j in counts)
    return examples if counts == [5] else f"a strict majority: {examples}"


if __name__ == "__main__":  # the CLI's home since it began: the first screen of a written analysis
    import sys

    from promptlottery.analysis.lottery.first_screen import main

    main(sys.argv[1:])
