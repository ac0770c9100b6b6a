"""Analysis 3: no prompt wins -- each variant's correlation with the human labels.

Per configuration and variant: Pearson and Kendall's tau-b between the verdict scores and the
human labels (and the same on the unrounded weighted score), each with a bootstrap CI over items;
Williams' test of each variant's Pearson correlation against the reference variant's (P1) on the
same items; and how often each variant is the best of its configuration.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.analysis.lottery.agreement_measures import estimate_with_ci
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.metrics import UndefinedMetricWarning, dependent_correlation_test, kendall_tau, pearson
from promptlottery.registry import Registry

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions

#: the correlations with the humans, each with its CI
CORRELATIONS: Registry[Callable[[np.ndarray, np.ndarray], float]] = Registry("correlation")
CORRELATIONS.register("pearson", pearson)
CORRELATIONS.register("kendall", kendall_tau)


def correlate_with_human(
    scores: np.ndarray, human: np.ndarray, *, n_resamples: int, seed: int, level: float, prefix: str = ""
) -> dict[str, Any]:
    """Pearson and Kendall's tau (with CIs) of ``scores`` against ``human`` on their complete pairs."""
    scores, human = np.asarray(scores, dtype=float), np.asarray(human, dtype=float)
    keep = np.isfinite(scores) & np.isfinite(human)
    rec: dict[str, Any] = {f"{prefix}n": int(keep.sum())}
    notes = []
    for name, fn in CORRELATIONS.items():
        if keep.sum() < 3:
            e_est = e_lo = e_hi = np.nan
            note = f"n/a: {int(keep.sum())} items with both a verdict and a human label (need >= 3)"
        else:
            e = estimate_with_ci(
                fn, scores[keep], human[keep], n_resamples=n_resamples, seed=seed, level=level
            )
            e_est, e_lo, e_hi, note = e.estimate, e.low, e.high, e.note
        rec[f"{prefix}{name}"], rec[f"{prefix}{name}_lo"], rec[f"{prefix}{name}_hi"] = e_est, e_lo, e_hi
        if note:
            notes.append(f"{prefix}{name}: {note}")
    rec[f"{prefix}notes"] = notes
    return rec


def variant_human_correlation(grid: JudgmentGrid, opts: LotteryOptions) -> pd.DataFrame:
    """Analysis 3 (per variant): correlation with humans, CIs, and Williams' test against P1.

    Columns: configuration, ``variant``, ``n``, ``pearson`` / ``kendall`` (verdict scores) and
    ``cont_pearson`` / ``cont_kendall`` (unrounded weighted scores), each with ``_lo`` / ``_hi``;
    ``williams_t`` / ``williams_p`` (H0: the variant and P1 correlate equally with the humans;
    Pearson on verdict scores; empty for P1 itself) and ``notes``.
    """
    boot = opts.resampling
    reference = grid.reference
    out = []
    for conf in grid:
        cid, order = conf.config_id, conf.order
        v = conf.matrix("value")
        c = conf.matrix("cont")
        h = conf.humans(v.index)
        first = conf.first
        for var in order:
            rec: dict[str, Any] = {
                "config_id": cid,
                "dataset": first["dataset"],
                "backbone": first["backbone"],
                "task_type": first["task_type"],
                "family_type": first["family_type"],
                "variant": var,
            }
            a = correlate_with_human(v[var].to_numpy(), h, **boot)
            b = correlate_with_human(c[var].to_numpy(), h, **boot, prefix="cont_")
            notes = a.pop("notes") + b.pop("cont_notes")
            rec.update(a)
            rec.update({k: val for k, val in b.items() if k != "cont_n"})
            rec["williams_t"] = rec["williams_p"] = np.nan
            if var != reference and reference in v.columns:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UndefinedMetricWarning)
                    try:
                        res = dependent_correlation_test(h, v[var].to_numpy(), v[reference].to_numpy())
                        rec["williams_t"], rec["williams_p"] = res.statistic, res.pvalue
                    except (ValueError, ArithmeticError) as exc:
                        # e.g. a variant identical to P1 (r_ab = 1): the test statistic is undefined
                        notes.append(f"williams: n/a: undefined ({type(exc).__name__}: {exc})")
                if not np.isfinite(rec["williams_p"]) and caught:
                    notes.append(f"williams: n/a: {caught[0].message}")
            rec["notes"] = "; ".join(notes)
            out.append(rec)
    return pd.DataFrame(out)


def best_variant_counts(
    corr: pd.DataFrame, *, by: str = "kendall", reference: str = "P1", alpha: float = 0.05
) -> pd.DataFrame:
    """Analysis 3 (summary): per variant, in how many configurations it is the best.

    ``best`` counts configurations where the variant has the highest ``by`` correlation (ties
    count for every tied variant; configurations where no variant's correlation is defined are
    left out, see ``n_configs``). ``better_than_ref`` / ``worse_than_ref`` count significant
    Williams tests (p < ``alpha``) against the reference.
    """
    if corr.empty:
        return pd.DataFrame(
            columns=["variant", "n_configs", "best", "best_share", "better_than_ref", "worse_than_ref"]
        )
    variants = list(dict.fromkeys(corr["variant"]))
    best = dict.fromkeys(variants, 0)
    n_cfg = 0
    for _, g in corr.groupby("config_id", sort=True):
        vals = g[by].astype(float)
        if not np.isfinite(vals).any():
            continue
        n_cfg += 1
        top = np.nanmax(vals.to_numpy())
        for var in g.loc[np.isclose(vals, top, rtol=0, atol=1e-12), "variant"]:
            best[var] += 1
    rows = []
    for var in variants:
        g = corr[corr["variant"] == var]
        sig = g["williams_p"].astype(float) < alpha
        r_var, r_ref = g["pearson"].astype(float).to_numpy(), _ref_pearson(corr, g, reference)
        rows.append(
            {
                "variant": var,
                "n_configs": n_cfg,
                "best": best[var],
                "best_share": best[var] / n_cfg if n_cfg else np.nan,
                "better_than_ref": int((sig & (r_var > r_ref)).sum()) if var != reference else None,
                "worse_than_ref": int((sig & (r_var < r_ref)).sum()) if var != reference else None,
            }
        )
    out = pd.DataFrame(rows)
    for c in ("better_than_ref", "worse_than_ref"):  # None (not NaN) for the reference itself
        out[c] = pd.Series([r[c] for r in rows], dtype=object)
    return out


def _ref_pearson(corr: pd.DataFrame, g: pd.DataFrame, reference: str) -> np.ndarray:
    ref = corr[corr["variant"] == reference].set_index("config_id")["pearson"].astype(float)
    return g["config_id"].map(ref).to_numpy(dtype=float)
