"""The pairwise judge card's corrected Bradley-Terry ranking (:mod:`promptlottery.analysis.card.build`).

Per wording: the systems' Bradley-Terry strengths fitted to the judge's preferences on every pair
(judge-only), PPI++-corrected by a human-labelled slice of the pairs
(:func:`~promptlottery.metrics.bradley_terry_ppi.ppi_bradley_terry`), and fitted to the humans'
majority on every pair (all-human). A preference is the share for response 1 (a tie 1/2): the judge's
two orders averaged, the humans' majority label. The rank changes are the share of system pairs
ordered oppositely by two wordings' strengths (judge-only, then corrected: the mean over random
slices, the same slice for every wording) and by a wording and the all-human fit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from promptlottery.analysis.card.corrected import discordant_share
from promptlottery.analysis.card.pairwise.sections import pref_value
from promptlottery.metrics.bradley_terry_ppi import bt_design, bt_fit, ppi_bradley_terry

SOURCE = (
    "Bradley-Terry as a logistic regression on e_first - e_second (soft labels, ties 1/2); PPI++ for GLMs "
    "(Angelopoulos, Duchi & Zrnic 2023, PPI++ logistic regression; ppi_py's ppi_logistic_pointestimate / "
    "ppi_logistic_ci) with the power-tuned lambda"
)


def _pairs(para: pd.DataFrame, wordings: list[str]) -> tuple[pd.DataFrame, dict] | str:
    """One row per pair (systems and the human preference) and each wording's order-averaged preference."""
    if not {"system_1", "system_2"} <= set(para.columns):
        return "the pairs carry no system identities (system_1 / system_2)"
    first = para.drop_duplicates("item_id").set_index("item_id")
    y = first["human_preferred"].map(pref_value)
    f_by_w = {}
    for w in wordings:
        rows = para[para["variant"] == w].assign(p=lambda d: d["preferred"].map(pref_value))
        f_by_w[w] = rows.groupby("item_id")["p"].mean().reindex(y.index)
    keep = y.notna() & first["system_1"].notna() & first["system_2"].notna()
    keep &= pd.concat(f_by_w.values(), axis=1).notna().all(axis=1)
    first = first[keep].assign(y=y[keep])
    return first, {w: f[keep].to_numpy(float) for w, f in f_by_w.items()}


def _safe(fn, d: int) -> np.ndarray:
    """A fit, or NaN strengths where it has no finite solution (a system that wins or loses every pair)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = np.asarray(fn(), dtype=float)
    except (np.linalg.LinAlgError, ValueError):
        return np.full(d, np.nan)
    return out if np.isfinite(out).all() and np.abs(out).max() < 30 else np.full(d, np.nan)


def _mean_discordant(est: dict, human: pd.Series) -> tuple[float, float]:
    """Mean discordance between every two wordings' strengths and between each and the humans'; NaN
    where any fit has no finite solution (never read as agreement)."""
    if any(v.isna().any() for v in est.values()) or human.isna().any():
        return float("nan"), float("nan")
    ws = list(est)
    between = [discordant_share(est[a], est[b]) for i, a in enumerate(ws) for b in ws[i + 1 :]]
    vs_humans = float(np.mean([discordant_share(est[w], human) for w in ws]))
    return (float(np.mean(between)) if between else float("nan")), vs_humans


def _slice(rng, n_pairs: int, n_lab: int) -> np.ndarray:
    lab = np.zeros(n_pairs, bool)
    lab[rng.choice(n_pairs, n_lab, replace=False)] = True
    return lab


def _per_system(names, raw, human, fits) -> dict:
    return {
        w: {
            s: {
                "judge_only": float(raw[w][s]),
                "ppi": est[j],
                "ci": [low[j], high[j]],
                "human": float(human[s]),
            }
            for j, s in enumerate(names)
        }
        for w, (est, low, high) in fits.items()
    }


def bradley_terry_section(para: pd.DataFrame, wordings: list[str], opts) -> dict:
    got = _pairs(para, wordings)
    if isinstance(got, str):
        return {"missing": got}
    first, f_by_w = got
    x, names = bt_design(first["system_1"], first["system_2"])
    n_pairs, d = len(first), len(names)
    n_lab = int(round(opts.bt_share * n_pairs))
    if n_lab < d or n_pairs - n_lab < d:
        return {
            "missing": f"{n_pairs} pairs: too few for a labelled slice and a judge-only rest of >= {d} each"
        }
    y = first["y"].to_numpy(float)
    human = pd.Series(np.r_[0.0, _safe(lambda: bt_fit(x, y), d - 1)], index=names)
    raw = {
        w: pd.Series(np.r_[0.0, _safe(lambda f=f: bt_fit(x, f), d - 1)], index=names)
        for w, f in f_by_w.items()
    }
    sl1, sl2 = first["system_1"].to_numpy(object), first["system_2"].to_numpy(object)

    def ppi(f, lab) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def fit():
            r = ppi_bradley_terry(sl1, sl2, y, f, lab, systems=names, level=opts.ppi_level)
            return np.r_[r.strength, r.low, r.high]

        v = _safe(fit, 3 * d)
        return v[:d], v[d : 2 * d], v[2 * d :]

    rng = np.random.default_rng(opts.seed)
    draws, shown = [], None
    for _ in range(min(opts.n_draws, 50)):
        lab = _slice(rng, n_pairs, n_lab)
        fits = {w: ppi(f, lab) for w, f in f_by_w.items()}
        draws.append(_mean_discordant({w: pd.Series(v[0], index=names) for w, v in fits.items()}, human))
        if shown is None and np.isfinite(draws[-1][1]):
            shown = (len(draws), fits)
    if shown is None:
        return {
            "missing": f"no finite PPI++ fit on any of {len(draws)} slices of {n_lab} labelled pairs (separation)"
        }
    before = _mean_discordant(raw, human)
    ok = [dr for dr in draws if np.isfinite(dr[1])]
    return {
        "per_wording": _per_system(names, raw, human, shown[1]),
        "reference": names[0],
        "n_pairs": n_pairs,
        "n_labelled": n_lab,
        "level": opts.ppi_level,
        "shown_slice": shown[0],
        "draws": len(draws),
        "defined_draws": len(ok),
        "between_wordings_before": before[0],
        "between_wordings_after": float(np.mean([dr[0] for dr in ok])),
        "vs_humans_before": before[1],
        "vs_humans_after": float(np.mean([dr[1] for dr in ok])),
        "estimator": "PPI++ logistic (ppi_py's), strengths 0 for the reference",
        "source": SOURCE,
    }
