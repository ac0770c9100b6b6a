"""The judge card's human-corrected estimate (:mod:`promptlottery.analysis.card.build`): PPI++ means from a
human-labelled slice, their coverage of the all-human mean over many slices beside the human-only and
judge-only intervals, per-system estimates, the system ranking's changes between wordings before and
after correction, and the Rogan-Gladen share for binary verdicts."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd

from promptlottery.analysis.card.sections import SOURCES, rater_matrix
from promptlottery.metrics.human_corrected import human_only_mean, judge_only_mean, ppi_mean, rogan_gladen


def _covers(r, truth) -> float:
    return float(r.low <= truth <= r.high)


def coverage(y: np.ndarray, f: np.ndarray, n: int, *, n_draws: int, level: float, seed: int) -> dict:
    """Coverage of the all-human mean ``y.mean()`` by PPI++, human-only and judge-only intervals over
    ``n_draws`` random labelled slices of ``n`` items (the rest judge-only)."""
    truth = float(y.mean())
    rng = np.random.default_rng(seed)
    judge = judge_only_mean(f, level=level)
    cov = {"ppi": [], "human": []}
    width = {"ppi": [], "human": []}
    for _ in range(n_draws):
        idx = rng.permutation(y.size)
        lab, unl = idx[:n], idx[n:]
        p = ppi_mean(y[lab], f[lab], f[unl], level=level)
        h = human_only_mean(y[lab], level=level)
        for k, r in (("ppi", p), ("human", h)):
            cov[k].append(_covers(r, truth))
            width[k].append(r.high - r.low)
    return {
        "n": n,
        "N": int(y.size),
        "truth": truth,
        "ppi_coverage": float(np.mean(cov["ppi"])),
        "ppi_width": float(np.mean(width["ppi"])),
        "human_coverage": float(np.mean(cov["human"])),
        "human_width": float(np.mean(width["human"])),
        "judge_covers": _covers(judge, truth),
        "judge_width": judge.high - judge.low,
        "judge_mean": judge.estimate,
        "draws": n_draws,
    }


def labelled_slice(systems: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray | dict:
    """A random human-labelled slice, ``share`` of each system's items (at least 2, leaving at least 2
    judge-only): a boolean mask, or ``{"missing": why}`` where a system has too few items."""
    labelled = np.zeros(len(systems), bool)
    for s in pd.unique(systems):
        idx = np.flatnonzero(systems == s)
        k = max(2, int(round(share * idx.size)))
        if idx.size - k < 2:
            return {
                "missing": f"system {s} has too few items ({idx.size}) for a labelled slice and a judge-only rest"
            }
        labelled[rng.choice(idx, k, replace=False)] = True
    return labelled


def slice_sizes(n_items: int, slices) -> list[int]:
    """Slices of at most half the items (the rest judge-only); with fewer: a quarter and a half."""
    return [n for n in slices if n <= n_items // 2] or sorted({max(5, n_items // 4), n_items // 2})


def discordant_share(a: pd.Series, b: pd.Series) -> float:
    pairs = list(combinations(a.index, 2))
    if not pairs:
        return float("nan")
    return float(np.mean([np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) < 0 for i, j in pairs]))


def rank_changes(
    y, f_by_w: dict, systems: np.ndarray, *, share: float, n_draws: int, level: float, seed: int
) -> dict:
    """Mean share of system pairs ordered oppositely by two wordings, judge-only vs PPI-corrected (each
    system's items labelled at ``share``, the same slice for every wording), and vs the humans."""
    sys_ids = pd.unique(systems)
    human = pd.Series({s: y[systems == s].mean() for s in sys_ids})
    raw = {w: pd.Series({s: f[systems == s].mean() for s in sys_ids}) for w, f in f_by_w.items()}
    wpairs = list(combinations(f_by_w, 2))
    before = float(np.mean([discordant_share(raw[a], raw[b]) for a, b in wpairs])) if wpairs else float("nan")
    before_h = float(np.mean([discordant_share(raw[w], human) for w in f_by_w]))
    rng = np.random.default_rng(seed)
    after, after_h = [], []
    for _ in range(n_draws):
        labelled = labelled_slice(systems, share, rng)
        if isinstance(labelled, dict):
            return labelled
        est = {}
        for w, f in f_by_w.items():
            est[w] = pd.Series(
                {
                    s: ppi_mean(
                        y[(systems == s) & labelled],
                        f[(systems == s) & labelled],
                        f[(systems == s) & ~labelled],
                        level=level,
                    ).estimate
                    for s in sys_ids
                }
            )
        after.append(np.mean([discordant_share(est[a], est[b]) for a, b in wpairs]) if wpairs else np.nan)
        after_h.append(np.mean([discordant_share(est[w], human) for w in f_by_w]))
    return {
        "n_systems": int(len(sys_ids)),
        "share_labelled": share,
        "draws": n_draws,
        "between_wordings_before": before,
        "between_wordings_after": float(np.nanmean(after)),
        "vs_humans_before": before_h,
        "vs_humans_after": float(np.nanmean(after_h)),
    }


def corrected_section(para, wordings, to_human, opts) -> dict:
    m = rater_matrix(para, wordings)
    first = para.drop_duplicates("item_id").set_index("item_id").reindex(m.index)
    y_all = first["human"].to_numpy(float)
    keep = ~np.isnan(y_all) & m.notna().all(axis=1).to_numpy()
    if keep.sum() < 10:
        return {
            "missing": f"only {int(keep.sum())} items with a human label and every wording's verdict (< 10)"
        }
    y = y_all[keep]
    f_by_w = {w: to_human(m[w].to_numpy(float)[keep]) for w in wordings}
    sizes = slice_sizes(y.size, opts.slices)
    per = {}
    for w, f in f_by_w.items():
        rows = [coverage(y, f, n, n_draws=opts.n_draws, level=opts.ppi_level, seed=opts.seed) for n in sizes]
        per[w] = rows
    out = {
        "per_wording": per,
        "level": opts.ppi_level,
        "all_human_mean": float(y.mean()),
        "n_items": int(y.size),
        "unit": "the humans' scale (judge scores mapped linearly onto the card's human_scale)",
        "source": SOURCES["corrected"],
    }
    systems = first["system"].to_numpy(object)[keep] if "system" in first.columns else None
    if systems is not None and pd.notna(systems).all() and len(pd.unique(systems)) >= 2:
        out["ranks"] = rank_changes(
            y,
            f_by_w,
            systems,
            share=opts.rank_share,
            n_draws=min(opts.n_draws, 100),
            level=opts.ppi_level,
            seed=opts.seed,
        )
        out["per_system"] = per_system(
            y, f_by_w, systems, share=opts.rank_share, level=opts.ppi_level, seed=opts.seed
        )
    else:
        out["ranks"] = {"missing": "the items carry no system (or one): no ranking to change"}
    out["rogan_gladen"] = rogan_gladen_section(y, f_by_w, opts)
    return out


def per_system(y, f_by_w: dict, systems: np.ndarray, *, share: float, level: float, seed: int) -> dict:
    """Per wording and system: the judge-only mean, the PPI++ estimate and interval from one seeded
    slice (``share`` of each system's items human-labelled, the same slice for every wording) and the
    all-human mean."""
    labelled = labelled_slice(systems, share, np.random.default_rng(seed))
    if isinstance(labelled, dict):
        return labelled
    out = {}
    for w, f in f_by_w.items():
        rows = {}
        for s in pd.unique(systems):
            m = systems == s
            r = ppi_mean(y[m & labelled], f[m & labelled], f[m & ~labelled], level=level)
            rows[str(s)] = {
                "judge_only": float(f[m].mean()),
                "ppi": r.estimate,
                "ci": [r.low, r.high],
                "n_labelled": r.n_labelled,
                "n": int(m.sum()),
                "human": float(y[m].mean()),
            }
        out[w] = rows
    return {"per_wording": out, "share_labelled": share}


def rogan_gladen_section(y, f_by_w: dict, opts) -> dict:
    """Rogan-Gladen corrected share of the top label, where judge and human labels are both binary
    (the two ends of the human scale); coverage of the all-human share over ``n_draws // 5`` slices."""
    ends = np.unique(y)
    if ends.size != 2 or any(np.unique(f).size > 2 or not np.isin(f, ends).all() for f in f_by_w.values()):
        return {"missing": "not a binary verdict against binary human labels (PPI++ above covers any scale)"}
    yb = (y == ends[1]).astype(float)
    n = min(opts.slices[0], yb.size // 2)
    rng = np.random.default_rng(opts.seed)
    draws = max(20, opts.n_draws // 5)
    per = {}
    for w, f in f_by_w.items():
        fb = (f == ends[1]).astype(float)
        cov, est = [], []
        for _ in range(draws):
            idx = rng.permutation(yb.size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = rogan_gladen(
                    yb[idx[:n]],
                    fb[idx[:n]],
                    fb[idx[n:]],
                    level=opts.ppi_level,
                    n_resamples=200,
                    seed=opts.seed,
                )
            if np.isfinite(r.estimate):
                cov.append(float(r.low <= yb.mean() <= r.high))
                est.append(r.estimate)
        per[w] = {
            "n": n,
            "defined_draws": len(cov),
            "coverage": float(np.mean(cov)) if cov else float("nan"),
            "mean_estimate": float(np.mean(est)) if est else float("nan"),
            "judge_share": float(fb.mean()),
        }
    return {
        "per_wording": per,
        "human_share": float(yb.mean()),
        "draws": draws,
        "source": "Rogan & Gladen (1978): (p + Sp - 1) / (Se + Sp - 1), Se and Sp from the labelled slice",
    }
