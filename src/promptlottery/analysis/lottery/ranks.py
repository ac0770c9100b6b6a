"""Analysis 6: rank reversals -- does the ranking of the evaluated systems survive a paraphrase?

Per configuration whose items come from several systems (the ``system`` column): each variant
ranks the systems by their mean verdict score (rank 1 = highest; ties share the best rank). Between
every pair of variants: Kendall's tau-b of the system means, the share of system pairs whose
order flips (strictly opposite orders; a tie on one side is not a flip) and the share of systems
whose rank changes. Each system's best and worst rank across the variants.
"""

from __future__ import annotations

import itertools
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from promptlottery.analysis.lottery.agreement_measures import estimate_with_ci
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.table import natural_key

if TYPE_CHECKING:
    from promptlottery.analysis.lottery.options import LotteryOptions


def _system_means(x: np.ndarray, codes: np.ndarray, n_sys: int, idx: np.ndarray) -> np.ndarray:
    """``(R, systems, judges)`` mean of ``x`` (items x judges) per system on each resample ``idx[r]``."""
    n_r = idx.shape[0]
    c = codes.astype(int)[idx] + (np.arange(n_r) * n_sys)[:, None]  # R x n: flat (resample, system) bins
    out = np.full((n_r, n_sys, x.shape[1]), np.nan)
    for j in range(x.shape[1]):
        xj = x[idx, j]
        ok = np.isfinite(xj)
        s = np.bincount(c[ok], weights=xj[ok], minlength=n_r * n_sys).reshape(n_r, n_sys)
        n = np.bincount(c[ok], minlength=n_r * n_sys).reshape(n_r, n_sys)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, j] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
    return out


def _ranks(means: np.ndarray) -> np.ndarray:
    """Rank of each system per resample and judge: 1 + systems with a strictly higher mean (NaN: absent)."""
    higher = (means[:, None, :, :] > means[:, :, None, :]).sum(axis=2)  # R x systems x judges
    return np.where(np.isfinite(means), 1.0 + higher, np.nan)


def _pair_stats(means: np.ndarray) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """(a, b, tau-b, flip share, rank-change share) for each pair of judges, one value per resample.

    Kendall's tau-b of the two judges' system means (the systems present in both), written over
    the sign matrices so that every resample is computed at once; equal to
    :func:`promptlottery.metrics.kendall_tau` on each resample (checked in the tests).
    """
    ranks = _ranks(means)
    n_sys = means.shape[1]
    iu = np.triu_indices(n_sys, 1)
    out = []
    for a, b in itertools.combinations(range(means.shape[2]), 2):
        ma, mb = means[:, :, a], means[:, :, b]
        both = np.isfinite(ma) & np.isfinite(mb)
        valid = (both[:, :, None] & both[:, None, :])[:, iu[0], iu[1]]
        with np.errstate(invalid="ignore"):
            dx = np.nan_to_num(np.sign(ma[:, :, None] - ma[:, None, :])[:, iu[0], iu[1]]) * valid
            dy = np.nan_to_num(np.sign(mb[:, :, None] - mb[:, None, :])[:, iu[0], iu[1]]) * valid
        n_pairs = valid.sum(axis=1)
        n1, n2 = (dx != 0).sum(axis=1), (dy != 0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = np.where(
                (n1 > 0) & (n2 > 0), (dx * dy).sum(axis=1) / np.sqrt(n1 * n2.astype(float)), np.nan
            )
            flips = np.where(n_pairs > 0, (dx * dy < 0).sum(axis=1) / n_pairs, np.nan)
            n_both = both.sum(axis=1)
            change = np.where(
                n_both > 0, ((ranks[:, :, a] != ranks[:, :, b]) & both).sum(axis=1) / n_both, np.nan
            )
        out.append((a, b, tau, flips, change))
    return out


class _MeanPairStat:
    """Mean over judge pairs of one rank statistic; ``batch`` computes every resample at once."""

    def __init__(self, which: int, n_sys: int):
        self.which, self.n_sys = which, n_sys

    def batch(self, idx: np.ndarray, x: np.ndarray, codes: np.ndarray) -> np.ndarray:
        vals = np.vstack([p[self.which] for p in _pair_stats(_system_means(x, codes, self.n_sys, idx))])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(vals, axis=0)

    def __call__(self, x: np.ndarray, codes: np.ndarray) -> float:
        return float(self.batch(np.arange(len(x))[None, :], x, codes)[0])


def rank_reversals(grid: JudgmentGrid, opts: LotteryOptions, *, return_distributions: bool = False):
    """Analysis 6. Returns ``{"summary", "pairs", "systems", "trajectories"}`` tables.

    ``opts.rank_score`` is ``"value"`` (the verdict's scale score) or ``"cont"`` (the unrounded
    weighted score). ``summary``: per configuration, the mean over variant pairs of tau, flip share
    and rank-change share with bootstrap CIs (items resampled, system means recomputed), or a note
    saying why there is nothing to rank. ``pairs``: the three numbers for every pair of variants.
    ``systems``: each system's best and worst rank. ``trajectories``: mean score and rank of every
    system under every variant (the data of the rank-trajectory plot). With
    ``return_distributions=True`` also returns ``{(config_id, statistic): bootstrap replicates}``.
    """
    summary, pairs, systems, traj = [], [], [], []
    dists: dict[tuple[str, str], np.ndarray] = {}
    for conf in grid:
        cid, order = conf.config_id, conf.order
        x = conf.matrix(str(opts.rank_score))
        sys = conf.systems(x.index)
        has = np.array([s is not None and not pd.isna(s) for s in sys])
        rec: dict[str, Any] = {
            "config_id": cid,
            "dataset": conf.first["dataset"],
            "backbone": conf.backbone,
            "n_variants": len(order),
        }
        names = sorted({str(s) for s in sys[has]}, key=natural_key)
        if len(names) < 2:
            rec.update(
                n_systems=len(names),
                n_items=int(has.sum()),
                note="n/a: fewer than 2 evaluated systems (the dataset's `system` column is empty)"
                if not names
                else "n/a: only one system",
            )
            summary.append(rec)
            continue
        codes = np.array([names.index(str(s)) for s in sys[has]])
        xv = x.to_numpy(dtype=float)[has]
        means3 = _system_means(xv, codes, len(names), np.arange(len(xv))[None, :])
        pairs += _pair_rows(cid, order, means3)
        s_rows, t_rows = _system_rows(cid, order, names, codes, means3[0], _ranks(means3)[0])
        systems += s_rows
        traj += t_rows
        rec.update(n_systems=len(names), n_items=int(has.sum()))
        summary.append(_summary_stats(rec, xv, codes, len(names), opts.resampling, dists))
    tables = {
        "summary": pd.DataFrame(summary),
        "pairs": pd.DataFrame(pairs),
        "systems": pd.DataFrame(systems),
        "trajectories": pd.DataFrame(traj),
    }
    return (tables, dists) if return_distributions else tables


def _pair_rows(cid: str, order: list, means3: np.ndarray) -> list[dict]:
    """The ``pairs`` rows of one configuration: tau, flip and rank-change share per variant pair."""
    return [
        {
            "config_id": cid,
            "variant_a": order[a],
            "variant_b": order[b],
            "kendall_tau": tau[0],
            "flip_share": flip[0],
            "rank_change_share": change[0],
        }
        for a, b, tau, flip, change in _pair_stats(means3)
    ]


def _system_rows(
    cid: str, order: list, names: list[str], codes: np.ndarray, means, ranks
) -> tuple[list, list]:
    """The ``systems`` rows (best and worst rank) and the ``trajectories`` rows of one configuration."""
    systems, traj = [], []
    for s, name in enumerate(names):
        r = ranks[s]
        systems.append(
            {
                "config_id": cid,
                "system": name,
                "n_items": int((codes == s).sum()),
                "best_rank": int(np.nanmin(r)),
                "worst_rank": int(np.nanmax(r)),
                "rank_range": int(np.nanmax(r) - np.nanmin(r)),
                "best_variant": order[int(np.nanargmin(r))],
                "worst_variant": order[int(np.nanargmax(r))],
            }
        )
        for j, var in enumerate(order):
            traj.append(
                {
                    "config_id": cid,
                    "system": name,
                    "variant": var,
                    "mean_score": means[s, j],
                    "rank": ranks[s, j],
                }
            )
    return systems, traj


def _summary_stats(
    rec: dict, xv: np.ndarray, codes: np.ndarray, n_systems: int, boot: dict, dists: dict
) -> dict:
    """``rec`` with the mean over variant pairs of each statistic and its bootstrap CI."""
    notes = []
    for k, name in enumerate(("kendall_tau", "flip_share", "rank_change_share")):
        e = estimate_with_ci(_MeanPairStat(k + 2, n_systems), xv, codes, **boot)
        rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = e.estimate, e.low, e.high
        if e.distribution is not None:
            dists[(rec["config_id"], name)] = e.distribution
        if e.note:
            notes.append(f"{name}: {e.note}")
    rec["note"] = "; ".join(notes)
    return rec
